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
