package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestJSONOutputSendsNoTerminalControls: --output json prints an agent's
// arguments too, on the reviewer's terminal as often as into a pipe. The
// characters a terminal acts on that JSON may carry raw (C1 controls such
// as CSI, DEL, bidi overrides) are written as \u escapes: the same JSON
// value, nothing sent to the terminal.
func TestJSONOutputSendsNoTerminalControls(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("billing", map[string]any{"rules": []map[string]any{{"id": "pay", "tool": "payments.send", "effect": "approve"}}})
	reviewer := env.Reviewer("rita")
	args := map[string]any{
		"to":   "acme\u202e tnuocca-gnorw",
		"memo": "\u009b2J\u009b1;1H\u009d0;owned\u009c\x7f",
		"ok":   "plain é ü 中 \U0001F600",
	}
	a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "payments.send", Args: args})
	require.NoError(t, err)

	r := newRunner(t, env.URL, reviewer.Token())
	for _, cmd := range [][]string{{"actions", "get", a.ID}, {"actions", "list"}} {
		res := r.run("", append(cmd, "--output", "json")...)
		require.Equal(t, 0, res.code, "%+v", res)
		assert.False(t, strings.ContainsAny(res.stdout, "\u202e\u009b\u009d\u009c\x7f"), "sent raw: %q", res.stdout)
		assert.Contains(t, res.stdout, `\u202e`)
		assert.Contains(t, res.stdout, "plain é ü 中 \U0001F600", "what a terminal does not act on is kept as is")

		// The same JSON value.
		var seen client.Action
		if cmd[1] == "list" {
			var page client.ActionPage
			require.NoError(t, json.Unmarshal([]byte(res.stdout), &page), res.stdout)
			require.Len(t, page.Actions, 1)
			seen = page.Actions[0]
		} else {
			require.NoError(t, json.Unmarshal([]byte(res.stdout), &seen), res.stdout)
		}
		assert.Equal(t, args, seen.Args)
	}
}
