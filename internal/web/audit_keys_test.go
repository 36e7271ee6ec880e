package web_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apptest"
)

// The verify page shows the audit key's public half, and the keys it
// replaced in their order, so that an auditor can pin the one and a
// rotation can list it.
func TestVerifyPageShowsTheAuditKeys(t *testing.T) {
	t.Parallel()
	var previous []ed25519.PublicKey
	for range 2 {
		k, _, err := ed25519.GenerateKey(rand.Reader)
		require.NoError(t, err)
		previous = append(previous, k)
	}
	env := apptest.Start(t, apptest.Options{AuditPreviousKeys: previous})
	seed, err := os.ReadFile(filepath.Join(env.Config.DataDir, "audit.key"))
	require.NoError(t, err)
	raw, err := hex.DecodeString(strings.TrimSpace(string(seed)))
	require.NoError(t, err)
	current := ed25519.NewKeyFromSeed(raw).Public().(ed25519.PublicKey)

	b, _ := userSession(t, env, "audrey", "auditor")
	resp, page := b.get("/ui/audit/verify")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b64 := base64.StdEncoding.EncodeToString
	key := regexp.MustCompile(`(?s)<dd id="verify-key"><code>([^<]*)</code></dd>`).FindStringSubmatch(page)
	require.NotNil(t, key, page)
	assert.Equal(t, b64(current), key[1])
	prev := regexp.MustCompile(`(?s)<dd id="verify-previous-keys">(.*?)</dd>`).FindStringSubmatch(page)
	require.NotNil(t, prev, page)
	var shown []string
	for _, m := range regexp.MustCompile(`<code>([^<]*)</code>`).FindAllStringSubmatch(prev[1], -1) {
		shown = append(shown, m[1])
	}
	assert.Equal(t, []string{b64(previous[0]), b64(previous[1])}, shown, "oldest first")
}
