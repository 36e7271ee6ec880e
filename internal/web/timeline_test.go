package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestTimelineSaysWhenAgentsShareACorrelationID: an agent chooses its
// calls' correlation IDs, so another agent can add events to a timeline.
// The timeline page then names every agent whose events it shows, with a
// warning to read each event's actor; a timeline of one agent carries no
// such warning. Before, nothing on the page set the intruder's events
// apart from the owner's but the actor of each.
func TestTimelineSaysWhenAgentsShareACorrelationID(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	allow := map[string]any{"rules": []map[string]any{{"id": "read", "tool": "fs.read", "effect": "allow"}}}
	owner, intruder := env.Agent("billing", allow), env.Agent("intruder", allow)
	aud, _ := userSession(t, env, "audra", "auditor")
	submit := func(c *client.Client, corr string) {
		_, err := c.Submit(ctx, client.SubmitRequest{Tool: "fs.read", Args: map[string]any{"path": "README.md"}, CorrelationID: corr})
		require.NoError(t, err)
	}
	submit(owner, "invoice-42")
	submit(intruder, "invoice-42")
	submit(owner, "invoice-43")

	resp, page := aud.get("/ui/audit/correlation/invoice-42")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, page, `id="timeline-agents"`)
	assert.Contains(t, page, "2 agents")
	assert.Contains(t, page, `href="/ui/agents/billing"`)
	assert.Contains(t, page, `href="/ui/agents/intruder"`)
	assert.Contains(t, page, "one agent can add events to another's timeline")

	resp, page = aud.get("/ui/audit/correlation/invoice-43")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, page, `id="timeline"`)
	assert.NotContains(t, page, `id="timeline-agents"`, "one agent's timeline")
}

// TestAuditPagesMarkHiddenCharacters: what an agent chooses (correlation,
// conversation and step IDs, its reason) shows its hidden characters
// marked on the audit pages and in the agent page's grants, as on the
// action page: a right-to-left override in a conversation ID cannot turn
// around the text an auditor or a reviewer revoking a grant reads. Before,
// the timeline, the audit search and the grants table wrote them as sent.
func TestAuditPagesMarkHiddenCharacters(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("mailer", map[string]any{"rules": []map[string]any{{"id": "mail", "tool": "email.send", "effect": "approve"}}})
	aud, _ := userSession(t, env, "audra", "auditor")
	rev, revAPI := userSession(t, env, "rita", "reviewer")
	const corr = "c\u202eabc"
	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com"},
		CorrelationID: corr, ConversationID: "conv\u202egnp.exe", StepID: "step\u2066x", Reason: "routine\u202eesaeler"})
	require.NoError(t, err)
	full, err := revAPI.Get(ctx, a.ID)
	require.NoError(t, err)
	_, err = revAPI.Approve(ctx, a.ID, full.ConfirmationPhrase, "conversation")
	require.NoError(t, err)

	// The part of each page that shows them (the audit search's form
	// keeps the auditor's own query as typed, to search with).
	pages := []struct {
		path, from string
		b          *browser
	}{
		{"/ui/audit/correlation/" + url.PathEscape(corr), `<main`, aud},
		{"/ui/audit?" + url.Values{"correlation_id": {corr}}.Encode(), `id="audit-events"`, aud},
		{"/ui/agents/mailer", `id="grants"`, rev},
	}
	for _, pg := range pages {
		resp, page := pg.b.get(pg.path)
		require.Equal(t, http.StatusOK, resp.StatusCode, pg.path)
		i := strings.Index(page, pg.from)
		require.GreaterOrEqual(t, i, 0, pg.path)
		shown := page[i:]
		for _, r := range []string{"\u202e", "\u2066"} {
			assert.False(t, strings.Contains(shown, r), "%s: %U written as sent", pg.path, []rune(r)[0])
		}
		assert.True(t, strings.Contains(shown, `class="hidden-char"`), "%s: hidden characters marked", pg.path)
	}
}
