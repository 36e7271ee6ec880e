package policy

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/pathrule"
)

func TestEffectiveSettings(t *testing.T) {
	t.Parallel()
	defaults := EffectiveSettings{
		InjectionAction: Approve,
		EscalateAt:      "high",
		DefaultTimeout:  15 * time.Minute,
		AmountCap:       1000,
		AllowedHosts:    []string{},
		MaxPending:      1000,
		MaxArgsBytes:    64 << 10,
		ExecPreview:     true,

		ResultInjectionAction: "flag",
	}
	fleet := `{"settings":{"injection_action":"deny","escalate_at":"critical","default_timeout":"30m",
		"amount_cap":500,"allowed_hosts":["api.example.com"],"max_pending":50}}`
	tests := []struct {
		name  string
		fleet string
		agent string
		want  EffectiveSettings
	}{
		{"no policies: defaults", "", "", defaults},
		{"empty policies: defaults", `{}`, `{}`, defaults},
		{"fleet settings", fleet, `{}`, EffectiveSettings{
			InjectionAction: Deny, EscalateAt: "critical", DefaultTimeout: 30 * time.Minute, AmountCap: 500, AllowedHosts: []string{"api.example.com"},
			MaxPending: 50, MaxArgsBytes: 64 << 10, ResultInjectionAction: "flag", ExecPreview: true,
		}},
		{"agent overrides some", fleet, `{"settings":{"injection_action":"approve","amount_cap":50,"separation_of_duties":true,"max_args_bytes":2048,
			"result_injection_action":"redact"}}`, EffectiveSettings{
			InjectionAction: Approve, EscalateAt: "critical", DefaultTimeout: 30 * time.Minute, AmountCap: 50, AllowedHosts: []string{"api.example.com"},
			SeparationOfDuties: true, MaxPending: 50, MaxArgsBytes: 2048, ResultInjectionAction: "redact", ExecPreview: true,
		}},
		{"agent overrides all", fleet, `{"settings":{"injection_action":"allow","escalate_at":"","default_timeout":"2h",
			"amount_cap":0,"allowed_hosts":[]}}`, EffectiveSettings{
			InjectionAction: Allow, EscalateAt: "none", DefaultTimeout: 2 * time.Hour, AmountCap: 0, AllowedHosts: []string{},
			MaxPending: 50, MaxArgsBytes: 64 << 10, ResultInjectionAction: "flag", ExecPreview: true,
		}},
		{"agent alone over defaults", "", `{"settings":{"escalate_at":"medium","allowed_hosts":["a.com","b.com"]}}`, EffectiveSettings{
			InjectionAction: Approve, EscalateAt: "medium", DefaultTimeout: 15 * time.Minute, AmountCap: 1000, AllowedHosts: []string{"a.com", "b.com"},
			MaxPending: 1000, MaxArgsBytes: 64 << 10, ResultInjectionAction: "flag", ExecPreview: true,
		}},
		{"fleet turns the exec preview off", `{"settings":{"exec_preview":false}}`, `{}`, EffectiveSettings{
			InjectionAction: Approve, EscalateAt: "high", DefaultTimeout: 15 * time.Minute, AmountCap: 1000, AllowedHosts: []string{},
			MaxPending: 1000, MaxArgsBytes: 64 << 10, ResultInjectionAction: "flag", ExecPreview: false,
		}},
		{"agent turns it back on", `{"settings":{"exec_preview":false}}`, `{"settings":{"exec_preview":true}}`, EffectiveSettings{
			InjectionAction: Approve, EscalateAt: "high", DefaultTimeout: 15 * time.Minute, AmountCap: 1000, AllowedHosts: []string{},
			MaxPending: 1000, MaxArgsBytes: 64 << 10, ResultInjectionAction: "flag", ExecPreview: true,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := tt.want
			want.DenyPaths, want.ReadOnlyPaths = pathrule.BuiltinDeny, pathrule.BuiltinReadOnly // pathsettings_test.go
			want.ResultInjectionThresholds = resolveThresholds()                                // injsettings_test.go
			require.Equal(t, want, setup(t, tt.fleet, tt.agent).EffectiveSettings())
		})
	}
}

func TestEffectiveSettingsJSON(t *testing.T) {
	t.Parallel()
	s := Set{}.EffectiveSettings()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	require.JSONEq(t, `{"injection_action":"approve","escalate_at":"high","default_timeout":"15m","amount_cap":1000,"allowed_hosts":[],"separation_of_duties":false,"max_pending":1000,"max_args_bytes":65536,"result_injection_action":"flag","result_injection_thresholds":{"caution":1,"escalate":70,"refuse":0},"exec_preview":true,`+builtinPathsJSON+`}`, string(b))
	var back EffectiveSettings
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, s, back)
}

func TestEffectiveSettingsDoesNotAlias(t *testing.T) {
	t.Parallel()
	s := setup(t, `{"settings":{"allowed_hosts":["a.com"]}}`, "")
	got := s.EffectiveSettings()
	got.AllowedHosts[0] = "evil.com"
	require.Equal(t, []string{"a.com"}, s.EffectiveSettings().AllowedHosts)
}

func TestOverrides(t *testing.T) {
	t.Parallel()
	fleet := `{"settings":{"injection_action":"deny","amount_cap":500,"allowed_hosts":["a.com","b.com"]}}`
	tests := []struct {
		name  string
		fleet string
		agent string
		want  []Override
	}{
		{"no agent policy", fleet, "", nil},
		{"agent sets nothing", fleet, `{"rules":[]}`, nil},
		{"agent overrides every setting", fleet, `{"settings":{"injection_action":"allow","escalate_at":"","default_timeout":"1h30m",
			"amount_cap":12.5,"allowed_hosts":["c.com"]}}`, []Override{
			{Setting: "injection_action", FleetValue: "deny", AgentValue: "allow"},
			{Setting: "escalate_at", FleetValue: "high", AgentValue: "none"},
			{Setting: "default_timeout", FleetValue: "15m", AgentValue: "1h30m"},
			{Setting: "amount_cap", FleetValue: "500", AgentValue: "12.5"},
			{Setting: "allowed_hosts", FleetValue: "a.com,b.com", AgentValue: "c.com"},
		}},
		{"result_injection_action over the fleet's", `{"settings":{"result_injection_action":"redact"}}`, `{"settings":{"result_injection_action":"flag"}}`, []Override{
			{Setting: "result_injection_action", FleetValue: "redact", AgentValue: "flag"},
		}},
		{"result_injection_action over the default", "", `{"settings":{"result_injection_action":"redact"}}`, []Override{
			{Setting: "result_injection_action", FleetValue: "flag", AgentValue: "redact"},
		}},
		{"agent sets the fleet's own value", fleet, `{"settings":{"injection_action":"deny"}}`, []Override{
			{Setting: "injection_action", FleetValue: "deny", AgentValue: "deny"},
		}},
		{"no fleet policy: fleet values are defaults", "", `{"settings":{"escalate_at":"critical","allowed_hosts":[]}}`, []Override{
			{Setting: "escalate_at", FleetValue: "high", AgentValue: "critical"},
			{Setting: "allowed_hosts", FleetValue: "", AgentValue: ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, setup(t, tt.fleet, tt.agent).Overrides())
		})
	}
}

func TestOverrideJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Override{Setting: "amount_cap", FleetValue: "1000", AgentValue: "50"})
	require.NoError(t, err)
	require.JSONEq(t, `{"setting":"amount_cap","fleet_value":"1000","agent_value":"50"}`, string(b))
}
