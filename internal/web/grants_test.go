package web_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestConsoleGrants: the agent page lists its live conversation grants;
// a reviewer revokes one there, an auditor sees it without the button.
func TestConsoleGrants(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("mailer", map[string]any{"rules": []map[string]any{{"id": "mail", "tool": "email.send", "effect": "approve"}}})
	rev, revAPI := userSession(t, env, "rita", "reviewer")
	aud, _ := userSession(t, env, "audra", "auditor")
	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com"}, ConversationID: "conv-7"})
	require.NoError(t, err)
	full, err := revAPI.Get(ctx, a.ID)
	require.NoError(t, err)
	_, err = revAPI.Approve(ctx, a.ID, full.ConfirmationPhrase, "conversation")
	require.NoError(t, err)
	grants, err := revAPI.Grants(ctx, "mailer", "")
	require.NoError(t, err)
	require.Len(t, grants, 1)

	resp, audPage := aud.get("/ui/agents/mailer")
	page := audPage
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, page, `data-grant="`+grants[0].ID+`"`)
	assert.Contains(t, page, "conv-7")
	assert.NotContains(t, page, "/grants/"+grants[0].ID+"/revoke", "auditors read only")

	resp, page = rev.get("/ui/agents/mailer")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "/grants/"+grants[0].ID+"/revoke")
	resp, _ = aud.post("/ui/agents/mailer/grants/"+grants[0].ID+"/revoke", url.Values{"csrf": {csrfOf(t, audPage)}})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, _ = rev.post("/ui/agents/mailer/grants/"+grants[0].ID+"/revoke", url.Values{"csrf": {csrfOf(t, page)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	grants, err = revAPI.Grants(ctx, "mailer", "")
	require.NoError(t, err)
	assert.Empty(t, grants)
	_, page = rev.get("/ui/agents/mailer?grant-revoked=1")
	assert.Contains(t, page, `id="no-grants"`)
	again, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com"}, ConversationID: "conv-7"})
	require.NoError(t, err)
	assert.Equal(t, "pending", again.Status)
}

// TestConsoleStopsAnApprovedAction: a reviewer cancels an approved action
// that has not run from its page.
func TestConsoleStopsAnApprovedAction(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("runner", map[string]any{"rules": []map[string]any{{"id": "all", "tool": "*", "effect": "allow"}}})
	rev, revAPI := userSession(t, env, "rita", "reviewer")
	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com"}})
	require.NoError(t, err)
	require.Equal(t, "approved", a.Status)

	resp, page := rev.get("/ui/actions/" + a.ID)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, `id="stop-form"`)
	resp, _ = rev.post("/ui/actions/"+a.ID+"/cancel", url.Values{"csrf": {csrfOf(t, page)}, "reason": {"wrong recipient"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	got, err := revAPI.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, "cancelled", got.Status)
	_, page = rev.get("/ui/actions/" + a.ID)
	assert.NotContains(t, page, `id="stop-form"`, "nothing left to stop")
	_, err = agent.ReportResult(ctx, a.ID, client.Result{Outcome: "succeeded"})
	assert.Equal(t, http.StatusConflict, client.StatusOf(err), "a cancelled action takes no result")
}

// TestConsoleQueuePages: the queue shows pending actions a page at a time,
// newest first, with a link to the older ones; the filters carry over.
func TestConsoleQueuePages(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("busy", map[string]any{"rules": []map[string]any{{"id": "mail", "tool": "email.send", "effect": "approve"}}})
	rev, _ := userSession(t, env, "rita", "reviewer")
	for i := range 130 {
		_, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"n": i}})
		require.NoError(t, err)
	}
	resp, page := rev.get("/ui/queue?agent=busy")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	first := strings.Count(page, `data-id="`)
	assert.Equal(t, 100, first)
	m := regexp.MustCompile(`id="queue-older" href="([^"]+)"|href="([^"]+)" id="queue-older"`).FindStringSubmatch(page)
	require.NotNil(t, m, "a link to the older page")
	link := html.UnescapeString(m[1] + m[2])
	assert.Contains(t, link, "agent=busy")
	resp, page = rev.get(link)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 30, strings.Count(page, `data-id="`))
	assert.NotContains(t, page, `id="queue-older"`)
	assert.Contains(t, page, `id="queue-newest"`)
}
