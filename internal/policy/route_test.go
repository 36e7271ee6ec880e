package policy

import (
	"errors"
	"testing"

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

func TestDecisionCarriesTheWinningRulesRoute(t *testing.T) {
	t.Parallel()
	agent := mustCompile(t, `{"rules":[
		{"id":"pay","tool":"payments.send","effect":"approve","notify":["chat"],"reviewers":["treasury"],
		 "escalate":[{"after":"5m","notify":["pager"]},{"after":"10m","reviewers":["oncall"]}]},
		{"id":"mail","tool":"email.send","effect":"approve"},
		{"id":"read","tool":"fs.read","effect":"allow"}]}`, 1)
	set := Set{Agent: agent}
	d := set.Decide(Input{Tool: "payments.send", Args: map[string]any{}})
	assert.Equal(t, []string{"chat"}, d.Route.Notify)
	assert.Equal(t, []string{"treasury"}, d.Route.Reviewers)
	require.Len(t, d.Route.Escalate, 2)
	assert.Equal(t, "10m", d.Route.Escalate[1].After.String())
	assert.True(t, set.Decide(Input{Tool: "email.send", Args: map[string]any{}}).Route.Empty())
	assert.True(t, set.Decide(Input{Tool: "fs.read", Args: map[string]any{}}).Route.Empty(), "an allow has no route")

	refs := agent.Document().References()
	assert.Equal(t, []string{"chat", "pager"}, refs.Targets)
	assert.Equal(t, []string{"oncall", "treasury"}, refs.Groups)
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
