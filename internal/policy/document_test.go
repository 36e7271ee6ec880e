package policy

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apperr"
)

func TestDocumentJSONRoundTrip(t *testing.T) {
	t.Parallel()
	in := `{
	  "default": "approve",
	  "rules": [
	    {"id": "big-spend", "tool": "payments.send", "effect": "approve",
	     "when": "args.amount > 100", "approvals": 2, "timeout": "15m", "risk": "medium"},
	    {"id": "reads", "tool": "fs.*", "effect": "allow"}
	  ],
	  "settings": {"injection_action": "deny", "escalate_at": "none", "default_timeout": "90s",
	               "amount_cap": 250.5, "allowed_hosts": []}
	}`
	doc, err := ParseDocument([]byte(in))
	require.NoError(t, err)
	require.Equal(t, Approve, doc.Default)
	require.Len(t, doc.Rules, 2)
	require.Equal(t, 15*time.Minute, doc.Rules[0].Timeout.Std())
	require.Equal(t, 2, doc.Rules[0].Approvals)
	require.Equal(t, Deny, *doc.Settings.InjectionAction)
	require.NotNil(t, doc.Settings.AllowedHosts, "an empty allowed_hosts is an override, not absence")

	out, err := json.Marshal(doc)
	require.NoError(t, err)
	want := `{"default":"approve","rules":[` +
		`{"id":"big-spend","tool":"payments.send","effect":"approve","when":"args.amount \u003e 100","approvals":2,"timeout":"15m","risk":"medium"},` +
		`{"id":"reads","tool":"fs.*","effect":"allow"}],` +
		`"settings":{"injection_action":"deny","escalate_at":"none","default_timeout":"1m30s","amount_cap":250.5,"allowed_hosts":[]}}`
	require.Equal(t, want, string(out))

	back, err := ParseDocument(out)
	require.NoError(t, err)
	require.Equal(t, doc, back)
}

func TestDocumentJSONOmitsEmpty(t *testing.T) {
	t.Parallel()
	out, err := json.Marshal(Document{Rules: []Rule{{ID: "a", Tool: "x", Effect: Deny}}})
	require.NoError(t, err)
	require.Equal(t, `{"rules":[{"id":"a","tool":"x","effect":"deny"}]}`, string(out))
}

func TestParseDocumentYAML(t *testing.T) {
	t.Parallel()
	yml := `
default: deny
rules:
  - id: big-spend
    tool: payments.send
    effect: approve
    when: args.amount > 100
    approvals: 2
    timeout: 15m
settings:
  escalate_at: critical
`
	doc, err := ParseDocument([]byte(yml))
	require.NoError(t, err)
	require.Equal(t, Deny, doc.Default)
	require.Equal(t, "args.amount > 100", doc.Rules[0].When)
	require.Equal(t, 15*time.Minute, doc.Rules[0].Timeout.Std())
	require.Equal(t, "critical", *doc.Settings.EscalateAt)
	_, err = Compile(doc, 1)
	require.NoError(t, err)
}

func TestParseDocumentRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
	}{
		{"unknown top-level field", `{"rules":[],"extra":1}`},
		{"unknown rule field", `{"rules":[{"id":"a","tool":"x","effect":"allow","approval":2}]}`},
		{"unknown settings field", `{"rules":[],"settings":{"escalate":"high"}}`},
		{"numeric timeout", `{"rules":[{"id":"a","tool":"x","effect":"approve","timeout":900}]}`},
		{"trailing data", `{"rules":[]} {"rules":[]}`},
		{"not an object", `[1,2]`},
		{"empty", "  \n"},
		{"bad yaml", "rules:\n  - id: [\n"},
		{"unknown yaml field", "rules: []\nfoo: bar\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseDocument([]byte(tt.in))
			require.Error(t, err)
			require.Equal(t, apperr.CodeInvalid, apperr.CodeOf(err))
		})
	}
}

func TestCompiledDocumentIsACopy(t *testing.T) {
	t.Parallel()
	doc := Document{
		Rules:    []Rule{{ID: "a", Tool: "x", Effect: Approve, Timeout: ptr(Duration(time.Minute))}},
		Settings: Settings{AllowedHosts: []string{"example.com"}, AmountCap: ptr(5.0)},
	}
	c, err := Compile(doc, 3)
	require.NoError(t, err)

	// Mutating the input after Compile does not change the policy.
	doc.Rules[0].Effect = Allow
	*doc.Rules[0].Timeout = Duration(time.Hour)
	doc.Settings.AllowedHosts[0] = "evil.com"
	*doc.Settings.AmountCap = 9

	got := c.Document()
	require.Equal(t, Approve, got.Rules[0].Effect)
	require.Equal(t, time.Minute, got.Rules[0].Timeout.Std())
	require.Equal(t, []string{"example.com"}, got.Settings.AllowedHosts)
	require.Equal(t, 5.0, *got.Settings.AmountCap)

	// Nor does mutating what Document returned.
	got.Rules[0].ID = "changed"
	*got.Settings.AmountCap = 1
	require.Equal(t, "a", c.Document().Rules[0].ID)
	require.Equal(t, 5.0, *c.Document().Settings.AmountCap)
	require.Equal(t, 3, c.Version())

	var nilPolicy *Compiled
	require.Equal(t, 0, nilPolicy.Version())
	require.Equal(t, []Rule{}, nilPolicy.Document().Rules)
}

func TestParseDocumentYAMLIsStrict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, line string
	}{
		{"duplicate top-level key", "default: deny\ndefault: allow\nrules: []\n", "line 2"},
		{"duplicate nested key", "rules:\n  - id: a\n    tool: x\n    effect: deny\n    effect: allow\n", "line 5"},
		{"duplicate settings key", "rules: []\nsettings:\n  escalate_at: high\n  escalate_at: none\n", "line 4"},
		{"second document", "default: deny\nrules: []\n---\ndefault: allow\nrules: []\n", "line 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseDocument([]byte(tt.in))
			require.Error(t, err)
			require.Equal(t, apperr.CodeValidation, apperr.CodeOf(err), "422: %v", err)
			require.Contains(t, err.Error(), tt.line)
		})
	}
	doc, err := ParseDocument([]byte("default: deny\nrules: []\n---\n"))
	require.NoError(t, err, "an empty trailing document marker is harmless")
	require.Equal(t, Deny, doc.Default)
}
