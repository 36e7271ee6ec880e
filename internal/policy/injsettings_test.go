package policy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestInjectionVerdictAtEachThreshold(t *testing.T) {
	t.Parallel()
	s := setup(t, `{"settings":{"result_injection_thresholds":{"caution":20,"escalate":50,"refuse":80}}}`, "")
	e := s.EffectiveSettings()
	require.Equal(t, Thresholds{Caution: 20, Escalate: 50, Refuse: 80}, e.ResultInjectionThresholds)
	for score, want := range map[int]string{0: VerdictNone, 19: VerdictNone, 20: VerdictCaution, 49: VerdictCaution,
		50: VerdictEscalate, 79: VerdictEscalate, 80: VerdictRefuse, 100: VerdictRefuse} {
		require.Equal(t, want, e.InjectionVerdict(score), "score %d", score)
	}
}

func TestInjectionVerdictDefaults(t *testing.T) {
	t.Parallel()
	e := Set{}.EffectiveSettings()
	// The defaults keep what flag always did: every finding kept and
	// flagged, none withheld; a high grade escalates.
	require.Equal(t, VerdictCaution, e.InjectionVerdict(1))
	require.Equal(t, VerdictCaution, e.InjectionVerdict(69))
	require.Equal(t, VerdictEscalate, e.InjectionVerdict(100))
}

func TestInjectionVerdictRedactIsStricter(t *testing.T) {
	t.Parallel()
	e := setup(t, `{"settings":{"result_injection_thresholds":{"caution":50,"refuse":90}}}`,
		`{"settings":{"result_injection_action":"redact"}}`).EffectiveSettings()
	require.Equal(t, VerdictRefuse, e.InjectionVerdict(1), "redact withholds every finding, below any threshold")
	require.Equal(t, VerdictNone, e.InjectionVerdict(0))
}

func TestThresholdsAgentOverridesFieldByField(t *testing.T) {
	t.Parallel()
	s := setup(t, `{"settings":{"result_injection_thresholds":{"caution":20,"escalate":50,"refuse":80}}}`,
		`{"settings":{"result_injection_thresholds":{"refuse":0}}}`)
	require.Equal(t, Thresholds{Caution: 20, Escalate: 50, Refuse: 0}, s.EffectiveSettings().ResultInjectionThresholds)
	o := s.Overrides()
	require.Equal(t, []Override{{Setting: "result_injection_thresholds", FleetValue: "caution=20,escalate=50,refuse=80",
		AgentValue: "caution=20,escalate=50,refuse=off"}}, o)
	require.True(t, o[0].Loosens(), "turning refuse off loosens the fleet's")
	b, err := json.Marshal(o[0])
	require.NoError(t, err)
	require.JSONEq(t, `{"setting":"result_injection_thresholds","fleet_value":"caution=20,escalate=50,refuse=80","agent_value":"caution=20,escalate=50,refuse=off","loosens":true}`, string(b))

	tighter := setup(t, `{"settings":{"result_injection_thresholds":{"refuse":80}}}`, `{"settings":{"result_injection_thresholds":{"refuse":60}}}`)
	require.False(t, tighter.Overrides()[0].Loosens())
}

func TestThresholdsValidation(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		`{"settings":{"result_injection_thresholds":{"caution":-1}}}`,
		`{"settings":{"result_injection_thresholds":{"refuse":101}}}`,
		`{"settings":{"result_injection_thresholds":{"sometimes":5}}}`,
	} {
		d, err := ParseDocument([]byte(doc))
		if err == nil {
			err = d.Validate()
		}
		require.Error(t, err, doc)
	}
}

// TestOverridesListLoosening: every agent setting that loosens the
// fleet's is listed and marked, the document's default included.
func TestOverridesListLoosening(t *testing.T) {
	t.Parallel()
	fleet := `{"default":"approve","settings":{"escalate_at":"medium","injection_action":"approve","amount_cap":100,"allowed_hosts":["a.com"],
		"separation_of_duties":true,"max_pending":10,"max_args_bytes":2048,"result_injection_action":"redact"}}`
	agent := `{"default":"allow","settings":{"escalate_at":"none","injection_action":"allow","amount_cap":1000,"allowed_hosts":["a.com","evil.com"],
		"separation_of_duties":false,"max_pending":100,"max_args_bytes":4096,"result_injection_action":"flag","deny_paths":["secrets"],"exec_preview":false}}`
	got := map[string]bool{}
	for _, o := range setup(t, fleet, agent).Overrides() {
		got[o.Setting] = o.Loosens()
	}
	require.Equal(t, map[string]bool{"default": true, "escalate_at": true, "injection_action": true, "amount_cap": true,
		"allowed_hosts": true, "separation_of_duties": true, "max_pending": true, "max_args_bytes": true,
		"result_injection_action": true, "deny_paths": false, "exec_preview": true}, got)

	// The same settings set tighter are listed, not marked.
	tight := `{"default":"deny","settings":{"escalate_at":"low","injection_action":"deny","amount_cap":10,"allowed_hosts":["a.com"],
		"separation_of_duties":true,"max_pending":5,"max_args_bytes":1024,"exec_preview":true}}`
	for _, o := range setup(t, fleet, tight).Overrides() {
		require.False(t, o.Loosens(), o.Setting)
	}
	o := setup(t, "", `{"default":"allow"}`).Overrides()
	require.Equal(t, []Override{{Setting: "default", FleetValue: "deny", AgentValue: "allow"}}, o)
	require.True(t, o[0].Loosens())
}
