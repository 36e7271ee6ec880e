package worker_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/worker"
)

// TestStoppingWorkKillsTheSandbox: a long exec runs in bubblewrap on a
// worker host; suspending its agent (and, for another run, a reviewer's
// cancel) makes the next heartbeat answer stop, the worker kills the
// run's process group, and the action ends cancelled with a result saying
// who stopped it. The suspension also cancels the agent's pending action.
func TestStoppingWorkKillsTheSandbox(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	pol, err := worker.NewPolicy([]string{"sleep"}, false, false)
	require.NoError(t, err)
	ws := workspace(t)
	env := apptest.Start(t, apptest.Options{LeaseTTL: 1500 * time.Millisecond, ExpiryEvery: 50 * time.Millisecond, ExecPolicy: &pol})
	ctx := env.Ctx()
	doc := map[string]any{
		"rules": []map[string]any{
			{"id": "run", "tool": "exec", "effect": "allow"},
			{"id": "mail", "tool": "email.send", "effect": "approve", "timeout": "10m"},
		},
		"settings": map[string]any{"escalate_at": "none"},
	}
	w := startWorker(t, env, "host-s", ws, "sleep")
	sleep := func(c *client.Client, secs string) *client.Action {
		a, err := c.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{"argv": []any{"sleep", secs}, "workspace": "main"}})
		require.NoError(t, err)
		require.Equal(t, "approved", a.Status, "%+v", a.Decision)
		eventually(t, 20*time.Second, "the sandboxed sleep "+secs, func() bool { return sandboxed(t, "sleep", secs) })
		return a
	}

	t.Run("suspending the agent", func(t *testing.T) {
		agent := env.Agent("sleeper", doc)
		pending, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com"}})
		require.NoError(t, err)
		require.Equal(t, "pending", pending.Status)
		a := sleep(agent, "41.25")
		_, err = env.Admin.SuspendAgent(ctx, "sleeper")
		require.NoError(t, err)
		eventually(t, 10*time.Second, "the sandbox to be killed", func() bool { return processes(t, "sleep 41.25") == 0 })
		got, err := env.Admin.Get(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, "cancelled", got.Status)
		assert.JSONEq(t, `{"error":"agent sleeper was suspended by admin","exit_code":-1}`, string(got.Result))
		assert.Equal(t, "cancelled", statusOf(t, env.Admin, pending.ID))
		page, err := env.Admin.Audit(ctx, url.Values{"action_id": {a.ID}})
		require.NoError(t, err)
		assert.Equal(t, []string{"action.submitted", "action.running", "action.cancelled"}, kinds(page.Events), "no result is recorded after the stop")
	})

	t.Run("a reviewer's cancel", func(t *testing.T) {
		agent := env.Agent("napper", doc)
		rita := env.Reviewer("rita")
		a := sleep(agent, "42.75")
		got, err := rita.Stop(ctx, a.ID, "too slow")
		require.NoError(t, err)
		assert.Equal(t, "cancelled", got.Status)
		eventually(t, 10*time.Second, "the sandbox to be killed", func() bool { return processes(t, "sleep 42.75") == 0 })
		got, err = agent.Get(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, "cancelled", got.Status)
		assert.JSONEq(t, `{"error":"cancelled by rita: too slow","exit_code":-1}`, string(got.Result))
	})

	w.kill() // its output is read only once the process is gone
	assert.Contains(t, w.out.String(), "stopped by the server")
}
