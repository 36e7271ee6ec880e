package policy

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRouteFieldsValidated(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		rule  string
		field string
	}{
		"notify on an allow rule":   {`{"id":"r","tool":"x","effect":"allow","notify":["a"]}`, "notify"},
		"reviewers on a deny rule":  {`{"id":"r","tool":"x","effect":"deny","reviewers":["a"]}`, "notify"},
		"a bad target name":         {`{"id":"r","tool":"x","effect":"approve","notify":["Not OK"]}`, "notify"},
		"a bad group name":          {`{"id":"r","tool":"x","effect":"approve","reviewers":["-x"]}`, "reviewers"},
		"a step without after":      {`{"id":"r","tool":"x","effect":"approve","escalate":[{"notify":["a"]}]}`, "escalate[0].after"},
		"a step with nothing to do": {`{"id":"r","tool":"x","effect":"approve","escalate":[{"after":"1m"}]}`, "escalate[0]"},
		"a step's bad group":        {`{"id":"r","tool":"x","effect":"approve","escalate":[{"after":"1m","reviewers":["A"]}]}`, "escalate[0].reviewers"},
		"a step after 8 days":       {`{"id":"r","tool":"x","effect":"approve","escalate":[{"after":"192h","notify":["a"]}]}`, "escalate[0].after"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			doc, err := ParseDocument([]byte(`{"rules":[` + tc.rule + `]}`))
			require.NoError(t, err)
			_, err = Compile(doc, 1)
			var ve *ValidationError
			require.True(t, errors.As(err, &ve), "got %v", err)
			assert.Equal(t, tc.field, ve.Field)
		})
	}
	doc, err := ParseDocument([]byte(`{"rules":[],"settings":{"notify":["UPPER"]}}`))
	require.NoError(t, err)
	assert.Error(t, doc.Validate())
}

func TestDecisionCarriesTheRulesRoute(t *testing.T) {
	t.Parallel()
	agent := mustCompile(t, `{"rules":[
		{"id":"pay","tool":"payments.send","effect":"approve","notify":["chat"],"reviewers":["treasury"],
		 "escalate":[{"after":"5m","notify":["pager"]},{"after":"10m","reviewers":["oncall"]}]},
		{"id":"mail","tool":"email.send","effect":"approve"},
		{"id":"read","tool":"fs.read","effect":"allow"}]}`, 1)
	set := Set{Agent: agent}
	d := set.Decide(Input{Tool: "payments.send", Args: map[string]any{}})
	require.Len(t, d.Route.Rules, 1)
	r := d.Route.Rules[0]
	assert.Equal(t, "agent", r.Source)
	assert.Equal(t, "pay", r.RuleID)
	assert.Equal(t, []string{"chat"}, d.Route.Notify())
	assert.Equal(t, [][]string{{"treasury"}}, d.Route.Reviewers())
	require.Len(t, r.Escalate, 2)
	assert.Equal(t, "10m", r.Escalate[1].After.String())
	mail := set.Decide(Input{Tool: "email.send", Args: map[string]any{}})
	assert.True(t, mail.Route.Empty())
	assert.Nil(t, mail.Route.Reviewers(), "every reviewer may approve")
	assert.True(t, set.Decide(Input{Tool: "fs.read", Args: map[string]any{}}).Route.Empty(), "an allow has no route")

	refs := agent.Document().References()
	assert.Equal(t, []string{"chat", "pager"}, refs.Targets)
	assert.Equal(t, []string{"oncall", "treasury"}, refs.Groups)
}

// TestEveryMatchingApproveRuleHoldsTheAction: when several approve rules
// match, the first names the decision, but each one's reviewers, notify
// and escalate apply, the shortest timeout and the most approvals: an
// earlier rule (a fleet one, or one listed before) never drops a later
// rule's reviewers.
func TestEveryMatchingApproveRuleHoldsTheAction(t *testing.T) {
	t.Parallel()
	fleet := mustCompile(t, `{"rules":[{"id":"baseline","tool":"crm.*","effect":"approve","timeout":"2h","notify":["ops"]}],
		"settings":{"default_timeout":"30m"}}`, 4)
	agent := mustCompile(t, `{"rules":[
		{"id":"writes","tool":"crm.update","effect":"approve","timeout":"1h","notify":["ops","crm-chat"]},
		{"id":"vip","tool":"crm.update","effect":"approve","when":"args.account == 'vip'","approvals":2,
		 "reviewers":["leads"],"escalate":[{"after":"10m","reviewers":["oncall"]}]},
		{"id":"money","tool":"crm.update","effect":"approve","when":"args.limit > 100","reviewers":["finance","cfo"]}]}`, 7)
	set := Set{Fleet: fleet, Agent: agent}
	update := func(account string, limit int) Decision {
		return set.Decide(Input{Tool: "crm.update", Args: map[string]any{"account": account, "limit": limit}})
	}

	d := update("vip", 999)
	require.Equal(t, Approve, d.Effect)
	assert.Equal(t, "baseline", d.RuleID, "the first rule in order names the decision")
	assert.Equal(t, "fleet", d.Source)
	var held []string
	for _, r := range d.Route.Rules {
		held = append(held, r.Source+":"+r.RuleID)
	}
	assert.Equal(t, []string{"fleet:baseline", "agent:writes", "agent:vip", "agent:money"}, held)
	assert.Equal(t, [][]string{{"leads"}, {"finance", "cfo"}}, d.Route.Reviewers(), "each rule's reviewers, none dropped")
	assert.Equal(t, []string{"ops", "crm-chat"}, d.Route.Notify(), "every rule's targets, once each")
	require.Len(t, d.Route.Rules[2].Escalate, 1, "each rule keeps its escalation steps")
	assert.Equal(t, 2, d.Approvals, "the most approvals")
	assert.Equal(t, 30*time.Minute, d.Timeout, "the shortest timeout: vip's and money's are the default")
	for _, want := range []string{`rule "baseline" (fleet policy v4)`, `rule "vip" (agent policy v7): args.account == 'vip'`, `rule "money"`} {
		assert.Contains(t, d.Reason, want)
	}

	d = update("small", 1)
	assert.Equal(t, "baseline", d.RuleID)
	assert.Len(t, d.Route.Rules, 2)
	assert.Nil(t, d.Route.Reviewers(), "neither rule names reviewers")
	assert.Equal(t, time.Hour, d.Timeout, "writes' hour is shorter than baseline's two")
	assert.Equal(t, 1, d.Approvals)

	// Without the fleet's rule the agent's first rule names the decision,
	// and a rule listed after it still restricts who may approve.
	d = Set{Agent: agent}.Decide(Input{Tool: "crm.update", Args: map[string]any{"account": "vip", "limit": 1}})
	assert.Equal(t, "writes", d.RuleID)
	assert.Equal(t, [][]string{{"leads"}}, d.Route.Reviewers())
	assert.Equal(t, 15*time.Minute, d.Timeout, "vip has no timeout: the built-in default")
}

func TestSettingsNotifyMergesFleetAndAgent(t *testing.T) {
	t.Parallel()
	fleet := mustCompile(t, `{"rules":[],"settings":{"notify":["ops"],"remind":false}}`, 1)
	agent := mustCompile(t, `{"rules":[],"settings":{"notify":["ops","team"]}}`, 1)
	s := Set{Fleet: fleet, Agent: agent}.EffectiveSettings()
	assert.Equal(t, []string{"ops", "team"}, s.Notify)
	require.NotNil(t, s.Remind)
	assert.False(t, *s.Remind)
	assert.Nil(t, Set{}.EffectiveSettings().Notify)
}
