package store_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

// TestBudgetSpent: what a budget spent is the exact sum of the amounts of
// approved actions in its window (a pending or denied action counts
// nothing), per budget and in the order asked.
func TestBudgetSpent(t *testing.T) {
	t.Parallel()
	s := store.New(testdb.New(t), nil)
	ctx := ctxT(t)
	_, err := s.CreateAgent(ctx, store.Agent{ID: "bot", Name: "bot", CreatedBy: "admin"})
	require.NoError(t, err)
	rat := func(v string) *big.Rat { r, _ := new(big.Rat).SetString(v); return r }
	charge := func(amount string) []hitl.BudgetCharge {
		return []hitl.BudgetCharge{{ID: "agent:a", Amount: rat(amount), Limit: rat("1"), Window: time.Hour},
			{ID: "agent:b", Amount: rat("2"), Limit: rat("100"), Window: time.Hour}}
	}
	for i, st := range []hitl.Status{hitl.StatusApproved, hitl.StatusApproved, hitl.StatusPending, hitl.StatusDenied} {
		a := newAction("bot", st, "", "")
		if st == hitl.StatusPending {
			a.Phrase = "email.send ABCD"
		}
		amount := []string{"0.1", "0.2", "0.4", "0.8"}[i]
		require.NoError(t, insert(t, s, a, hitl.Guard{Budgets: charge(amount)}))
	}
	got, err := s.BudgetSpent(ctx, "bot", charge("0"), time.Now())
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "3/10", got[0].RatString(), "0.1 + 0.2 exactly")
	assert.Equal(t, "4", got[1].RatString())

	_, err = s.BudgetSpent(ctx, "bot", nil, time.Now())
	require.NoError(t, err)
}

// TestSpendCountsFromItsApproval: a pending call's spend counts in a
// budget's window from when it was approved, not from when it was
// submitted. Before, a call submitted 25 hours ago and approved 20 hours
// ago had already left a 24-hour window: its 90 of 100 could be spent
// again within 4 hours of the approval. Both ways into approved: with a
// budget whose effect is deny checked at the approval (the store records
// the amount then) and without.
func TestSpendCountsFromItsApproval(t *testing.T) {
	t.Parallel()
	for _, hard := range []bool{false, true} {
		s := store.New(testdb.New(t), nil)
		ctx := ctxT(t)
		_, err := s.CreateAgent(ctx, store.Agent{ID: "bot", Name: "bot", CreatedBy: "admin"})
		require.NoError(t, err)
		wallet := []hitl.BudgetCharge{{ID: "agent:wallet", Amount: big.NewRat(90, 1), Limit: big.NewRat(100, 1), Window: 24 * time.Hour}}
		now := time.Now().UTC().Truncate(time.Microsecond)
		a := newAction("bot", hitl.StatusPending, "payments.send WALT", "")
		a.CreatedAt, a.UpdatedAt = now.Add(-25*time.Hour), now.Add(-25*time.Hour)
		require.NoError(t, insert(t, s, a, hitl.Guard{Budgets: wallet}))

		prev := a.Version
		a.Status, a.Version, a.UpdatedAt = hitl.StatusApproved, a.Version+1, now.Add(-20*time.Hour)
		fx := hitl.Effects{Decided: true}
		if hard {
			fx.Budgets = wallet
		}
		require.NoError(t, s.UpdateAction(ctx, a, prev, fx, a.AuditEvent("action.approved", "rita", nil)))
		spent, err := s.BudgetSpent(ctx, "bot", wallet, now)
		require.NoError(t, err)
		assert.Equal(t, "90", spent[0].RatString(), "hard=%v: approved 20 hours ago, it counts in the last 24", hard)
		spent, err = s.BudgetSpent(ctx, "bot", wallet, now.Add(5*time.Hour))
		require.NoError(t, err)
		assert.Equal(t, "0", spent[0].RatString(), "hard=%v: 25 hours after the approval it no longer does", hard)
	}
}
