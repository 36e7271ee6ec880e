package web_test

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestBrowserBudgets: a call over its budget waits for a reviewer; the
// queue marks it over budget and its page shows what the budget has left
// (spent, left, this call) and warns that approving spends beyond it.
// After the approval, what is left is shown on the next call's page.
func TestBrowserBudgets(t *testing.T) {
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("wallet", map[string]any{
		"rules":   []map[string]any{{"id": "pay", "tool": "payments.send", "effect": "allow"}},
		"budgets": []map[string]any{{"id": "daily", "tool": "payments.*", "amount": "args.amount", "per": "24h", "limit": json.Number("10"), "effect": "approve"}},
	})
	env.Reviewer("rita")
	pay := func(amount string) *client.Action {
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "payments.send", Args: map[string]any{"amount": json.Number(amount), "to": "acme"}})
		require.NoError(t, err)
		return a
	}
	require.Equal(t, "approved", pay("7.5").Status)
	over := pay("5")
	require.Equal(t, "pending", over.Status)
	assert.Contains(t, over.Decision.Reason, "2.5 left", "the agent reads what is left in the reason")

	c := startChrome(t)
	c.signIn(t, env, "/ui/queue", "rita", "rita-password-123", ".budget-over")
	assert.Equal(t, "over budget", c.text(t, ".budget-over"))
	c.do(t,
		chromedp.Navigate(env.URL+"/ui/actions/"+over.ID),
		chromedp.WaitVisible(chromedp.CSS("#budgets")),
	)
	assert.Equal(t, "7.5", c.text(t, "#budgets .budget-spent"))
	assert.Equal(t, "2.5", c.text(t, "#budgets .budget-left"))
	assert.Equal(t, "5", c.text(t, "#budgets .budget-amount"))
	assert.Contains(t, c.text(t, "#budgets .budget-over"), "Approving spends beyond budget agent:daily")
	c.screenshot(t, "action-budget.png")

	got, err := env.Reviewer("rob").Approve(ctx, over.ID, mustPhrase(t, env, over.ID), "once")
	require.NoError(t, err)
	require.Equal(t, "approved", got.Status)
	next := pay("1")
	require.Equal(t, "pending", next.Status, "12.5 spent: nothing is left")
	c.do(t,
		chromedp.Navigate(env.URL+"/ui/actions/"+next.ID),
		chromedp.WaitVisible(chromedp.CSS("#budgets")),
	)
	assert.Equal(t, "12.5", c.text(t, "#budgets .budget-spent"))
	assert.Equal(t, "0", c.text(t, "#budgets .budget-left"))
}

// mustPhrase reads a pending action's confirmation phrase as a reviewer.
func mustPhrase(t *testing.T, env *apptest.Env, id string) string {
	t.Helper()
	a, err := env.Reviewer("phil").Get(env.Ctx(), id)
	require.NoError(t, err)
	return a.ConfirmationPhrase
}
