package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// planPolicy: mail needs a reviewer (so a grant or an "always" rule can
// cover it), reading files is allowed, exec runs at once.
var planPolicy = map[string]any{
	"rules": []map[string]any{
		{"id": "mail", "tool": "email.send", "effect": "approve", "timeout": "10m"},
		{"id": "read", "tool": "fs.read", "effect": "allow"},
		{"id": "db", "tool": "db.query", "effect": "allow"},
		{"id": "dbreview", "tool": "sql.read", "effect": "approve", "timeout": "10m"},
		{"id": "run", "tool": "exec", "effect": "allow"},
	},
	"settings": map[string]any{"escalate_at": "none"},
}

func mail(to, conv string) client.SubmitRequest {
	return client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": to}, ConversationID: conv}
}

func submitReq(t *testing.T, c *client.Client, req client.SubmitRequest) *client.Action {
	t.Helper()
	a, err := c.Submit(context.Background(), req)
	require.NoError(t, err)
	return a
}

// deniedByPlanMode asserts a is plan mode's denial.
func deniedByPlanMode(t *testing.T, a *client.Action, what string) {
	t.Helper()
	assert.Equal(t, "denied", a.Status, what)
	assert.Equal(t, "plan_mode", a.Decision.Source, what)
	assert.Equal(t, "plan mode is on", a.Decision.Reason, what)
	assert.Empty(t, a.ConfirmationPhrase, what)
}

