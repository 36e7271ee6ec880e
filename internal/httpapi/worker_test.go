package httpapi_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

var execPolicy = map[string]any{"rules": []map[string]any{
	{"id": "run", "tool": "exec", "effect": "allow"},
	{"id": "review-run", "tool": "exec", "effect": "approve", "when": `args.argv[0] == "git"`},
}}

var execKinds = []string{"exec"}

func TestLeaseProtocol(t *testing.T) {
	t.Parallel()
	// Leases run out in 3 s: soon enough for the subtests that wait for
	// one to expire, long enough that a lease held across a few calls does
	// not run out on a loaded CI machine (at 400 ms, one did: the package
	// took 507 s instead of ~270).
	env := apptest.Start(t, apptest.Options{LeaseTTL: 3 * time.Second, ExpiryEvery: 20 * time.Millisecond})
	ctx := env.Ctx()
	agent := env.Agent("runner", execPolicy)
	wtok, err := env.Admin.IssueWorkerToken(ctx, "host-1", []string{"workspace:main"}, 0)
	require.NoError(t, err)
	w1 := env.Client(wtok.Token)
	wtok2, err := env.Admin.IssueWorkerToken(ctx, "host-2", []string{"workspace:main"}, 0)
	require.NoError(t, err)
	w2 := env.Client(wtok2.Token)
	alice := env.Reviewer("alice")
	targets := []string{"workspace:main"}

	t.Run("lease, heartbeat, complete; twice or stale is refused", func(t *testing.T) {
		a := submit(t, agent, "exec", map[string]any{"argv": []any{"ls"}, "workspace": "main"})
		require.Equal(t, "approved", a.Status)
		none, err := w1.Lease(ctx, execKinds, []string{"workspace:other"}, 0)
		require.NoError(t, err)
		assert.Nil(t, none, "a worker only gets jobs for what it serves")

		job, err := w1.Lease(ctx, execKinds, targets, time.Second)
		require.NoError(t, err)
		require.NotNil(t, job)
		assert.Equal(t, a.ID, job.ActionID)
		assert.Equal(t, []any{"ls"}, job.Args["argv"])
		running, err := agent.Get(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, "running", running.Status)

		_, err = w1.Heartbeat(ctx, job.ID, job.Fence)
		require.NoError(t, err)
		_, err = w2.Heartbeat(ctx, job.ID, job.Fence)
		assert.Equal(t, http.StatusConflict, client.StatusOf(err), "another worker cannot heartbeat this lease")
		_, err = w1.Complete(ctx, job.ID, job.Fence+1, client.JobResult{})
		assert.Equal(t, http.StatusConflict, client.StatusOf(err), "a wrong fence is refused")

		done, err := w1.Complete(ctx, job.ID, job.Fence, client.JobResult{ExitCode: 0, Stdout: "a\nb\n", DurationMS: 7})
		require.NoError(t, err)
		assert.Equal(t, "succeeded", done.Status)
		assert.JSONEq(t, `{"exit_code":0,"stdout":"a\nb\n","stderr":"","truncated":false,"duration_ms":7}`, string(done.Result))
		_, err = w1.Complete(ctx, job.ID, job.Fence, client.JobResult{ExitCode: 1})
		assert.Equal(t, http.StatusConflict, client.StatusOf(err), "completing twice is refused")

		_, err = agent.ReportResult(ctx, a.ID, client.Result{Outcome: "succeeded"})
		assert.Equal(t, http.StatusConflict, client.StatusOf(err), "agents do not report results of built-in actions")

		page, err := env.Admin.Audit(ctx, url.Values{"action_id": {a.ID}})
		require.NoError(t, err)
		assert.Equal(t, []string{"action.submitted", "action.running", "action.result"}, kinds(page.Events))
	})

	t.Run("a failing command fails the action", func(t *testing.T) {
		a := submit(t, agent, "exec", map[string]any{"argv": []any{"cat", "missing"}, "workspace": "main"})
		job, err := w1.Lease(ctx, execKinds, targets, time.Second)
		require.NoError(t, err)
		require.Equal(t, a.ID, job.ActionID)
		done, err := w1.Complete(ctx, job.ID, job.Fence, client.JobResult{ExitCode: 1, Stderr: "cat: missing: No such file"})
		require.NoError(t, err)
		assert.Equal(t, "failed", done.Status)
	})

	t.Run("a job is queued only once a reviewer approves", func(t *testing.T) {
		a := submit(t, agent, "exec", map[string]any{"argv": []any{"git", "status"}, "workspace": "main"})
		require.Equal(t, "pending", a.Status)
		none, err := w1.Lease(ctx, execKinds, targets, 0)
		require.NoError(t, err)
		assert.Nil(t, none)
		leased := make(chan *client.Job, 1)
		go func() {
			job, err := w1.Lease(ctx, execKinds, targets, 10*time.Second)
			assert.NoError(t, err)
			leased <- job
		}()
		time.Sleep(100 * time.Millisecond)
		_, err = approveWith(t, alice, a.ID, "")
		require.NoError(t, err)
		job := <-leased
		require.NotNil(t, job, "the long-polling worker is woken by the approval")
		assert.Equal(t, a.ID, job.ActionID)
		_, err = w1.Complete(ctx, job.ID, job.Fence, client.JobResult{})
		require.NoError(t, err)
	})

	t.Run("an expired lease fails the action as interrupted", func(t *testing.T) {
		a := submit(t, agent, "exec", map[string]any{"argv": []any{"ls"}, "workspace": "main"})
		job, err := w1.Lease(ctx, execKinds, targets, time.Second)
		require.NoError(t, err)
		got, err := agent.Wait(ctx, a.ID) // no heartbeat: the lease runs out
		require.NoError(t, err)
		for got.Status == "running" {
			time.Sleep(50 * time.Millisecond)
			got, err = agent.Get(ctx, a.ID)
			require.NoError(t, err)
		}
		assert.Equal(t, "failed", got.Status)
		assert.JSONEq(t, `{"error":"interrupted","exit_code":-1}`, string(got.Result))
		_, err = w1.Complete(ctx, job.ID, job.Fence, client.JobResult{})
		assert.Equal(t, http.StatusConflict, client.StatusOf(err), "too late")
		none, err := w2.Lease(ctx, execKinds, targets, 0)
		require.NoError(t, err)
		assert.Nil(t, none, "a job that was not retryable is not run again")
	})

	t.Run("a retryable job is leased again with a new fence and completes once", func(t *testing.T) {
		a := submit(t, agent, "exec", map[string]any{"argv": []any{"ls"}, "workspace": "main", "retryable": true})
		first, err := w1.Lease(ctx, execKinds, targets, time.Second)
		require.NoError(t, err)
		second, err := w2.Lease(ctx, execKinds, targets, 15*time.Second) // after the first lease expires
		require.NoError(t, err)
		require.NotNil(t, second)
		assert.Equal(t, a.ID, second.ActionID)
		assert.Greater(t, second.Fence, first.Fence)
		assert.Equal(t, 2, second.Attempt)
		_, err = w1.Complete(ctx, first.ID, first.Fence, client.JobResult{})
		assert.Equal(t, http.StatusConflict, client.StatusOf(err), "the first worker's result is refused")
		done, err := w2.Complete(ctx, second.ID, second.Fence, client.JobResult{})
		require.NoError(t, err)
		assert.Equal(t, "succeeded", done.Status)
		page, err := env.Admin.Audit(ctx, url.Values{"action_id": {a.ID}, "kind": {"action.result"}})
		require.NoError(t, err)
		assert.Len(t, page.Events, 1, "completed exactly once")
	})

	t.Run("roles", func(t *testing.T) {
		_, err := agent.Lease(ctx, execKinds, targets, 0)
		assert.Equal(t, http.StatusForbidden, client.StatusOf(err))
		_, err = w1.Submit(ctx, client.SubmitRequest{Tool: "fs.read", Args: map[string]any{}})
		assert.Equal(t, http.StatusForbidden, client.StatusOf(err))
		_, err = w1.Lease(ctx, []string{"shell"}, targets, 0)
		assert.Equal(t, http.StatusBadRequest, client.StatusOf(err))
	})
}

