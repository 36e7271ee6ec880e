package httpapi_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestAmountCapZeroIsACap: settings.amount_cap 0, which a policy may set
// (a finite number >= 0), is a cap of 0: every amount passes it. Found by
// a review: the classifier took a cap of 0 for "not set" and used 1000,
// so an agent whose policy said no amount was safe had calls of up to
// 1000 allowed at low risk, and up to 10000 short of critical.
func TestAmountCapZeroIsACap(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("capped-at-zero", map[string]any{
		"rules":    []map[string]any{{"id": "orders", "tool": "orders.create", "effect": "allow"}},
		"settings": map[string]any{"amount_cap": 0},
	})
	a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "orders.create", Args: map[string]any{"amount": 500, "sku": "x"}})
	require.NoError(t, err)
	assert.Equal(t, "critical", a.Risk.Level, "%v", a.Risk.Reasons)
	assert.Contains(t, a.Risk.Reasons, "amount 500 exceeds cap 0 by more than 10x")
	assert.Equal(t, "pending", a.Status, "escalated by the default escalate_at: high")

	free, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "orders.create", Args: map[string]any{"amount": 0, "sku": "x"}})
	require.NoError(t, err)
	assert.Equal(t, "approved", free.Status, "an amount of 0 is within a cap of 0: %v", free.Risk.Reasons)
}