// TestPlanModeDeniesGrantsAndAlwaysRules: with plan mode on, for the agent
// or for the fleet, a call covered by a conversation grant and one covered
// by an "always" rule are both denied at submit with the reason, a read is
// still decided by policy, a pending call cannot be approved (409, still
// pending); with plan mode off again everything is as before.
func TestPlanModeDeniesGrantsAndAlwaysRules(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"agent", "fleet"} {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			env := apptest.Start(t)
			ctx := env.Ctx()
			agent := env.Agent("planner", planPolicy)
			alice := env.Reviewer("alice")
			workerClient(t, env, "host", "workspace:w") // exec in w is valid
			set := func(on bool, reason string) {
				t.Helper()
				if level == "agent" {
					pm, err := alice.SetAgentPlanMode(ctx, "planner", on, reason)
					require.NoError(t, err)
					assert.Equal(t, on, pm.Agent.On)
					assert.Equal(t, on, pm.On)
					return
				}
				pm, err := alice.SetFleetPlanMode(ctx, on, reason)
				require.NoError(t, err)
				assert.Equal(t, on, pm.On)
			}

			// An "always" rule and a conversation grant (in this order: a
			// grant holds for the policy version it was made under), both
			// working.
			other := submitReq(t, agent, mail("y@example.com", ""))
			_, err := approveWith(t, alice, other.ID, "always")
			require.NoError(t, err)
			first := submitReq(t, agent, mail("x@example.com", "conv-1"))
			_, err = approveWith(t, alice, first.ID, "conversation")
			require.NoError(t, err)
			granted := submitReq(t, agent, mail("x@example.com", "conv-1"))
			require.Equal(t, "approved", granted.Status)
			require.Equal(t, "grant", granted.Decision.Source)
			always := submitReq(t, agent, mail("y@example.com", ""))
			require.Equal(t, "approved", always.Status, "%+v", always.Decision)
			waiting := submitReq(t, agent, mail("z@example.com", ""))
			require.Equal(t, "pending", waiting.Status)
			// Query tools whose calls wait for a reviewer: one that reads,
			// and one that writes where redaction (a secret-named field)
			// hides it in the stored args the approval reads.
			readQuery := submitReq(t, agent, client.SubmitRequest{Tool: "sql.read", Args: map[string]any{"sql": "SELECT 1"}})
			require.Equal(t, "pending", readQuery.Status)
			hiddenWrite := submitReq(t, agent, client.SubmitRequest{Tool: "sql.read",
				Args: map[string]any{"credentials": map[string]any{"sql": "DELETE FROM users"}}})
			require.Equal(t, "pending", hiddenWrite.Status)

			set(true, "reviewing the plan first")

			deniedByPlanMode(t, submitReq(t, agent, mail("x@example.com", "conv-1")), "covered by a conversation grant")
			deniedByPlanMode(t, submitReq(t, agent, mail("y@example.com", "")), "covered by an always rule")
			deniedByPlanMode(t, submitReq(t, agent, mail("new@example.com", "")), "needing a reviewer")
			deniedByPlanMode(t, submitReq(t, agent, client.SubmitRequest{Tool: "exec", Args: map[string]any{"argv": []any{"ls"}, "workspace": "w"}}), "exec")
			read := submitReq(t, agent, client.SubmitRequest{Tool: "fs.read", Args: map[string]any{"path": "README.md"}})
			assert.Equal(t, "approved", read.Status, "a read follows the policy")
			query := submitReq(t, agent, client.SubmitRequest{Tool: "db.query", Args: map[string]any{"sql": "SELECT id FROM users WHERE id = 4"}})
			assert.Equal(t, "approved", query.Status, "a query that reads follows the policy")
			deniedByPlanMode(t, submitReq(t, agent, client.SubmitRequest{Tool: "db.query",
				Args: map[string]any{"sql": "DELETE FROM users WHERE id = 4"}}), "a query tool's write")
			deniedByPlanMode(t, submitReq(t, agent, client.SubmitRequest{Tool: "db.query",
				Args: map[string]any{"sql": "SELECT 1", "api_key": "abc123"}}), "a read whose args are redacted, judged as its approval would be")
			unknownRead := submitReq(t, agent, client.SubmitRequest{Tool: "search", Args: map[string]any{"q": "x"}})
			assert.Equal(t, "denied", unknownRead.Status, "a read with no rule: the policy's default")
			assert.NotEqual(t, "plan_mode", unknownRead.Decision.Source)

			// What was pending before stays pending and cannot be approved.
			_, err = approveWith(t, alice, waiting.ID, "once")
			assert.Equal(t, http.StatusConflict, client.StatusOf(err))
			assert.ErrorContains(t, err, "plan mode is on")
			statusIs(t, alice, waiting.ID, "pending")
			_, err = approveWith(t, alice, hiddenWrite.ID, "once")
			assert.Equal(t, http.StatusConflict, client.StatusOf(err), "a write under a redacted field is no read")
			statusIs(t, alice, hiddenWrite.ID, "pending")
			_, err = approveWith(t, alice, readQuery.ID, "once")
			assert.NoError(t, err, "a pending read is approved as usual")

			// Who, when and why are shown.
			pm, err := alice.AgentPlanModeOf(ctx, "planner")
			require.NoError(t, err)
			assert.True(t, pm.On)
			sw := pm.Agent
			if level == "fleet" {
				sw = pm.Fleet
				assert.False(t, pm.Agent.On)
			}
			assert.True(t, sw.On)
			assert.Equal(t, "alice", sw.SetBy)
			assert.Equal(t, "reviewing the plan first", sw.Reason)
			assert.NotNil(t, sw.SetAt)

			set(false, "plan approved")

			again := submitReq(t, agent, mail("x@example.com", "conv-1"))
			assert.Equal(t, "approved", again.Status, "the grant covers it again")
			assert.Equal(t, "grant", again.Decision.Source)
			assert.Equal(t, "approved", submitReq(t, agent, mail("y@example.com", "")).Status, "the always rule covers it again")
			_, err = approveWith(t, alice, waiting.ID, "once")
			assert.NoError(t, err, "approvable again")
			pm, err = alice.AgentPlanModeOf(ctx, "planner")
			require.NoError(t, err)
			assert.False(t, pm.On)
			assert.Empty(t, pm.Agent.SetBy)

			// Audited with who and why.
			events, err := env.Auditor("audra").Audit(ctx, url.Values{"kind": {"plan_mode.on"}})
			require.NoError(t, err)
			require.Len(t, events.Events, 1)
			assert.Equal(t, "alice", events.Events[0].Actor)
			assert.Equal(t, "reviewing the plan first", events.Events[0].Data["reason"])
			off, err := env.Auditor("audrey").Audit(ctx, url.Values{"kind": {"plan_mode.off"}})
			require.NoError(t, err)
			require.Len(t, off.Events, 1)
			assert.Equal(t, "plan approved", off.Events[0].Data["reason"])
		})
	}
}

