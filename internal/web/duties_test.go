package web_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestConsoleSeparationOfDuties: the agent's owner sees a pending action
// read-only with the reason, and a forged approve post is refused.
func TestConsoleSeparationOfDuties(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	owner, _ := userSession(t, env, "olga", "reviewer")
	other, _ := userSession(t, env, "rita", "reviewer")
	_, err := env.Admin.Do(ctx, http.MethodPost, "/api/v1/agents", map[string]string{"id": "bot", "name": "Bot", "owner": "olga"}, nil)
	require.NoError(t, err)
	_, err = env.Admin.PutAgentPolicy(ctx, "bot", map[string]any{"rules": []map[string]any{{"id": "mail", "tool": "email.send", "effect": "approve"}},
		"settings": map[string]any{"separation_of_duties": true}})
	require.NoError(t, err)
	tok, err := env.Admin.IssueAgentToken(ctx, "bot", 0)
	require.NoError(t, err)
	a, err := env.Client(tok.Token).Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com"}})
	require.NoError(t, err)
	full, err := env.Admin.Get(ctx, a.ID)
	require.NoError(t, err)

	resp, page := owner.get("/ui/actions/" + a.ID)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, page, `id="cannot-approve"`)
	assert.Contains(t, page, "separation_of_duties")
	assert.NotContains(t, page, `name="confirmation"`, "no approve form for the owner")

	resp, _ = owner.post("/ui/actions/"+a.ID+"/approve", url.Values{"csrf": {csrfOf(t, page)}, "confirmation": {full.ConfirmationPhrase}, "scope": {"once"}})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)

	resp, page = other.get("/ui/actions/" + a.ID)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.NotContains(t, page, `id="cannot-approve"`)
	assert.Contains(t, page, `name="confirmation"`)
}
