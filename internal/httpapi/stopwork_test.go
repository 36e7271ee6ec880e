package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// stopPolicy runs exec and the worktree tools at once and sends mail to
// a reviewer.
var stopPolicy = map[string]any{
	"rules": []map[string]any{
		{"id": "run", "tool": "exec", "effect": "allow"},
		{"id": "trees", "tool": "worktree.*", "effect": "allow"},
		{"id": "mail", "tool": "email.send", "effect": "approve", "timeout": "10m"},
	},
	"settings": map[string]any{"escalate_at": "none"},
}

var allKinds = []string{"exec", "worktree.create", "worktree.diff", "worktree.merge", "worktree.abandon", "worktree.preview"}

// workerClient issues a worker token for targets and returns a client
// holding it.
func workerClient(t *testing.T, env *apptest.Env, name string, targets ...string) *client.Client {
	t.Helper()
	tok, err := env.Admin.IssueWorkerToken(env.Ctx(), name, targets, 0)
	require.NoError(t, err)
	return env.Client(tok.Token)
}

func statusIs(t *testing.T, c *client.Client, id, want string) *client.Action {
	t.Helper()
	a, err := c.Get(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, want, a.Status, "action %s", id)
	return a
}

func TestWorkerTokensServeOnlyTheirTargets(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("builder", stopPolicy)

	for _, bad := range [][]string{nil, {}, {"shell:x"}, {"workspace:"}, {"workspace:../etc"}, {"repo:a/b"}, {"docs"}} {
		_, err := env.Admin.IssueWorkerToken(ctx, "docs-builder", bad, 0)
		assert.Equal(t, http.StatusBadRequest, client.StatusOf(err), "targets %q", bad)
	}
	tok, err := env.Admin.IssueWorkerToken(ctx, "docs-builder", []string{"workspace:docs", "workspace:docs"}, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"workspace:docs"}, tok.Targets)
	docs := env.Client(tok.Token)
	api := workerClient(t, env, "api-builder", "workspace:api", "repo:api")

	a := submit(t, agent, "exec", map[string]any{"argv": []any{"ls"}, "workspace": "api"})
	require.Equal(t, "approved", a.Status)
	none, err := docs.Lease(ctx, execKinds, []string{"workspace:api", "workspace:docs"}, 0)
	require.NoError(t, err)
	assert.Nil(t, none, "a worker token never leases a job outside its targets, whatever the lease request claims")
	statusIs(t, env.Admin, a.ID, "approved")

	job, err := api.Lease(ctx, execKinds, []string{"workspace:api"}, time.Second)
	require.NoError(t, err)
	require.NotNil(t, job)
	require.Equal(t, a.ID, job.ActionID)

	// Made-up results: neither another worker nor another token of the
	// same worker name can report for a lease it does not hold.
	_, err = docs.Complete(ctx, job.ID, job.Fence, client.JobResult{Stdout: "all good"})
	assert.Equal(t, http.StatusConflict, client.StatusOf(err))
	_, err = docs.Heartbeat(ctx, job.ID, job.Fence)
	assert.Equal(t, http.StatusConflict, client.StatusOf(err))
	sameName := workerClient(t, env, "api-builder", "workspace:api")
	_, err = sameName.Complete(ctx, job.ID, job.Fence, client.JobResult{Stdout: "all good"})
	assert.Equal(t, http.StatusConflict, client.StatusOf(err), "the lease belongs to the token that took it")
	statusIs(t, agent, a.ID, "running")

	done, err := api.Complete(ctx, job.ID, job.Fence, client.JobResult{Stdout: "real\n"})
	require.NoError(t, err)
	assert.Equal(t, "succeeded", done.Status)
	assert.Contains(t, string(done.Result), `"stdout":"real\n"`)
}

func TestWorktreesBelongToTheirCreator(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	alice := env.Agent("alice-bot", stopPolicy)
	bob := env.Agent("bob-bot", stopPolicy)
	host := workerClient(t, env, "repo-host", "repo:app")

	created := submit(t, alice, "worktree.create", map[string]any{"repo": "app"})
	require.Equal(t, "approved", created.Status)
	job, err := host.Lease(ctx, allKinds, []string{"repo:app"}, time.Second)
	require.NoError(t, err)
	require.Equal(t, created.ID, job.ActionID)
	_, err = host.Complete(ctx, job.ID, job.Fence, client.JobResult{Worktree: "app/feature-1", Branch: "airlock/feature-1"})
	require.NoError(t, err)
	const wt = "app/feature-1"

	calls := []client.SubmitRequest{
		{Tool: "exec", Args: map[string]any{"argv": []any{"ls"}, "worktree": wt}},
		{Tool: "worktree.diff", Args: map[string]any{"worktree": wt}},
		{Tool: "worktree.merge", Args: map[string]any{"worktree": wt}},
		{Tool: "worktree.abandon", Args: map[string]any{"worktree": wt}},
	}
	for _, req := range calls {
		_, err := bob.Submit(ctx, req)
		assert.Equal(t, http.StatusNotFound, client.StatusOf(err), "bob's %s on alice's worktree", req.Tool)
		var ce *client.Error
		if assert.ErrorAs(t, err, &ce) {
			assert.Equal(t, "not_found", ce.Code)
		}
	}
	_, err = alice.Submit(ctx, client.SubmitRequest{Tool: "worktree.diff", Args: map[string]any{"worktree": "app/no-such"}})
	assert.Equal(t, http.StatusNotFound, client.StatusOf(err), "a worktree nobody created is nobody's")

	page, err := env.Admin.ListActions(ctx, url.Values{"agent": {"bob-bot"}})
	require.NoError(t, err)
	assert.Empty(t, page.Actions, "nothing of bob's was stored")
	none, err := host.Lease(ctx, allKinds, []string{"repo:app"}, 0)
	require.NoError(t, err)
	assert.Nil(t, none, "nothing was queued to run")

	mine := submit(t, alice, "exec", map[string]any{"argv": []any{"ls"}, "worktree": wt})
	assert.Equal(t, "approved", mine.Status, "the creator works in its worktree")
	job, err = host.Lease(ctx, allKinds, []string{"repo:app"}, time.Second)
	require.NoError(t, err)
	require.NotNil(t, job)
	assert.Equal(t, mine.ID, job.ActionID)
}

