package store

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/eventbus"
	"github.com/airlockhq/airlock/internal/groups"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/notify"
	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/testdb"
)

// spendingStore is the real store with one interleaving added: once, when
// ActiveGrant finds a grant, spend runs before the caller gets its id, as
// the agent's own concurrent call committing between a submit's first
// attempt (no grant assumed, the call fit the budget) and its grant
// attempt.
type spendingStore struct {
	*Store
	spend func(ctx context.Context)
}

func (r *spendingStore) ActiveGrant(ctx context.Context, k hitl.GrantKey) (string, error) {
	id, err := r.Store.ActiveGrant(ctx, k)
	if spend := r.spend; id != "" && spend != nil {
		r.spend = nil
		spend(ctx)
	}
	return id, err
}

// TestGrantedCallOverABudgetKeepsItsRulesRoute: a call a conversation
// grant approves, that then does not fit under a budget whose effect is
// approve (spent meanwhile by the agent's own concurrent call), waits for
// a reviewer of its rule: its route names the rule's reviewer group, so a
// reviewer outside it is refused (403), and tells the rule's notify
// targets; it waits as long as its rule says. Before, the grant's attempt
// skipped the route and the budget made the call pending without one: any
// reviewer could approve it and no target heard of it.
func TestGrantedCallOverABudgetKeepsItsRulesRoute(t *testing.T) {
	t.Parallel()
	s := New(testdb.New(t), nil)
	ctx := context.Background()
	_, err := s.CreateAgent(ctx, Agent{ID: "payer", Name: "payer", CreatedBy: "admin"})
	require.NoError(t, err)
	for _, name := range []string{"fred", "carol"} {
		_, err := s.CreateUser(ctx, User{Username: name, PasswordHash: "x", Roles: []auth.Role{auth.RoleReviewer}}, "admin")
		require.NoError(t, err)
	}
	_, err = s.CreateGroup(ctx, "admin", groups.Group{Name: "finance", Members: []string{"fred"}})
	require.NoError(t, err)
	mail := notify.Target{Name: "pay-hook", Kind: "email", To: []string{"payments@example.com"}} // never sent here: no deliverer runs
	_, err = s.CreateTarget(ctx, "admin", mail, mail)
	require.NoError(t, err)
	timeout := policy.Duration(30 * time.Minute)
	_, err = s.PutPolicy(ctx, AgentScope("payer"), policy.Document{
		Rules: []policy.Rule{
			{ID: "pay", Tool: "payments.send", Effect: policy.Approve, Timeout: &timeout,
				Reviewers: []string{"finance"}, Notify: []string{"pay-hook"}},
			{ID: "refund", Tool: "payments.refund", Effect: policy.Allow},
		},
		Budgets: []policy.Budget{{ID: "wallet", Tool: "payments.*", Amount: "args.amount", Per: policy.Duration(24 * time.Hour),
			Limit: json.Number("100"), Effect: policy.Approve}},
	}, "admin")
	require.NoError(t, err)
	rs := &spendingStore{Store: s}
	svc := hitl.NewService(hitl.Config{Store: rs, Bus: eventbus.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	submit := func(tool string, amount int) *hitl.Action {
		t.Helper()
		a, _, err := svc.Submit(ctx, "payer", "", hitl.SubmitRequest{Tool: tool, Args: map[string]any{"amount": amount}, ConversationID: "c1"})
		require.NoError(t, err)
		return a
	}

	first := submit("payments.send", 10)
	require.Equal(t, hitl.StatusPending, first.Status)
	_, err = svc.Approve(ctx, first.ID, "fred", hitl.ApproveRequest{Confirmation: first.Phrase, Scope: hitl.ScopeConversation})
	require.NoError(t, err)

	rs.spend = func(ctx context.Context) {
		spent := submit("payments.refund", 80)
		require.Equal(t, hitl.StatusApproved, spent.Status, "%+v", spent.Decision)
	}
	raced := submit("payments.send", 20) // fits 10 of 100, then 90 are spent: over
	require.Nil(t, rs.spend, "the grant was found, and the concurrent call spent")
	require.Equal(t, hitl.StatusPending, raced.Status)
	assert.Equal(t, policy.SourceBudget, raced.Decision.Source)
	require.NotNil(t, raced.ExpiresAt)
	assert.Equal(t, 30*time.Minute, raced.ExpiresAt.Sub(raced.CreatedAt), "it waits as its rule says")

	steps, err := s.RouteSteps(ctx, raced.ID)
	require.NoError(t, err)
	if assert.NotEmpty(t, steps, "the call carries its rule's route") {
		assert.Equal(t, "pay", steps[0].RuleID)
		assert.Equal(t, []string{"finance"}, steps[0].Reviewers)
	}
	deliveries, err := s.Deliveries(ctx, raced.ID)
	require.NoError(t, err)
	if assert.Len(t, deliveries, 1, "the rule's target is told") {
		assert.Equal(t, "pay-hook", deliveries[0].Target)
		assert.Equal(t, "action.pending", deliveries[0].Event)
	}

	_, err = svc.Approve(ctx, raced.ID, "carol", hitl.ApproveRequest{Confirmation: raced.Phrase})
	require.Equal(t, apperr.CodeForbidden, apperr.CodeOf(err), "carol is not in finance: %v", err)
	assert.Contains(t, err.Error(), "finance")
	got, err := svc.Approve(ctx, raced.ID, "fred", hitl.ApproveRequest{Confirmation: raced.Phrase})
	require.NoError(t, err)
	assert.Equal(t, hitl.StatusApproved, got.Status, "a member spends beyond a budget whose effect is approve")
}
