package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestMaxArgsBytes: args larger than settings.max_args_bytes (64 KiB by
// default, the agent's own setting when it has one) are refused with 413
// and nothing is stored.
func TestMaxArgsBytes(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	small := env.Agent("small", map[string]any{"rules": []map[string]any{{"id": "all", "tool": "*", "effect": "allow"}},
		"settings": map[string]any{"max_args_bytes": 2048}})
	big := env.Agent("big", map[string]any{"rules": []map[string]any{{"id": "all", "tool": "*", "effect": "allow"}}})

	_, err := small.Submit(ctx, client.SubmitRequest{Tool: "fs.write", Args: map[string]any{"content": strings.Repeat("a", 1500)}})
	require.NoError(t, err)
	_, err = small.Submit(ctx, client.SubmitRequest{Tool: "fs.write", Args: map[string]any{"content": strings.Repeat("a", 3000)}})
	assert.Equal(t, http.StatusRequestEntityTooLarge, client.StatusOf(err))
	_, err = big.Submit(ctx, client.SubmitRequest{Tool: "fs.write", Args: map[string]any{"content": strings.Repeat("a", 3000)}})
	require.NoError(t, err)
	_, err = big.Submit(ctx, client.SubmitRequest{Tool: "fs.write", Args: map[string]any{"content": strings.Repeat("a", 70<<10)}})
	assert.Equal(t, http.StatusRequestEntityTooLarge, client.StatusOf(err), "default 64 KiB")

	page, err := env.Auditor("audra").ListActions(ctx, nil)
	require.NoError(t, err)
	assert.Len(t, page.Actions, 2, "refused submits store nothing")
}