func TestSuspendAgentStopsItsWork(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	rogue := env.Agent("rogue", stopPolicy)
	calm := env.Agent("calm", stopPolicy)
	rita := env.Reviewer("rita")
	host := workerClient(t, env, "host", "workspace:main")
	ls := map[string]any{"argv": []any{"ls"}, "workspace": "main"}

	run := submit(t, rogue, "exec", ls)
	job, err := host.Lease(ctx, execKinds, []string{"workspace:main"}, time.Second)
	require.NoError(t, err)
	require.Equal(t, run.ID, job.ActionID)
	queued := submit(t, rogue, "exec", ls)
	pending := submit(t, rogue, "email.send", map[string]any{"to": "x@example.com"})
	require.Equal(t, "pending", pending.Status)
	others := submit(t, calm, "exec", ls)

	_, err = rita.SuspendAgent(ctx, "rogue")
	assert.Equal(t, http.StatusForbidden, client.StatusOf(err), "admins only")
	_, err = env.Admin.SuspendAgent(ctx, "nobody")
	assert.Equal(t, http.StatusNotFound, client.StatusOf(err))

	sus, err := env.Admin.SuspendAgent(ctx, "rogue")
	require.NoError(t, err)
	assert.True(t, sus.Suspended)
	assert.ElementsMatch(t, []string{run.ID, queued.ID, pending.ID}, sus.Cancelled)
	for _, id := range []string{run.ID, queued.ID, pending.ID} {
		statusIs(t, rita, id, "cancelled")
	}
	got := statusIs(t, rita, run.ID, "cancelled")
	assert.JSONEq(t, `{"error":"agent rogue was suspended by admin","exit_code":-1}`, string(got.Result))

	// The running job's worker is told to stop, and cannot report.
	hb, err := host.Heartbeat(ctx, job.ID, job.Fence)
	require.NoError(t, err)
	assert.True(t, hb.Stop)
	assert.Contains(t, hb.Reason, "suspended")
	_, err = host.Complete(ctx, job.ID, job.Fence, client.JobResult{Stdout: "done anyway"})
	assert.Equal(t, http.StatusConflict, client.StatusOf(err))
	statusIs(t, rita, run.ID, "cancelled")

	// Its approved job is never leased; another agent's is.
	next, err := host.Lease(ctx, execKinds, []string{"workspace:main"}, time.Second)
	require.NoError(t, err)
	require.NotNil(t, next)
	assert.Equal(t, others.ID, next.ActionID)
	none, err := host.Lease(ctx, execKinds, []string{"workspace:main"}, 0)
	require.NoError(t, err)
	assert.Nil(t, none)

	// Its pending action can no longer be approved; new calls are denied.
	_, err = approveWith(t, rita, pending.ID, "")
	assert.Equal(t, http.StatusConflict, client.StatusOf(err))
	for _, tool := range []string{"exec", "email.send"} {
		args := ls
		if tool == "email.send" {
			args = map[string]any{"to": "y@example.com"}
		}
		denied := submit(t, rogue, tool, args)
		assert.Equal(t, "denied", denied.Status, tool)
		assert.Contains(t, denied.Decision.Reason, "suspended", tool)
	}
	none, err = host.Lease(ctx, execKinds, []string{"workspace:main"}, 0)
	require.NoError(t, err)
	assert.Nil(t, none)

	page, err := env.Admin.Audit(ctx, url.Values{"action_id": {run.ID}})
	require.NoError(t, err)
	assert.Equal(t, []string{"action.submitted", "action.running", "action.cancelled"}, kinds(page.Events))
	last := page.Events[len(page.Events)-1]
	assert.Equal(t, "admin", last.Actor)
	assert.Equal(t, "running", last.Data["from"])
	page, err = env.Admin.Audit(ctx, url.Values{"agent": {"rogue"}, "kind": {"agent.suspended"}})
	require.NoError(t, err)
	assert.Len(t, page.Events, 1)

	res, err := env.Admin.ResumeAgent(ctx, "rogue")
	require.NoError(t, err)
	assert.False(t, res.Suspended)
	again := submit(t, rogue, "exec", ls)
	assert.Equal(t, "approved", again.Status, "resumed: policy decides again")
	statusIs(t, rita, pending.ID, "cancelled")
}