// TestPlanModeOnlyHumansFlip: agents and auditors cannot flip plan mode
// (403); bad bodies are 400 and change nothing; an unknown agent is 404.
func TestPlanModeOnlyHumansFlip(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("sneaky", planPolicy)
	auditor := env.Auditor("audra")

	_, err := agent.SetAgentPlanMode(ctx, "sneaky", false, "")
	assert.Equal(t, http.StatusForbidden, client.StatusOf(err), "an agent token cannot flip its own plan mode")
	_, err = agent.SetFleetPlanMode(ctx, false, "")
	assert.Equal(t, http.StatusForbidden, client.StatusOf(err), "nor the fleet's")
	_, err = agent.AgentPlanModeOf(ctx, "sneaky")
	assert.Equal(t, http.StatusForbidden, client.StatusOf(err))
	_, err = auditor.SetFleetPlanMode(ctx, true, "")
	assert.Equal(t, http.StatusForbidden, client.StatusOf(err), "auditors only read")
	_, err = auditor.FleetPlanMode(ctx)
	assert.NoError(t, err)

	// An admin may; then the agent cannot turn it off.
	_, err = env.Admin.SetAgentPlanMode(ctx, "sneaky", true, "")
	require.NoError(t, err)
	_, err = agent.SetAgentPlanMode(ctx, "sneaky", false, "")
	assert.Equal(t, http.StatusForbidden, client.StatusOf(err))
	deniedByPlanMode(t, submitReq(t, agent, mail("x@example.com", "")), "still on")

	_, err = env.Admin.SetAgentPlanMode(ctx, "nobody", true, "")
	assert.Equal(t, http.StatusNotFound, client.StatusOf(err))
	_, err = env.Admin.AgentPlanModeOf(ctx, "nobody")
	assert.Equal(t, http.StatusNotFound, client.StatusOf(err))

	for _, body := range []any{nil, map[string]any{}, map[string]any{"on": "yes"}, map[string]any{"on": false, "extra": 1},
		map[string]any{"on": false, "reason": strings.Repeat("x", 5000)}} {
		for _, path := range []string{"/api/v1/agents/sneaky/plan-mode", "/api/v1/fleet/plan-mode"} {
			status, err := env.Admin.Do(ctx, http.MethodPut, path, body, nil)
			assert.Equal(t, http.StatusBadRequest, status, "%s %v", path, body)
			var ce *client.Error
			if assert.ErrorAs(t, err, &ce) {
				assert.NotEmpty(t, ce.Code)
			}
		}
	}
	pm, err := env.Admin.AgentPlanModeOf(ctx, "sneaky")
	require.NoError(t, err)
	assert.True(t, pm.Agent.On, "no bad body turned it off")
	assert.False(t, pm.Fleet.On, "nor the fleet's on")
}

// TestPlanModeHoldsApprovedJobs: an exec approved before plan mode is not
// leased while it is on, and runs after; a worktree.diff (a read) is
// decided and run as usual.
func TestPlanModeHoldsApprovedJobs(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("builder", stopPolicy)
	host := workerClient(t, env, "host", "workspace:w", "repo:app")
	created := submitReq(t, agent, client.SubmitRequest{Tool: "worktree.create", Args: map[string]any{"repo": "app"}})
	require.Equal(t, "approved", created.Status)
	job, err := host.Lease(ctx, allKinds, []string{"repo:app"}, time.Second)
	require.NoError(t, err)
	_, err = host.Complete(ctx, job.ID, job.Fence, client.JobResult{Worktree: "app/f", Branch: "airlock/f"})
	require.NoError(t, err)
	a := submitReq(t, agent, client.SubmitRequest{Tool: "exec", Args: map[string]any{"argv": []any{"ls"}, "workspace": "w"}})
	require.Equal(t, "approved", a.Status)

	_, err = env.Admin.SetFleetPlanMode(ctx, true, "")
	require.NoError(t, err)
	job, err = host.Lease(ctx, []string{"exec"}, []string{"workspace:w"}, 0)
	require.NoError(t, err)
	assert.Nil(t, job, "an approved exec waits while plan mode is on")
	statusIs(t, agent, a.ID, "approved")
	deniedByPlanMode(t, submitReq(t, agent, client.SubmitRequest{Tool: "worktree.abandon", Args: map[string]any{"worktree": "app/f"}}), "worktree.abandon")
	diff := submitReq(t, agent, client.SubmitRequest{Tool: "worktree.diff", Args: map[string]any{"worktree": "app/f"}})
	require.Equal(t, "approved", diff.Status, "worktree.diff is a read")
	job, err = host.Lease(ctx, []string{"worktree.diff"}, []string{"repo:app"}, 0)
	require.NoError(t, err)
	require.NotNil(t, job, "a read's job runs in plan mode")
	assert.Equal(t, diff.ID, job.ActionID)

	_, err = env.Admin.SetFleetPlanMode(ctx, false, "")
	require.NoError(t, err)
	job, err = host.Lease(ctx, []string{"exec"}, []string{"workspace:w"}, 0)
	require.NoError(t, err)
	require.NotNil(t, job)
	assert.Equal(t, a.ID, job.ActionID)
}

