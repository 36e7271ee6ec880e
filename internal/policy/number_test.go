package policy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConditionsCompareNumbersExactly: numbers reach conditions exactly as
// sent, so a number never matches a rule written for its neighbour, however
// it is spelled, and a nested or listed number is as exact as a top-level one.
func TestConditionsCompareNumbersExactly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		amount string
		when   string
		want   bool
	}{
		{"10000000000000001", "args.amount == 10000000000000000", false},
		{"10000000000000001", "args.amount == 10000000000000001", true},
		{"10000000000000001", "args.amount > 10000000000000000", true},
		{"1.0000000000000001e16", "args.amount == 10000000000000000", false},
		{"1.0000000000000001e16", "args.amount == 10000000000000001", true},
		{"1e16", "args.amount == 10000000000000001", false},
		{"1e16", "args.amount == 10000000000000000", true},
		{"10000000000000000.0", "args.amount == 10000000000000000", true},
		{"9223372036854775808", "args.amount == 9223372036854775807", false},
		{"9223372036854775808", "args.amount > 9223372036854775807", true},
		{"18446744073709551617", "args.amount == 18446744073709551615u", false},
		{"18446744073709551617", "args.amount > 18446744073709551615u", true},
		{"18446744073709551617", "args.amount == 18446744073709551616.0", false},
		{"0.1", "args.amount == 0.1", true},
		{"0.10000000000000000001", "args.amount == 0.1", false},
		{"0.10000000000000000001", "args.amount != 0.1", true},
		{"100.5", "args.amount > 100", true},
		{"100", "args.amount == 100.0", true},
		{"1e400", "args.amount > 1e300", true},
		{"1e400", "args.amount == 1e300", false},
	}
	for _, tt := range tests {
		t.Run(tt.amount+" "+tt.when, func(t *testing.T) {
			t.Parallel()
			c, err := Compile(Document{Rules: []Rule{
				{ID: "top", Tool: "*", Effect: Approve, When: "has(args.amount) && " + tt.when},
				{ID: "nested", Tool: "*", Effect: Deny, When: "has(args.n) && args.n.list.exists(x, " + replaceAmount(tt.when) + ")"},
			}}, 1)
			require.NoError(t, err)
			n := json.Number(tt.amount)
			for _, args := range []map[string]any{
				{"amount": n},
				{"n": map[string]any{"list": []any{n}}},
			} {
				got := Set{Agent: c, Fleet: mustCompile(t, `{"settings":{"injection_action":"allow","escalate_at":"none"}}`, 1)}.Decide(Input{Tool: "payments.send", Args: args})
				require.NotContains(t, got.Reason, "condition error")
				if tt.want {
					require.NotEqual(t, SourceDefault, got.Source, "%v: %s", args, got.Reason)
				} else {
					require.Equal(t, SourceDefault, got.Source, "%v: %s", args, got.Reason)
				}
			}
		})
	}
}

func replaceAmount(when string) string {
	out := []byte{}
	for i := 0; i < len(when); i++ {
		if len(when[i:]) >= len("args.amount") && when[i:i+len("args.amount")] == "args.amount" {
			out = append(out, 'x')
			i += len("args.amount") - 1
			continue
		}
		out = append(out, when[i])
	}
	return string(out)
}
