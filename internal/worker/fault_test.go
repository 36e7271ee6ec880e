package worker_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/worker"
)

var (
	buildOnce sync.Once
	workerBin string
	buildErr  error
)

// workerBinary builds cmd/worker once per test run.
func workerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "airlock-worker-bin-")
		if err != nil {
			buildErr = err
			return
		}
		workerBin = filepath.Join(dir, "worker")
		out, err := exec.Command("go", "build", "-o", workerBin, "github.com/airlockhq/airlock/cmd/worker").CombinedOutput()
		if err != nil {
			buildErr = err
			t.Logf("%s", out)
		}
	})
	require.NoError(t, buildErr)
	return workerBin
}

// removeWorkerBinary removes what workerBinary built.
func removeWorkerBinary() {
	if workerBin != "" {
		_ = os.RemoveAll(filepath.Dir(workerBin))
	}
}

// hostWorker is a worker host process.
type hostWorker struct {
	cmd *exec.Cmd
	out *strings.Builder
	// tokenID is the worker's token (to revoke it).
	tokenID string
}

func startWorker(t *testing.T, env *apptest.Env, name, ws, commands string, extraEnv ...string) *hostWorker {
	t.Helper()
	tok, err := env.Admin.IssueWorkerToken(context.Background(), name, []string{"workspace:main"}, 0)
	require.NoError(t, err)
	cmd := exec.Command(workerBinary(t))
	cmd.Env = append(os.Environ(),
		"AIRLOCK_SERVER_URL="+env.URL, "AIRLOCK_WORKER_TOKEN="+tok.Token,
		"AIRLOCK_WORKSPACES=main="+ws, "AIRLOCK_EXEC_COMMANDS="+commands,
		"AWS_SECRET_ACCESS_KEY=worker-host-secret")
	cmd.Env = append(cmd.Env, extraEnv...)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	w := &hostWorker{cmd: cmd, out: out, tokenID: tok.TokenID}
	t.Cleanup(func() { w.kill() })
	return w
}

func (w *hostWorker) kill() {
	if w.cmd.ProcessState == nil {
		_ = w.cmd.Process.Signal(syscall.SIGKILL)
		_ = w.cmd.Wait()
	}
}

// processes counts live processes whose command line contains marker
// (bwrap's own command line holds the sandboxed command too).
func processes(t *testing.T, marker string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(strings.ReplaceAll(string(cmdline), "\x00", " "), marker) {
			status, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
			if strings.Contains(string(status), "State:\tZ") {
				continue // a zombie is dead; only its parent has not reaped it yet
			}
			n++
		}
	}
	return n
}

// sandboxed reports whether the command itself runs (not just bwrap
// setting up the sandbox for it).
func sandboxed(t *testing.T, argv ...string) bool {
	t.Helper()
	want := strings.Join(argv, "\x00") + "\x00"
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		if cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && string(cmdline) == want {
			return true
		}
	}
	return false
}

func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func statusOf(t *testing.T, c *client.Client, id string) string {
	a, err := c.Get(context.Background(), id)
	require.NoError(t, err)
	return a.Status
}

func TestWorkerFaults(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	pol, err := worker.NewPolicy([]string{"sleep"}, false, false)
	require.NoError(t, err)
	ws := workspace(t)
	env := apptest.Start(t, apptest.Options{LeaseTTL: 1500 * time.Millisecond, ExpiryEvery: 50 * time.Millisecond, ExecPolicy: &pol})
	agent := env.Agent("runner", execPolicy)
	ctx := env.Ctx()
	sleepCall := func(secs string, retryable bool) *client.Action {
		args := map[string]any{"argv": []any{"sleep", secs}, "workspace": "main"}
		if retryable {
			args["retryable"] = true
		}
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: args})
		require.NoError(t, err)
		require.Equal(t, "approved", a.Status, "%+v", a.Decision)
		return a
	}

	t.Run("a worker killed mid-job: its sandbox dies, the action fails as interrupted", func(t *testing.T) {
		w := startWorker(t, env, "host-a", ws, "sleep")
		a := sleepCall("31.25", false)
		eventually(t, 20*time.Second, "the sandboxed sleep", func() bool { return sandboxed(t, "sleep", "31.25") })
		assert.Equal(t, "running", statusOf(t, agent, a.ID))
		w.kill()
		eventually(t, 5*time.Second, "the sandbox to die with its worker", func() bool { return processes(t, "sleep 31.25") == 0 })
		eventually(t, 10*time.Second, "the lease to expire", func() bool { return statusOf(t, agent, a.ID) == "failed" })
		got, err := agent.Get(ctx, a.ID)
		require.NoError(t, err)
		assert.Contains(t, string(got.Result), "interrupted")
	})

	t.Run("a retryable job survives a killed worker and completes exactly once", func(t *testing.T) {
		w1 := startWorker(t, env, "host-b", ws, "sleep")
		a := sleepCall("2.75", true)
		eventually(t, 20*time.Second, "the first run", func() bool { return sandboxed(t, "sleep", "2.75") })
		w1.kill()
		eventually(t, 5*time.Second, "the first sandbox to die", func() bool { return processes(t, "sleep 2.75") == 0 })
		startWorker(t, env, "host-c", ws, "sleep")
		eventually(t, 30*time.Second, "the retry to finish", func() bool { return statusOf(t, agent, a.ID) == "succeeded" })
		page, err := env.Admin.Audit(ctx, url.Values{"action_id": {a.ID}})
		require.NoError(t, err)
		assert.Equal(t, []string{"action.submitted", "action.running", "action.requeued", "action.running", "action.result"}, kinds(page.Events))
	})

}

