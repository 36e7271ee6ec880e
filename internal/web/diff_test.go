package web

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/airlockhq/airlock/web/templates"
)

func TestLineDiff(t *testing.T) {
	t.Parallel()
	render := func(a, b string) string {
		var sb strings.Builder
		for _, l := range lineDiff(a, b) {
			sb.WriteString(string(l.Op) + l.Text + "\n")
		}
		return sb.String()
	}
	cases := []struct{ name, a, b, want string }{
		{"identical", "x\ny\n", "x\ny\n", " x\n y\n"},
		{"added line", "x\nz\n", "x\ny\nz\n", " x\n+y\n z\n"},
		{"removed line", "x\ny\nz\n", "x\nz\n", " x\n-y\n z\n"},
		{"changed line", "effect: approve\n", "effect: allow\n", "-effect: approve\n+effect: allow\n"},
		{"from nothing", "", "a\n", "+a\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, render(tc.a, tc.b))
		})
	}
}

func TestArgsSummaryMatchesTheQueueScript(t *testing.T) {
	t.Parallel()
	got := templates.ArgsSummary(map[string]any{"to": "<cfo@example.com>", "amount": 250, "tags": []any{"q3", "board"}, "nested": map[string]any{"b": 1, "a": true}})
	// What JSON.stringify gives, keys sorted (static/js/queue.js summary()).
	assert.Equal(t, `amount=250 nested={"a":true,"b":1} tags=["q3","board"] to="<cfo@example.com>"`, got)
	long := templates.ArgsSummary(map[string]any{"body": strings.Repeat("x", 300)})
	assert.Equal(t, 120, len([]rune(long)))
	assert.True(t, strings.HasSuffix(long, "…"))
}
