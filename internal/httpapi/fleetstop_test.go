package httpapi_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestFleetStopSuspendsEveryAgent: the emergency stop suspends every agent
// at once (their submits denied as for a suspended agent, their pending
// actions cancelled, their approved jobs never leased), is audited with
// who and why, and the resume restores exactly the agents it suspended:
// one suspended on its own before the stop stays suspended.
func TestFleetStopSuspendsEveryAgent(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	a := env.Agent("alpha", planPolicy)
	b := env.Agent("bravo", planPolicy)
	c := env.Agent("charlie", planPolicy)
	host := workerClient(t, env, "host", "workspace:w")
	_, err := env.Admin.SuspendAgent(ctx, "charlie")
	require.NoError(t, err)

	pending := submitReq(t, a, mail("x@example.com", ""))
	require.Equal(t, "pending", pending.Status)
	approved := submitReq(t, b, client.SubmitRequest{Tool: "exec", Args: map[string]any{"argv": []any{"ls"}, "workspace": "w"}})
	require.Equal(t, "approved", approved.Status)

	_, err = env.Reviewer("rita").SuspendFleet(ctx, "nope")
	assert.Equal(t, http.StatusForbidden, client.StatusOf(err), "only admins stop the fleet")
	_, err = a.SuspendFleet(ctx, "")
	assert.Equal(t, http.StatusForbidden, client.StatusOf(err))

	st, err := env.Admin.SuspendFleet(ctx, "incident 42")
	require.NoError(t, err)
	assert.True(t, st.Stopped)
	assert.Equal(t, "admin", st.StoppedBy)
	assert.Equal(t, "incident 42", st.Reason)
	assert.ElementsMatch(t, []string{"alpha", "bravo"}, st.Agents, "charlie was suspended already")
	assert.ElementsMatch(t, []string{pending.ID, approved.ID}, st.Cancelled)
	statusIs(t, env.Admin, pending.ID, "cancelled")
	statusIs(t, env.Admin, approved.ID, "cancelled")
	job, err := host.Lease(ctx, allKinds, []string{"workspace:w"}, 0)
	require.NoError(t, err)
	assert.Nil(t, job)

	for _, ag := range []*client.Client{a, b, c} {
		got := submitReq(t, ag, client.SubmitRequest{Tool: "fs.read", Args: map[string]any{"path": "x"}})
		assert.Equal(t, "denied", got.Status, "even a read: the agent is suspended")
		assert.Equal(t, "suspended", got.Decision.Source)
	}
	for _, id := range []string{"alpha", "bravo", "charlie"} {
		ag, err := env.Admin.Agent(ctx, id)
		require.NoError(t, err)
		assert.NotNil(t, ag.SuspendedAt, id)
	}
	got, err := env.Auditor("audra").FleetSuspension(ctx)
	require.NoError(t, err)
	assert.True(t, got.Stopped)
	assert.Equal(t, "incident 42", got.Reason)
	assert.NotNil(t, got.StoppedAt)

	// A second stop keeps the first's who and why.
	again, err := env.Admin.SuspendFleet(ctx, "again")
	require.NoError(t, err)
	assert.Equal(t, "incident 42", again.Reason)
	assert.Empty(t, again.Agents)

	res, err := env.Admin.ResumeFleet(ctx)
	require.NoError(t, err)
	assert.False(t, res.Stopped)
	assert.ElementsMatch(t, []string{"alpha", "bravo"}, res.Agents)
	assert.Equal(t, "approved", submitReq(t, a, client.SubmitRequest{Tool: "fs.read", Args: map[string]any{"path": "x"}}).Status)
	assert.Equal(t, "pending", submitReq(t, b, mail("x@example.com", "")).Status)
	assert.Equal(t, "suspended", submitReq(t, c, client.SubmitRequest{Tool: "fs.read", Args: map[string]any{"path": "x"}}).Decision.Source,
		"suspended on its own before the stop: still suspended")
	got, err = env.Admin.FleetSuspension(ctx)
	require.NoError(t, err)
	assert.False(t, got.Stopped)

	events, err := env.Auditor("audrey").Audit(ctx, url.Values{"kind": {"fleet.suspended"}})
	require.NoError(t, err)
	require.Len(t, events.Events, 2)
	first := events.Events[0] // oldest first
	assert.Equal(t, "admin", first.Actor)
	assert.Equal(t, "incident 42", first.Data["reason"])
	resumed, err := env.Auditor("aubrey").Audit(ctx, url.Values{"kind": {"fleet.resumed"}})
	require.NoError(t, err)
	require.Len(t, resumed.Events, 1)
	assert.Equal(t, "admin", resumed.Events[0].Actor)
}

// TestFleetStopThenOwnSuspension: an agent an admin suspends on its own
// during the stop stays suspended after the fleet resumes; one resumed on
// its own during the stop is simply active.
func TestFleetStopThenOwnSuspension(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	env.Agent("alpha", planPolicy)
	b := env.Agent("bravo", planPolicy)
	_, err := env.Admin.SuspendFleet(ctx, "")
	require.NoError(t, err)
	_, err = env.Admin.SuspendAgent(ctx, "alpha")
	require.NoError(t, err)
	res, err := env.Admin.ResumeFleet(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"bravo"}, res.Agents)
	ag, err := env.Admin.Agent(ctx, "alpha")
	require.NoError(t, err)
	assert.NotNil(t, ag.SuspendedAt, "its own suspension outlasts the fleet resume")
	assert.Equal(t, "pending", submitReq(t, b, mail("x@example.com", "")).Status)

	// Bad bodies: 400, nothing stopped.
	for _, body := range []any{map[string]any{"reason": 5}, map[string]any{"why": "x"}} {
		status, err := env.Admin.Do(ctx, http.MethodPost, "/api/v1/fleet/suspend", body, nil)
		assert.Equal(t, http.StatusBadRequest, status, "%v: %v", body, err)
	}
	got, err := env.Admin.FleetSuspension(ctx)
	require.NoError(t, err)
	assert.False(t, got.Stopped)
}
