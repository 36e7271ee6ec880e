package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestWaitSaysTheStatusItSaw: when --timeout ends before the server
// answered at all, `actions wait` looks once more rather than saying
// "still pending" (exit 7) of an action that was decided long ago.
// Before, `--timeout 0s` (or any time shorter than one round trip) exited
// 7 for an action policy had approved, or a reviewer denied.
func TestWaitSaysTheStatusItSaw(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("billing", map[string]any{"rules": []map[string]any{
		{"id": "small", "tool": "payments.send", "effect": "allow", "when": "args.amount < 10"},
		{"id": "big", "tool": "payments.send", "effect": "approve", "when": "args.amount >= 10"},
	}})
	reviewer := env.Reviewer("rita")
	submit := func(amount int) *client.Action {
		a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "payments.send", Args: map[string]any{"amount": amount}})
		require.NoError(t, err)
		return a
	}
	approved := submit(5)
	require.Equal(t, "approved", approved.Status)
	denied := submit(50)
	_, err := reviewer.Deny(env.Ctx(), denied.ID, "no")
	require.NoError(t, err)
	pending := submit(60)

	r := newRunner(t, env.URL, reviewer.Token())
	for _, timeout := range []string{"0s", "1ns"} {
		res := r.run("", "actions", "wait", approved.ID, "--timeout", timeout)
		assert.Equal(t, 0, res.code, "approved: %+v", res)
		assert.Contains(t, res.stdout, "approved")

		res = r.run("", "actions", "wait", denied.ID, "--timeout", timeout)
		assert.Equal(t, 2, res.code, "denied: %+v", res)
		assert.Contains(t, res.stderr, "airlock: denied: ")

		res = r.run("", "actions", "wait", pending.ID, "--timeout", timeout)
		assert.Equal(t, 7, res.code, "pending: %+v", res)
		assert.Contains(t, res.stdout, "pending", "the action as seen")
		assert.Contains(t, res.stderr, "airlock: timeout: ")

		res = r.run("", "actions", "wait", "no-such-action", "--timeout", timeout)
		assert.Equal(t, 3, res.code, "not found: %+v", res)
	}
}