func TestServerRestartMidJob(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	pol, err := worker.NewPolicy([]string{"sleep"}, false, false)
	require.NoError(t, err)
	ws := workspace(t)
	env := apptest.Start(t, apptest.Options{LeaseTTL: 6 * time.Second, ExpiryEvery: 50 * time.Millisecond, ExecPolicy: &pol})
	agent := env.Agent("runner", execPolicy)
	ctx := env.Ctx()
	startWorker(t, env, "host-d", ws, "sleep")
	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{"argv": []any{"sleep", "2.5"}, "workspace": "main"}})
	require.NoError(t, err)
	eventually(t, 20*time.Second, "the run", func() bool { return sandboxed(t, "sleep", "2.5") })
	env.Restart() // down for well under a lease: the worker's heartbeats resume
	eventually(t, 30*time.Second, "the job to finish", func() bool { return statusOf(t, agent, a.ID) == "succeeded" })
	page, err := env.Admin.Audit(ctx, url.Values{"action_id": {a.ID}})
	require.NoError(t, err)
	assert.Equal(t, []string{"action.submitted", "action.running", "action.result"}, kinds(page.Events), "nothing lost, nothing run twice")
}

// TestResultNotRecordedIsNotRunAgain: the command ran, but its result can
// never be recorded (the worker's token was revoked mid-run, so complete
// and heartbeats are refused). The lease runs out, the action fails as
// interrupted, and the command is not run again — not by its worker, not
// by another worker that is idle the whole time.
func TestResultNotRecordedIsNotRunAgain(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	pol, err := worker.NewPolicy([]string{"sleep", "echo"}, true, false)
	require.NoError(t, err)
	ws := workspace(t)
	env := apptest.Start(t, apptest.Options{LeaseTTL: 3 * time.Second, ExpiryEvery: 50 * time.Millisecond, ExecPolicy: &pol})
	agent := env.Agent("runner", execPolicy)
	ctx := env.Ctx()
	shell := []string{"AIRLOCK_EXEC_ALLOW_SHELL=true"}
	first := startWorker(t, env, "host-f", ws, "sleep,echo", shell...)

	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{
		"argv": []any{"sh", "-c", "echo ran >> runs.txt; sleep 1.25"}, "workspace": "main"}})
	require.NoError(t, err)
	require.Equal(t, "approved", a.Status, "%+v", a.Decision)
	eventually(t, 20*time.Second, "the run", func() bool { return sandboxed(t, "sleep", "1.25") })
	require.NoError(t, env.Admin.RevokeToken(ctx, first.tokenID))
	startWorker(t, env, "host-g", ws, "sleep,echo", shell...) // idle, and would take a requeued job

	eventually(t, 20*time.Second, "the lease to run out", func() bool { return statusOf(t, agent, a.ID) == "failed" })
	got, err := agent.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Contains(t, string(got.Result), "interrupted")
	time.Sleep(2 * time.Second) // give a wrong re-run the time to happen
	runs, err := os.ReadFile(filepath.Join(ws, "runs.txt"))
	require.NoError(t, err)
	assert.Equal(t, "ran\n", string(runs), "the command ran once")
	page, err := env.Admin.Audit(ctx, url.Values{"action_id": {a.ID}})
	require.NoError(t, err)
	assert.Equal(t, []string{"action.submitted", "action.running", "action.interrupted"}, kinds(page.Events))
	first.kill() // its output is read only once the process is gone
	assert.NotContains(t, first.out.String(), "job completed")
}
