package web_test

import (
	"net/http"
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