func TestStaffCancel(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("busy", stopPolicy)
	rita := env.Reviewer("rita")
	audrey := env.Auditor("audrey")
	host := workerClient(t, env, "host", "workspace:main")
	ls := map[string]any{"argv": []any{"ls"}, "workspace": "main"}

	run := submit(t, agent, "exec", ls)
	job, err := host.Lease(ctx, execKinds, []string{"workspace:main"}, time.Second)
	require.NoError(t, err)
	require.Equal(t, run.ID, job.ActionID)
	queued := submit(t, agent, "exec", ls)
	pending := submit(t, agent, "email.send", map[string]any{"to": "x@example.com"})

	_, err = audrey.Stop(ctx, run.ID, "")
	assert.Equal(t, http.StatusForbidden, client.StatusOf(err), "auditors never change anything")
	_, err = agent.Cancel(ctx, queued.ID)
	assert.Equal(t, http.StatusConflict, client.StatusOf(err), "an agent still withdraws only its own pending actions")

	got, err := rita.Stop(ctx, queued.ID, "wrong workspace")
	require.NoError(t, err)
	assert.Equal(t, "cancelled", got.Status)
	assert.JSONEq(t, `{"error":"cancelled by rita: wrong workspace"}`, string(got.Result))
	got, err = rita.Stop(ctx, run.ID, "")
	require.NoError(t, err)
	assert.Equal(t, "cancelled", got.Status)
	got, err = env.Admin.Stop(ctx, pending.ID, "")
	require.NoError(t, err)
	assert.Equal(t, "cancelled", got.Status, "an admin cancels too")
	_, err = rita.Stop(ctx, run.ID, "")
	assert.Equal(t, http.StatusConflict, client.StatusOf(err), "already cancelled")

	hb, err := host.Heartbeat(ctx, job.ID, job.Fence)
	require.NoError(t, err)
	assert.True(t, hb.Stop)
	assert.Equal(t, "cancelled by rita", hb.Reason)
	none, err := host.Lease(ctx, execKinds, []string{"workspace:main"}, 0)
	require.NoError(t, err)
	assert.Nil(t, none, "a cancelled approved action never runs")

	page, err := env.Admin.Audit(ctx, url.Values{"action_id": {queued.ID}, "kind": {"action.cancelled"}})
	require.NoError(t, err)
	require.Len(t, page.Events, 1)
	assert.Equal(t, "rita", page.Events[0].Actor)
	assert.Equal(t, "wrong workspace", page.Events[0].Data["reason"])
	assert.Equal(t, "approved", page.Events[0].Data["from"])
}

func TestRevokingATokenStopsItsActions(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	env.Agent("two-tokens", stopPolicy)
	rita := env.Reviewer("rita")
	host := workerClient(t, env, "host", "workspace:main")
	t1, err := env.Admin.IssueAgentToken(ctx, "two-tokens", 0)
	require.NoError(t, err)
	t2, err := env.Admin.IssueAgentToken(ctx, "two-tokens", 0)
	require.NoError(t, err)
	c1, c2 := env.Client(t1.Token), env.Client(t2.Token)
	mail := map[string]any{"to": "x@example.com"}

	p1 := submit(t, c1, "email.send", mail)
	p2 := submit(t, c2, "email.send", mail)
	q1 := submit(t, c1, "exec", map[string]any{"argv": []any{"ls"}, "workspace": "main"})
	require.Equal(t, "approved", q1.Status)

	woken := make(chan *client.Action, 1)
	go func() {
		var a client.Action
		_, err := rita.Do(ctx, http.MethodGet, "/api/v1/actions/"+p1.ID+"?wait=30s", nil, &a)
		assert.NoError(t, err)
		woken <- &a
	}()
	time.Sleep(100 * time.Millisecond) // let the long poll start waiting
	require.NoError(t, env.Admin.RevokeToken(ctx, t1.TokenID))
	assert.Equal(t, "cancelled", (<-woken).Status, "a waiter sees the revocation's cancel")

	statusIs(t, rita, p1.ID, "cancelled")
	statusIs(t, rita, q1.ID, "cancelled")
	statusIs(t, rita, p2.ID, "pending")
	none, err := host.Lease(ctx, execKinds, []string{"workspace:main"}, 0)
	require.NoError(t, err)
	assert.Nil(t, none, "the revoked token's approved job never runs")
	page, err := env.Admin.Audit(ctx, url.Values{"action_id": {p1.ID}, "kind": {"action.cancelled"}})
	require.NoError(t, err)
	require.Len(t, page.Events, 1)
	assert.Equal(t, "admin", page.Events[0].Actor)
	assert.Contains(t, page.Events[0].Data["reason"], "revoked")
	_, err = c1.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: mail})
	assert.Equal(t, http.StatusUnauthorized, client.StatusOf(err))
}
