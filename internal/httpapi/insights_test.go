package httpapi_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

var insightsPolicy = map[string]any{
	"default": "deny",
	"rules": []map[string]any{
		{"id": "pay", "tool": "payments.send", "effect": "approve"},
		{"id": "mail", "tool": "email.send", "effect": "approve", "timeout": "1s"},
	},
}

type insightsRowJSON struct {
	Key                 string  `json:"key"`
	Approvals           int     `json:"approvals"`
	Denials             int     `json:"denials"`
	Expiries            int     `json:"expiries"`
	ApprovalRate        float64 `json:"approval_rate"`
	MedianDecideMs      int64   `json:"median_decide_ms"`
	P90DecideMs         int64   `json:"p90_decide_ms"`
	QuickApprovals      int     `json:"quick_approvals"`
	LongestIdenticalRun int     `json:"longest_identical_run"`
}

func insightsBy(t *testing.T, env *apptest.Env, c *client.Client, by string) map[string]insightsRowJSON {
	t.Helper()
	var rep struct {
		Rows []insightsRowJSON `json:"rows"`
	}
	_, err := c.Do(env.Ctx(), http.MethodGet, "/api/v1/insights?by="+by, nil, &rep)
	require.NoError(t, err)
	out := map[string]insightsRowJSON{}
	for _, r := range rep.Rows {
		out[r.Key] = r
	}
	return out
}

type suggestionJSON struct {
	Agent string         `json:"agent"`
	Rule  map[string]any `json:"rule"`
	Evid  struct {
		Count       int      `json:"count"`
		Reviewers   []string `json:"reviewers"`
		ApproveRule string   `json:"approve_rule"`
		ActionID    string   `json:"action_id"`
	} `json:"evidence"`
}

// TestInsightsFromSeededDecisions: decisions made through the API give
// the expected counts, rates, quick approvals (a page opened a second
// before the approval, not an hour) and identical runs, per reviewer,
// agent and tool; five identical approvals suggest a rule, a call that
// was once denied does not.
func TestInsightsFromSeededDecisions(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{ExpiryEvery: 50 * time.Millisecond})
	ctx := env.Ctx()
	agent := env.Agent("payer", insightsPolicy)
	alice, bob := env.Reviewer("alice"), env.Reviewer("bob")
	approve := func(c *client.Client, a *client.Action) {
		t.Helper()
		full, err := c.Get(ctx, a.ID)
		require.NoError(t, err)
		_, err = c.Approve(ctx, a.ID, full.ConfirmationPhrase, "")
		require.NoError(t, err)
	}

	conn, err := pgx.Connect(ctx, env.DBURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	opened := func(id, reviewer string, ago time.Duration) {
		t.Helper()
		_, err := conn.Exec(ctx, `INSERT INTO action_views (action_id, reviewer, opened_at) VALUES ($1, $2, now() - $3::interval)`,
			id, reviewer, ago.String())
		require.NoError(t, err)
	}

	// alice: four approvals of different calls (two quick), one denial.
	for i, quick := range []bool{true, true, false, false} {
		a := submit(t, agent, "payments.send", map[string]any{"to": "acct-a", "amount": 100 + i})
		if quick {
			opened(a.ID, "alice", time.Second)
		} else {
			opened(a.ID, "alice", time.Hour)
		}
		approve(alice, a)
	}
	denied := submit(t, agent, "payments.send", map[string]any{"to": "acct-x", "amount": 1})
	_, err = alice.Deny(ctx, denied.ID, "no")
	require.NoError(t, err)
	// bob: the same call five times in a row, and a call he approved
	// five times but alice once denied.
	for range 5 {
		approve(bob, submit(t, agent, "payments.send", map[string]any{"to": "acct-b", "amount": 5}))
	}
	for range 5 {
		approve(bob, submit(t, agent, "payments.send", map[string]any{"to": "acct-x", "amount": 1}))
	}
	// One email nobody decides: it expires.
	mail := submit(t, agent, "email.send", map[string]any{"to": "x@example.com"})
	for {
		a, err := alice.Wait(ctx, mail.ID)
		require.NoError(t, err)
		if a.Status == "expired" {
			break
		}
	}

	byReviewer := insightsBy(t, env, alice, "reviewer")
	require.Len(t, byReviewer, 2, "expiries are no reviewer's: %v", byReviewer)
	a := byReviewer["alice"]
	assert.Equal(t, 4, a.Approvals)
	assert.Equal(t, 1, a.Denials)
	assert.Equal(t, 0, a.Expiries)
	assert.InDelta(t, 0.8, a.ApprovalRate, 1e-9)
	assert.Equal(t, 2, a.QuickApprovals)
	assert.Equal(t, 1, a.LongestIdenticalRun)
	assert.LessOrEqual(t, a.MedianDecideMs, a.P90DecideMs)
	b := byReviewer["bob"]
	assert.Equal(t, 10, b.Approvals)
	assert.InDelta(t, 1.0, b.ApprovalRate, 1e-9)
	assert.Equal(t, 0, b.QuickApprovals, "bob opened no page")
	assert.Equal(t, 5, b.LongestIdenticalRun)

	byAgent := insightsBy(t, env, alice, "agent")
	require.Len(t, byAgent, 1)
	p := byAgent["payer"]
	assert.Equal(t, 14, p.Approvals)
	assert.Equal(t, 1, p.Denials)
	assert.Equal(t, 1, p.Expiries)
	assert.InDelta(t, 14.0/15.0, p.ApprovalRate, 1e-9)

	byTool := insightsBy(t, env, alice, "tool")
	assert.Equal(t, 1, byTool["email.send"].Expiries)
	assert.Equal(t, 0, byTool["email.send"].Approvals)
	assert.Equal(t, 14, byTool["payments.send"].Approvals)

	var sugs struct {
		Suggestions []suggestionJSON `json:"suggestions"`
	}
	_, err = env.Auditor("audra").Do(ctx, http.MethodGet, "/api/v1/insights/suggestions", nil, &sugs)
	require.NoError(t, err)
	require.Len(t, sugs.Suggestions, 1, "the call alice once denied is not suggested")
	s := sugs.Suggestions[0]
	assert.Equal(t, "payer", s.Agent)
	assert.Equal(t, 5, s.Evid.Count)
	assert.Equal(t, []string{"bob"}, s.Evid.Reviewers)
	assert.Equal(t, "pay", s.Evid.ApproveRule)
	assert.Equal(t, "allow", s.Rule["effect"])
	assert.Equal(t, "payments.send", s.Rule["tool"])
	assert.Equal(t, map[string]any{"args": map[string]any{"to": "acct-b", "amount": float64(5)}}, s.Rule["target"])

	for _, tc := range []struct{ query, why string }{
		{"by=team", "unknown grouping"},
		{"since=yesterday", "not a time"},
		{"since=2999-01-01T00:00:00Z", "in the future"},
	} {
		_, err := alice.Do(ctx, http.MethodGet, "/api/v1/insights?"+tc.query, nil, nil)
		assert.Equal(t, http.StatusBadRequest, client.StatusOf(err), tc.why)
	}
	_, err = agent.Do(ctx, http.MethodGet, "/api/v1/insights?"+url.Values{"by": {"agent"}}.Encode(), nil, nil)
	assert.Equal(t, http.StatusForbidden, client.StatusOf(err), "agents read no insights")
}
