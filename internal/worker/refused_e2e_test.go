package worker_test

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/worker"
)

// fixedExecutor "runs" an exec by returning the result its argv[1] names,
// counting the runs of each action.
type fixedExecutor struct {
	results map[string]client.JobResult
	mu      sync.Mutex
	runs    map[string]int
}

func (e *fixedExecutor) Kinds() []string { return []string{hitl.ToolExec} }

func (e *fixedExecutor) Run(_ context.Context, job *client.Job) client.JobResult {
	e.mu.Lock()
	e.runs[job.ActionID]++
	e.mu.Unlock()
	argv, _ := job.Args["argv"].([]any)
	name, _ := argv[1].(string)
	return e.results[name]
}

func (e *fixedExecutor) runsOf(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[id]
}

// TestRefusedResultIsReportedAsAFailure: a result the server refuses (NUL
// in a stream, a stream over its bound, a body over the server's limit) is
// reported again as a failure carrying the server's reason, the run's exit
// code and duration. The action fails at once with that reason, audited
// as its result: it is not left to its lease (failed as "interrupted"),
// and a retryable one is not run again.
func TestRefusedResultIsReportedAsAFailure(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	// A short lease: without the report, the job would be run again soon.
	env := apptest.Start(t, apptest.Options{LeaseTTL: 1500 * time.Millisecond, ExpiryEvery: 50 * time.Millisecond})
	exe := &fixedExecutor{runs: map[string]int{}, results: map[string]client.JobResult{
		"nul":   {ExitCode: 0, Stdout: "a\x00b\n", DurationMS: 7},
		"long":  {ExitCode: 3, Stdout: strings.Repeat("x", 60<<10), DurationMS: 7, Error: "timeout after 1s"},
		"large": {ExitCode: 0, Diff: strings.Repeat("<", 500<<10), DurationMS: 7}, // six bytes each in JSON
	}}
	ctx := env.Ctx()
	tok, err := env.Admin.IssueWorkerToken(ctx, "host-r", []string{"workspace:main"}, 0)
	require.NoError(t, err)
	w, err := worker.New(worker.Config{Client: env.Client(tok.Token), Workspaces: map[string]string{"main": ws}, Executor: exe, LeaseWait: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(wctx) }()
	t.Cleanup(func() { stop(); <-done })
	agent := env.Agent("runner", execPolicy)

	for _, c := range []struct{ name, why, err string }{
		{"nul", "a string holds NUL", ""},
		{"long", "result over its bounds", "timeout after 1s; "},
		{"large", "request body is larger than", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{
				"argv": []any{"cat", c.name}, "workspace": "main", "retryable": true}})
			require.NoError(t, err)
			require.Equal(t, "approved", a.Status, "%+v", a.Decision)
			got := waitFinal(t, agent, a.ID)
			assert.Equal(t, "failed", got.Status)
			r := result(t, got)
			assert.True(t, strings.HasPrefix(r.Error, c.err+"the server refused the result ("), r.Error)
			assert.Contains(t, r.Error, c.why)
			assert.Equal(t, exe.results[c.name].ExitCode, r.ExitCode)
			assert.Equal(t, int64(7), r.DurationMS)
			assert.True(t, r.Truncated, "the output was dropped")
			assert.Empty(t, r.Stdout)
			assert.Empty(t, r.Diff)
			assert.Equal(t, 1, exe.runsOf(a.ID), "run once")
			page, err := env.Admin.Audit(ctx, url.Values{"action_id": {a.ID}})
			require.NoError(t, err)
			assert.Equal(t, []string{"action.submitted", "action.running", "action.result"}, kinds(page.Events))
		})
	}
}