// TestPlanModeToggleUnderLoad: while many goroutines submit a call the
// policy allows, plan mode is turned on and off (the agent's, then the
// fleet's). Every submit sent after a switch on answered (and answered
// before the switch off began) is denied; every one sent after a switch
// off answered (and answered before the next switch began) is allowed.
// Only a submit that overlaps a switch in flight may go either way.
func TestPlanModeToggleUnderLoad(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("busy", map[string]any{"rules": []map[string]any{{"id": "mail", "tool": "email.send", "effect": "allow"}},
		"settings": map[string]any{"escalate_at": "none"}})
	alice := env.Reviewer("alice")

	const (
		off = iota
		switching
		on
	)
	var phase atomic.Int32
	var settled [3]atomic.Int64 // submits sent and answered within one settled phase
	var wrong atomic.Int64
	var firstWrong atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				before := phase.Load()
				a, err := agent.Submit(ctx, mail("x@example.com", ""))
				if err != nil {
					firstWrong.CompareAndSwap(nil, err.Error())
					wrong.Add(1)
					return
				}
				if before == switching || phase.Load() != before {
					continue // a switch was in flight: either answer is right
				}
				switch {
				case before == on && a.Status != "denied":
					firstWrong.CompareAndSwap(nil, "sent with plan mode on, got "+a.Status)
					wrong.Add(1)
				case before == off && a.Status != "approved":
					firstWrong.CompareAndSwap(nil, "sent with plan mode off, got "+a.Status+": "+a.Decision.Reason)
					wrong.Add(1)
				}
				settled[before].Add(1)
			}
		}()
	}
	// waitFor lets at least n more submits run in phase p.
	waitFor := func(p int32, n int64) {
		base := settled[p].Load()
		for settled[p].Load() < base+n && wrong.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	flip := func(fleet, turnOn bool) {
		phase.Store(switching)
		var err error
		if fleet {
			_, err = alice.SetFleetPlanMode(ctx, turnOn, "load")
		} else {
			_, err = alice.SetAgentPlanMode(ctx, "busy", turnOn, "load")
		}
		require.NoError(t, err)
		if turnOn {
			phase.Store(on)
		} else {
			phase.Store(off)
		}
	}
	waitFor(off, 50)
	for _, fleet := range []bool{false, true, false, true} {
		flip(fleet, true)
		waitFor(on, 50)
		flip(fleet, false)
		waitFor(off, 50)
	}
	close(stop)
	wg.Wait()
	assert.Zero(t, wrong.Load(), "first: %v", firstWrong.Load())
	assert.GreaterOrEqual(t, settled[on].Load(), int64(200))
}

// TestPlanModeRacesApprovals: reviewers approve pending actions while plan
// mode is turned on. Every approval sent after the switch answered is
// refused (409) and leaves its action pending; the ones before it either
// landed before the switch or were refused, never after.
func TestPlanModeRacesApprovals(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("queued", planPolicy)
	alice := env.Reviewer("alice")
	const n = 60
	pending := make([]*client.Action, n)
	for i := range pending {
		a := submitReq(t, agent, mail("x@example.com", ""))
		require.Equal(t, "pending", a.Status)
		full, err := alice.Get(ctx, a.ID)
		require.NoError(t, err)
		pending[i] = full
	}
	var switched atomic.Bool
	var started atomic.Int64
	type outcome struct {
		after  bool
		status int
		id     string
	}
	out := make(chan outcome, n)
	var wg sync.WaitGroup
	next := make(chan *client.Action, n)
	for _, a := range pending {
		next <- a
	}
	close(next)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range next {
				started.Add(1)
				after := switched.Load()
				_, err := alice.Approve(ctx, a.ID, a.ConfirmationPhrase, "once")
				out <- outcome{after: after, status: client.StatusOf(err), id: a.ID}
			}
		}()
	}
	for started.Load() < n/4 {
		time.Sleep(time.Millisecond)
	}
	_, err := env.Admin.SetAgentPlanMode(ctx, "queued", true, "race")
	require.NoError(t, err)
	switched.Store(true)
	wg.Wait()
	close(out)
	var after int
	for o := range out {
		a, err := alice.Get(ctx, o.id)
		require.NoError(t, err)
		if o.after {
			after++
			assert.Equal(t, http.StatusConflict, o.status, "approval sent after plan mode was on")
			assert.Equal(t, "pending", a.Status)
			continue
		}
		switch o.status {
		case 0:
			assert.Equal(t, "approved", a.Status)
		case http.StatusConflict:
			assert.Equal(t, "pending", a.Status)
		default:
			t.Errorf("approval of %s: status %d", o.id, o.status)
		}
	}
	assert.Positive(t, after, "some approvals were sent after the switch")
	// Every approval that landed did so before the switch's audit event.
	events, err := env.Auditor("audra").Audit(ctx, url.Values{"agent": {"queued"}, "limit": {"1000"}})
	require.NoError(t, err)
	on := false
	for _, e := range events.Events {
		switch e.Kind {
		case "plan_mode.on":
			on = true
		case "action.approved":
			assert.False(t, on, "an approval audited after plan mode turned on")
		}
	}
	assert.True(t, on)
}
