package policy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConditions pins down how CEL sees decoded JSON arguments.
func TestConditions(t *testing.T) {
	t.Parallel()
	args := map[string]any{
		"amount":   150.0,
		"count":    3,
		"price":    uint(7),
		"currency": "EUR",
		"path":     "/Home/U/.bashrc",
		"argv":     []any{"rm", "-rf", "/"},
		"to":       map[string]any{"iban": "DE00", "trusted": false},
		"nothing":  nil,
	}
	tests := []struct {
		when string
		want bool
	}{
		{"args.amount > 100", true},
		{"args.amount > 100.0", true},
		{"args.amount == 150", true},
		{"args.amount < 150", false},
		{"args.amount >= 150u", true},
		{"args.count == 3.0", true},
		{"args.count < 3.5", true},
		{"args.price > 6", true},
		{"args.currency in ['EUR', 'USD']", true},
		{"args.path.lowerAscii().endsWith('.bashrc')", true},
		{"args.path.matches('^/home')", false},
		{"'-rf' in args.argv", true},
		{"args.argv.exists(a, a.startsWith('-r'))", true},
		{"args.argv.join(' ').contains('rm -rf')", true},
		{"size(args.argv) == 3", true},
		{"args.to.iban.startsWith('DE') && !args.to.trusted", true},
		{"has(args.memo)", false},
		{"has(args.amount)", true},
		{"args.?memo.orValue('') == ''", true},
		{"args.nothing == null", true},
		{"tool == 'payments.send'", true},
		{"agent.name == 'Bot' && agent.id.startsWith('bot-')", true},
		{"risk.level == 'high' && risk.score > 70 && risk.reasons[0] == 'big' && risk.injection", true},
	}
	for _, tt := range tests {
		t.Run(tt.when, func(t *testing.T) {
			t.Parallel()
			c, err := Compile(Document{Rules: []Rule{{ID: "r", Tool: "*", Effect: Approve, When: tt.when}}}, 1)
			require.NoError(t, err)
			got := Set{Agent: c, Fleet: mustCompile(t, `{"settings":{"injection_action":"allow","escalate_at":"none"}}`, 1)}.Decide(Input{
				Tool:  "payments.send",
				Args:  args,
				Agent: AgentInfo{ID: "bot-1", Name: "Bot"},
				Risk:  RiskInfo{Level: "high", Score: 80, Reasons: []string{"big"}, Injection: true},
			})
			require.NotContains(t, got.Reason, "condition error")
			if tt.want {
				require.Equal(t, "r", got.RuleID, got.Reason)
			} else {
				require.Equal(t, SourceDefault, got.Source, got.Reason)
			}
		})
	}
}

func TestConditionRuntimeCostLimitFailsClosed(t *testing.T) {
	t.Parallel()
	s := setup(t, "", `{"rules":[{"id":"scan","tool":"x","effect":"allow","when":"args.items.exists(i, i.contains('needle'))"}]}`)

	small := s.Decide(Input{Tool: "x", Args: map[string]any{"items": []any{"hay", "needle"}}})
	require.Equal(t, Allow, small.Effect, small.Reason)

	huge := make([]any, 50_000)
	for i := range huge {
		huge[i] = strings.Repeat("hay", 10)
	}
	got := s.Decide(Input{Tool: "x", Args: map[string]any{"items": huge}})
	require.Equal(t, Deny, got.Effect)
	require.Equal(t, "scan", got.RuleID)
	require.Contains(t, got.Reason, "cost limit exceeded")
	require.Contains(t, got.Reason, "(fail closed)")
}