func TestBuiltinCallsNeedATarget(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("runner", execPolicy)
	for _, args := range []map[string]any{
		{"argv": []any{"ls"}},
		{"argv": []any{"ls"}, "workspace": "../etc"},
		{"argv": []any{"ls"}, "workspace": "a", "worktree": "r/b"},
	} {
		_, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "exec", Args: args})
		assert.Equal(t, http.StatusBadRequest, client.StatusOf(err), "%v", args)
	}
}

// TestRevokedWorkerTokenIsRefusedAtOnce: the lease and completion routes
// check a worker token's signature only and leave revocation to the
// statement that leases or completes (one round trip fewer); a revoked
// token is still refused at once with 401, whether or not a job waits, and
// its lease cannot be completed; nothing is leased or recorded for it.
func TestRevokedWorkerTokenIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{})
	ctx := env.Ctx()
	agent := env.Agent("runner", execPolicy)
	targets := []string{"workspace:main"}
	wtok, err := env.Admin.IssueWorkerToken(ctx, "host-r", targets, 0)
	require.NoError(t, err)
	w := env.Client(wtok.Token)

	first := submit(t, agent, "exec", map[string]any{"argv": []any{"ls"}, "workspace": "main"})
	job, err := w.Lease(ctx, execKinds, targets, time.Second)
	require.NoError(t, err)
	require.NotNil(t, job)
	require.Equal(t, first.ID, job.ActionID)

	require.NoError(t, env.Admin.RevokeToken(ctx, wtok.TokenID))
	_, err = w.Complete(ctx, job.ID, job.Fence, client.JobResult{ExitCode: 0})
	assert.Equal(t, http.StatusUnauthorized, client.StatusOf(err), "a revoked token cannot complete its lease")
	_, err = w.Lease(ctx, execKinds, targets, 0)
	assert.Equal(t, http.StatusUnauthorized, client.StatusOf(err), "nor lease when no job waits")
	second := submit(t, agent, "exec", map[string]any{"argv": []any{"ls"}, "workspace": "main"})
	_, err = w.Lease(ctx, execKinds, targets, time.Second)
	assert.Equal(t, http.StatusUnauthorized, client.StatusOf(err), "nor when one does")

	got, err := agent.Get(ctx, second.ID)
	require.NoError(t, err)
	assert.Equal(t, "approved", got.Status, "the second job was not leased")
	got, err = agent.Get(ctx, first.ID)
	require.NoError(t, err)
	assert.Equal(t, "running", got.Status, "the refused completion recorded nothing")

	// Another worker's valid token still leases the second job.
	other, err := env.Admin.IssueWorkerToken(ctx, "host-s", targets, 0)
	require.NoError(t, err)
	job2, err := env.Client(other.Token).Lease(ctx, execKinds, targets, time.Second)
	require.NoError(t, err)
	require.NotNil(t, job2)
	assert.Equal(t, second.ID, job2.ActionID)
}
