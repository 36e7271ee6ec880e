package client_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestLeasedJobKeepsNumbersExact: a worker reads a job's args exactly as
// they were approved, as an agent or reviewer reads the action's: a
// number is never rounded through float64 on the way (10000000000000001
// is not 1e16).
func TestLeasedJobKeepsNumbersExact(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	targets := []string{"workspace:main"}
	wtok, err := env.Admin.IssueWorkerToken(ctx, "host-1", targets, 0)
	require.NoError(t, err)
	agent := env.Agent("runner", map[string]any{"rules": []map[string]any{{"id": "run", "tool": "exec", "effect": "allow"}}})
	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{
		"argv": []any{"ls"}, "workspace": "main", "timeout_s": json.Number("30"),
		"ticket": json.Number("10000000000000001"), "rate": json.Number("0.1")}})
	require.NoError(t, err)
	require.Equal(t, "approved", a.Status, "%+v", a.Decision)

	job, err := env.Client(wtok.Token).Lease(ctx, []string{"exec"}, targets, time.Second)
	require.NoError(t, err)
	require.NotNil(t, job)
	require.Equal(t, a.ID, job.ActionID)
	assert.Equal(t, json.Number("10000000000000001"), job.Args["ticket"])
	assert.Equal(t, json.Number("0.1"), job.Args["rate"])
	assert.Equal(t, a.Args, job.Args, "the job's args are the approved action's")
}
