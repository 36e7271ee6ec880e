package policy

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const budgetPolicy = `{"rules": [], "budgets": [
  {"id": "wallet", "tool": "payments.*", "amount": "args.amount", "per": "24h", "limit": 0.3, "effect": "deny"},
  {"id": "calls",  "tool": "*",          "amount": "1",           "per": "1h",  "limit": 100, "effect": "approve"}
]}`

// TestBudgetCharges: each budget matching the tool is charged, fleet
// budgets first, with the amount exact as the agent wrote it (0.1 is one
// tenth, not the nearest double), and an amount that cannot be computed is
// an error on its charge.
func TestBudgetCharges(t *testing.T) {
	set := Set{Fleet: mustCompile(t, `{"rules": [], "budgets": [{"id": "all", "tool": "*", "amount": "2", "per": "1m", "limit": 5, "effect": "deny"}]}`, 1),
		Agent: mustCompile(t, budgetPolicy, 3)}
	require.True(t, set.HasBudgets())
	cs := set.Charges(Input{Tool: "payments.send", Args: map[string]any{"amount": json.Number("0.1")}})
	require.Len(t, cs, 3)
	assert.Equal(t, []string{"fleet:all", "agent:wallet", "agent:calls"}, []string{cs[0].BudgetID, cs[1].BudgetID, cs[2].BudgetID})
	assert.Equal(t, "1/10", cs[1].Amount.RatString())
	assert.Equal(t, "3/10", cs[1].Limit.RatString())
	assert.Equal(t, 24*time.Hour, cs[1].Window)
	assert.Equal(t, Deny, cs[1].Effect)
	assert.Equal(t, "1", cs[2].Amount.RatString())

	exact := set.Charges(Input{Tool: "payments.send", Args: map[string]any{"amount": json.Number("0.10000000000000000000001")}})
	assert.Equal(t, "0.10000000000000000000001", FormatAmount(exact[1].Amount), "more digits than a double holds, kept")

	for _, args := range []map[string]any{{}, {"amount": "ten"}, {"amount": json.Number("-1")}} {
		cs := set.Charges(Input{Tool: "payments.send", Args: args})
		assert.Error(t, cs[1].Err, "%v", args)
	}
	assert.Len(t, set.Charges(Input{Tool: "email.send"}), 2, "only the budgets whose tool matches")
	assert.False(t, Set{Agent: mustCompile(t, designPolicy, 1)}.HasBudgets())
}

// TestBudgetValidation: every bad budget field is a *ValidationError
// naming it.
func TestBudgetValidation(t *testing.T) {
	good := `"id": "w", "tool": "payments.*", "amount": "args.amount", "per": "24h", "limit": 10, "effect": "approve"`
	for _, tc := range []struct{ name, budget, field, msg string }{
		{"bad CEL", `"id": "w", "tool": "x", "amount": "args.amount +", "per": "1h", "limit": 1, "effect": "deny"`, "budgets[0].amount", "Syntax error"},
		{"bool amount", `"id": "w", "tool": "x", "amount": "args.amount > 1", "per": "1h", "limit": 1, "effect": "deny"`, "budgets[0].amount", "must be a number"},
		{"no amount", `"id": "w", "tool": "x", "per": "1h", "limit": 1, "effect": "deny"`, "budgets[0].amount", "required"},
		{"allow", `"id": "w", "tool": "x", "amount": "1", "per": "1h", "limit": 1, "effect": "allow"`, "budgets[0].effect", "approve or deny"},
		{"negative limit", `"id": "w", "tool": "x", "amount": "1", "per": "1h", "limit": -1, "effect": "deny"`, "budgets[0].limit", ">= 0"},
		{"short window", `"id": "w", "tool": "x", "amount": "1", "per": "1ms", "limit": 1, "effect": "deny"`, "budgets[0].per", "between 1s"},
		{"bad tool", `"id": "w", "tool": "X", "amount": "1", "per": "1h", "limit": 1, "effect": "deny"`, "budgets[0].tool", "lower case"},
		{"bad id", `"id": "", "tool": "x", "amount": "1", "per": "1h", "limit": 1, "effect": "deny"`, "budgets[0].id", "id must be"},
	} {
		doc, err := ParseDocument([]byte(`{"rules": [], "budgets": [{` + tc.budget + `}]}`))
		require.NoError(t, err, tc.name)
		_, err = Compile(doc, 1)
		var ve *ValidationError
		require.True(t, errors.As(err, &ve), "%s: %v", tc.name, err)
		assert.Equal(t, tc.field, ve.Field, tc.name)
		assert.Contains(t, ve.Message, tc.msg, tc.name)
	}
	doc, err := ParseDocument([]byte(`{"rules": [], "budgets": [{` + good + `}, {` + good + `}]}`))
	require.NoError(t, err)
	_, err = Compile(doc, 1)
	assert.ErrorContains(t, err, "duplicate budget id")

	doc, err = ParseDocument([]byte(`{"rules": [], "settings": {"rate": {"per_minute": 0}}}`))
	require.NoError(t, err)
	_, err = Compile(doc, 1)
	assert.ErrorContains(t, err, "settings.rate.per_minute")
	fleet := mustCompile(t, `{"rules": [], "settings": {"rate": {"per_minute": 60}}}`, 1)
	assert.Equal(t, 60, Set{Fleet: fleet}.RatePerMinute())
	assert.Equal(t, 5, Set{Fleet: fleet, Agent: mustCompile(t, `{"rules": [], "settings": {"rate": {"per_minute": 5}}}`, 1)}.RatePerMinute(), "the agent's replaces the fleet's")
	assert.Equal(t, 0, Set{}.RatePerMinute())
	assert.Equal(t, []Override{{"rate.per_minute", "60", "5"}},
		Set{Fleet: fleet, Agent: mustCompile(t, `{"rules": [], "settings": {"rate": {"per_minute": 5}}}`, 1)}.Overrides(), "listed among the overrides")
}
