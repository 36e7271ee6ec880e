package web

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/policy"
)

// TestPolicyYAMLRoundTrips: what the editor shows parses back to the same
// document, with each rule's fields in the API's order.
func TestPolicyYAMLRoundTrips(t *testing.T) {
	t.Parallel()
	src := []byte(`{"default":"deny","rules":[
		{"id":"reads","tool":"fs.read","effect":"allow"},
		{"id":"big-spend","tool":"payments.send","effect":"approve","when":"args.amount > 100 && args.to != \"acme: inc\"","approvals":2,"timeout":"15m"},
		{"id":"no-shell","tool":"shell.*","effect":"deny","risk":"high"}],
		"settings":{"amount_cap":500,"allowed_hosts":["api.example.com"],"injection_action":"deny"}}`)
	doc, err := policy.ParseDocument(src)
	require.NoError(t, err)
	y, err := policyYAML(doc)
	require.NoError(t, err)
	assert.Contains(t, y, "  - id: reads\n    tool: fs.read\n    effect: allow\n")
	back, err := policy.ParseDocument([]byte(y))
	require.NoError(t, err, y)
	assert.Equal(t, doc, back)

	empty, err := policyYAML(policy.Document{})
	require.NoError(t, err)
	back, err = policy.ParseDocument([]byte(empty))
	require.NoError(t, err, empty)
	assert.Empty(t, back.Rules)
}
