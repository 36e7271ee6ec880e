package hitl

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/risk"
)

// crmPolicy holds a vip call by two rules, the second naming reviewers.
const crmPolicy = `{"rules":[
	{"id":"writes","tool":"crm.update","effect":"approve","notify":["crm-chat"]},
	{"id":"vip","tool":"crm.update","effect":"approve","when":"args.account == 'vip'","reviewers":["leads"],
	 "escalate":[{"after":"5m","reviewers":["oncall"]}]},
	{"id":"money","tool":"crm.update","effect":"approve","when":"args.limit > 100","reviewers":["finance"]}]}`

func decideCRM(t *testing.T, args map[string]any) policy.Decision {
	t.Helper()
	doc, err := policy.ParseDocument([]byte(crmPolicy))
	require.NoError(t, err)
	c, err := policy.Compile(doc, 3)
	require.NoError(t, err)
	return policy.Set{Agent: c}.Decide(policy.Input{Tool: "crm.update", Args: args})
}

// TestRouteGivesEveryRuleItsClause: each matching rule that names anything
// stores its own step 0 and its escalation steps, tagged with the rule, so
// that a step widens its own rule's reviewers only.
func TestRouteGivesEveryRuleItsClause(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	settings := policy.EffectiveSettings{Notify: []string{"fleet-hook"}}
	d := decideCRM(t, map[string]any{"account": "vip", "limit": 999})
	r := routeFor(d, settings, now)
	require.NotNil(t, r)
	assert.Equal(t, []string{"crm-chat", "fleet-hook"}, r.Notify)
	type step struct {
		clause    int
		rule      string
		step      int
		notify    []string
		reviewers []string
		due       time.Time
	}
	var got []step
	for _, st := range r.Steps {
		got = append(got, step{st.Clause, st.RuleID, st.Step, st.Notify, st.Reviewers, st.Due})
	}
	assert.Equal(t, []step{
		{0, "writes", 0, []string{"crm-chat", "fleet-hook"}, []string{}, now},
		{1, "vip", 0, []string{}, []string{"leads"}, now},
		{1, "vip", 1, []string{}, []string{"oncall"}, now.Add(5 * time.Minute)},
		{2, "money", 0, []string{}, []string{"finance"}, now},
	}, got, "no reminder: a rule has escalation steps of its own")

	// One rule alone is clause 0, as every route stored before clauses.
	small := routeFor(decideCRM(t, map[string]any{"account": "small", "limit": 1}), settings, now)
	require.Len(t, small.Steps, 2)
	assert.Equal(t, RouteStep{RuleID: "writes", Step: 0, Due: now, Notify: []string{"crm-chat", "fleet-hook"}, Reviewers: []string{}}, small.Steps[0])
	assert.True(t, small.Steps[1].Reminder)
	assert.Zero(t, small.Steps[1].Clause)
}

// TestSeveralRulesWithReviewersAllowNoGrant: an action that several approve
// rules hold, one naming reviewers, allows neither a conversation grant nor
// an always rule (each tied to one rule); with none naming reviewers, or
// one rule alone (every decision stored before Decision.Rules), scopes are
// as before.
func TestSeveralRulesWithReviewersAllowNoGrant(t *testing.T) {
	action := func(d policy.Decision) *Action {
		return &Action{Tool: "crm.update", ConversationID: "c1", RequiredApprovals: 1, Risk: risk.Assessment{Level: risk.Low},
			Args: map[string]any{}, Decision: Decision{Effect: string(d.Effect), By: "policy", RuleID: d.RuleID,
				PolicyVersion: d.PolicyVersion, Source: d.Source, Reason: d.Reason, Rules: heldRules(d)}}
	}
	vip := action(decideCRM(t, map[string]any{"account": "vip", "limit": 1}))
	assert.Equal(t, []HeldRule{{Source: "agent", RuleID: "writes"}, {Source: "agent", RuleID: "vip", Reviewers: []string{"leads"}}},
		vip.Decision.Rules)
	assert.Contains(t, ScopeProblem(vip, ScopeConversation), "rule vip")
	assert.Contains(t, ScopeProblem(vip, ScopeAlways), "2 approve rules hold")
	assert.Empty(t, ScopeProblem(vip, ScopeOnce))

	small := action(decideCRM(t, map[string]any{"account": "small", "limit": 1}))
	assert.Nil(t, small.Decision.Rules, "one rule: nothing more to record")
	assert.Empty(t, ScopeProblem(small, ScopeConversation))
	assert.Empty(t, ScopeProblem(small, ScopeAlways))

	noReviewers := action(decideCRM(t, map[string]any{"account": "small", "limit": 1}))
	noReviewers.Decision.Rules = []HeldRule{{Source: "fleet", RuleID: "baseline"}, {Source: "agent", RuleID: "writes"}}
	assert.Empty(t, ScopeProblem(noReviewers, ScopeConversation))
	// "always" excepts the target from one rule: the others would still
	// hold the next identical call. Before, it was allowed and did nothing
	// the reviewer was told (found by a review).
	assert.Contains(t, ScopeProblem(noReviewers, ScopeAlways), "2 approve rules hold")

	// A decision stored before Decision.Rules reads as one rule's.
	var old Decision
	require.NoError(t, json.Unmarshal([]byte(`{"effect":"approve","by":"policy","rule_id":"writes","policy_version":3,"source":"agent","reason":"r"}`), &old))
	assert.Nil(t, old.Rules)
	b, err := json.Marshal(old)
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"rules"`, "omitted when one rule decided")
}
