package hitl

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apperr"
)

// TestFSPin: an fs.write or fs.patch is approved only with a ready,
// successful preview naming the state of the files it read, which the
// approval pins; while the preview is prepared, when it failed, or when
// it names no state (an older worker), approving is a conflict. Other
// tools pin nothing here.
func TestFSPin(t *testing.T) {
	t.Parallel()
	digest := strings.Repeat("ab", 32)
	for _, tool := range []string{ToolFSWrite, ToolFSPatch} {
		a := &Action{Tool: tool, Status: StatusPending}
		for preview, want := range map[string]string{
			``: "not ready yet",
			`{"status":"failed","error":"the patch does not apply"}`: "can only be denied",
			`{"status":"ready","diff":"+x"}`:                         "names no state",
			`{"status":"ready","commit":"` + digest[:40] + `"}`:      "names no state",
		} {
			a.Preview = []byte(preview)
			pin, err := fsPin(a)
			require.Error(t, err, "%s %s", tool, preview)
			assert.Equal(t, apperr.CodeConflict, apperr.CodeOf(err))
			assert.Contains(t, err.Error(), want, "%s %s", tool, preview)
			assert.Empty(t, pin)
		}
		a.Preview = []byte(`{"status":"ready","diff":"+x","commit":"` + digest + `"}`)
		pin, err := fsPin(a)
		require.NoError(t, err)
		assert.Equal(t, digest, pin)
		assert.NotNil(t, notBatchable(a), "%s is approved on its own page", tool)
	}
	pin, err := fsPin(&Action{Tool: "email.send", Status: StatusPending})
	require.NoError(t, err)
	assert.Empty(t, pin)
}
