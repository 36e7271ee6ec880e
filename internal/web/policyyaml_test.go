package web

import (
	"encoding/json"
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

// TestPolicyYAMLKeepsWhatReviewersApproved: an "always" approval's target
// holds the agent's own argument values, which YAML 1.1 (what
// ParseDocument reads) may take for something else written plain: no, y,
// off are booleans there. What the editor shows reads back to the same
// document, so saving it unchanged changes no approval. Before, "no"
// became false (the approved call went back to review and a call with
// false, which nobody approved, was allowed), a key y became "true", and a
// key holding U+0085 made the policy pages fail (found by a review).
func TestPolicyYAMLKeepsWhatReviewersApproved(t *testing.T) {
	t.Parallel()
	for _, args := range []map[string]any{
		{"ticket": "T-1", "notify_customer": "no"},
		{"y": "yes", "n": "off", "on": "~", "when": "null"},
		{"note\u0085": "done\u0085", "big": json.Number("10000000000000001"), "t": "2001-12-14", "oct": "0777", "sexa": "1:20"},
	} {
		doc := policy.Document{Rules: []policy.Rule{{ID: "always-1", Tool: "tickets.close", Effect: policy.Allow,
			Target: &policy.Target{Args: args}}, {ID: "reads", Tool: "fs.read", Effect: policy.Allow}}}
		js, err := json.Marshal(doc)
		require.NoError(t, err)
		y, err := policyYAML(doc)
		require.NoError(t, err)
		back, err := policy.ParseDocument([]byte(y))
		require.NoError(t, err, y)
		again, err := json.Marshal(back)
		require.NoError(t, err)
		assert.Equal(t, string(js), string(again), "read back as shown:\n%s", y)
	}
}
