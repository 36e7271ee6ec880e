package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestBudgetPendingKeepsTheRulesRoute: every call a budget sends to a
// reviewer carries its route. A call in a conversation a grant covers,
// over a budget whose effect is approve, waits for a reviewer of its rule
// (its route names the rule's group: anyone else gets 403) and tells the
// rule's and the policy's notify targets (the store's
// TestGrantedCallOverABudgetKeepsItsRulesRoute races the grant's own
// attempt over the budget). A call an allow rule let through, over the
// budget, tells the policy's settings.notify; before, it was stored
// pending with no route, and no target heard of it.
func TestBudgetPendingKeepsTheRulesRoute(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	hook := newReceiver(t, nil)
	createTarget(t, env, webhookTarget("pay-hook", hook.srv.URL, "k"))
	createTarget(t, env, webhookTarget("all-hook", hook.srv.URL, "k"))
	fred, carol := env.Reviewer("fred"), env.Reviewer("carol")
	createGroup(t, env, "finance", "fred")
	agent := env.Agent("payer", map[string]any{
		"rules": []map[string]any{
			{"id": "pay", "tool": "payments.send", "effect": "approve", "timeout": "30m", "reviewers": []string{"finance"}, "notify": []string{"pay-hook"}},
			{"id": "refund", "tool": "payments.refund", "effect": "allow"},
		},
		"budgets":  []map[string]any{{"id": "wallet", "tool": "payments.*", "amount": "args.amount", "per": "24h", "limit": json.Number("100"), "effect": "approve"}},
		"settings": map[string]any{"notify": []string{"all-hook"}},
	})
	send := func(amount int) *client.Action {
		return submitIn(t, agent, "c1", "payments.send", map[string]any{"amount": amount, "to": "acme"})
	}

	first := send(60)
	require.Equal(t, "pending", first.Status)
	_, err := approveWith(t, fred, first.ID, "conversation")
	require.NoError(t, err)
	require.Equal(t, "approved", send(10).Status, "the grant approves what fits the budget (70 of 100 spent)")

	// 70 + 60 > 100: the grant's attempt goes over the budget, which
	// sends the call to a reviewer: one of finance.
	over := send(60)
	require.Equal(t, "pending", over.Status)
	assert.Equal(t, "budget", over.Decision.Source)
	n := notificationsOf(t, env.Admin, over.ID)
	require.NotEmpty(t, n.Escalations, "the rule's route is stored")
	assert.Equal(t, "pay", n.Escalations[0].RuleID)
	assert.Equal(t, []string{"finance"}, n.Escalations[0].Reviewers)
	assert.ElementsMatch(t, []string{"pay-hook", "all-hook"}, n.Escalations[0].Notify)
	var told []string
	for _, d := range n.Deliveries {
		if d.Event == "action.pending" {
			told = append(told, d.Target)
		}
	}
	assert.ElementsMatch(t, []string{"pay-hook", "all-hook"}, told, "the rule's and the policy's targets are told")
	full, err := carol.Get(ctx, over.ID)
	require.NoError(t, err)
	assert.Equal(t, 30*60, int(full.ExpiresAt.Sub(full.CreatedAt).Seconds()), "it waits as its rule says")
	_, err = carol.Approve(ctx, over.ID, full.ConfirmationPhrase, "")
	assert.Equal(t, http.StatusForbidden, client.StatusOf(err), "only finance approves what rule pay holds")
	got, err := fred.Approve(ctx, over.ID, full.ConfirmationPhrase, "")
	require.NoError(t, err)
	assert.Equal(t, "approved", got.Status)

	// An allowed call over the budget waits too, and settings.notify hears of it.
	refund, err := agent.Submit(ctx, client.SubmitRequest{Tool: "payments.refund", Args: map[string]any{"amount": 5}})
	require.NoError(t, err)
	require.Equal(t, "pending", refund.Status)
	n = notificationsOf(t, env.Admin, refund.ID)
	told = nil
	for _, d := range n.Deliveries {
		if d.Event == "action.pending" {
			told = append(told, d.Target)
		}
	}
	assert.Equal(t, []string{"all-hook"}, told)
}
