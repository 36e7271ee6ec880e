package web_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestActionPageSaysAHardBudgetRefuses: for a call that does not fit under
// a budget whose effect is deny, the action page says approving is
// refused (not that it spends beyond it), with what is left. (The refusal
// itself is the service's, whoever approves: TestBudgetDenyHoldsAgainstApprovals.)
func TestActionPageSaysAHardBudgetRefuses(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("capped", map[string]any{
		"rules":   []map[string]any{{"id": "pay", "tool": "payments.send", "effect": "approve"}},
		"budgets": []map[string]any{{"id": "cap", "tool": "payments.*", "amount": "args.amount", "per": "24h", "limit": json.Number("10"), "effect": "deny"}},
	})
	pay := func(amount string) *client.Action {
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "payments.send", Args: map[string]any{"amount": json.Number(amount)}})
		require.NoError(t, err)
		require.Equal(t, "pending", a.Status)
		return a
	}
	first, second := pay("8"), pay("5")
	b, rev := userSession(t, env, "rita", "reviewer")
	full, err := rev.Get(ctx, first.ID)
	require.NoError(t, err)
	_, err = rev.Approve(ctx, first.ID, full.ConfirmationPhrase, "once")
	require.NoError(t, err)

	resp, page := b.get("/ui/actions/" + second.ID)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, page, `budget-over budget-hard`)
	assert.Contains(t, page, "Approving is refused: budget <code>agent:cap</code> denies beyond its limit (5 asked, 2 left)")
	assert.NotContains(t, page, "Approving spends beyond")
}
