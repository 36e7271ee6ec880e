package worker_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/worker"
)

var execPolicy = map[string]any{
	"rules":    []map[string]any{{"id": "run", "tool": "exec", "effect": "allow"}},
	"settings": map[string]any{"escalate_at": "none"}, // these tests are about running, not review
}

func result(t *testing.T, a *client.Action) client.JobResult {
	t.Helper()
	var r client.JobResult
	require.NoError(t, json.Unmarshal(a.Result, &r), "result: %s", a.Result)
	return r
}

// workspace returns a workspace directory the sandbox can bind.
func workspace(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "airlock-ws-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestExecThroughTheEmbeddedWorker: submit → policy allows → the embedded
// worker leases it → bwrap runs it → the result is on the action.
func TestExecThroughTheEmbeddedWorker(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	ws := workspace(t)
	require.NoError(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one\ntwo\nthree\n"), 0o644))
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Workspaces: map[string]string{"main": ws}})
	agent := env.Agent("runner", execPolicy)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{"argv": []any{"wc", "-l", "notes.txt"}, "workspace": "main"}})
	require.NoError(t, err)
	require.Equal(t, "approved", a.Status)
	done := waitFinal(t, agent, a.ID)
	assert.Equal(t, "succeeded", done.Status)
	r := result(t, done)
	assert.Equal(t, 0, r.ExitCode)
	assert.Equal(t, "3 notes.txt\n", r.Stdout)

	failing, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{"argv": []any{"cat", "missing.txt"}, "workspace": "main"}})
	require.NoError(t, err)
	done = waitFinal(t, agent, failing.ID)
	assert.Equal(t, "failed", done.Status)
	assert.NotZero(t, result(t, done).ExitCode)
	assert.Contains(t, result(t, done).Stderr, "missing.txt")

	// The validators run at submit: a refused command is denied at once.
	refused, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{"argv": []any{"find", ".", "-exec", "rm", "{}", ";"}, "workspace": "main"}})
	require.NoError(t, err)
	assert.Equal(t, "denied", refused.Status)
	assert.Equal(t, "validator", refused.Decision.Source)
	assert.Contains(t, refused.Decision.Reason, "-exec")
	escape, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{"argv": []any{"cat", "../../etc/passwd"}, "workspace": "main"}})
	require.NoError(t, err)
	assert.Equal(t, "denied", escape.Status)

	page, err := env.Admin.Audit(ctx, url.Values{"action_id": {a.ID}})
	require.NoError(t, err)
	assert.Equal(t, []string{"action.submitted", "action.running", "action.result"}, kinds(page.Events))
}

func waitFinal(t *testing.T, c *client.Client, id string) *client.Action {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		a, err := c.Get(context.Background(), id)
		require.NoError(t, err)
		switch a.Status {
		case "succeeded", "failed":
			return a
		case "denied", "expired", "cancelled":
			t.Fatalf("action %s is %s: %s", id, a.Status, a.Decision.Reason)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("action %s did not finish", id)
	return nil
}

func kinds(events []client.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Kind
	}
	return out
}

func TestParseDirs(t *testing.T) {
	t.Parallel()
	got, err := worker.ParseDirs(" app=/srv/app , docs=/srv/docs,")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"app": "/srv/app", "docs": "/srv/docs"}, got)
	for _, bad := range []string{"app", "app=relative", "=/x", "a=/x,a=/y"} {
		_, err := worker.ParseDirs(bad)
		assert.Error(t, err, bad)
	}
}

func TestExecArgs(t *testing.T) {
	t.Parallel()
	req, err := worker.ExecArgs(map[string]any{"argv": []any{"ls", "-la"}, "timeout_s": 3.0, "network": false, "dir": "src"}, "/ws")
	require.NoError(t, err)
	assert.Equal(t, []string{"ls", "-la"}, req.Argv)
	assert.Equal(t, 3*time.Second, req.Timeout)
	assert.Equal(t, "src", req.Dir)
	for _, bad := range []map[string]any{
		{}, {"argv": []any{}}, {"argv": "ls"}, {"argv": []any{"ls", 1.0}},
		{"argv": []any{"ls"}, "timeout_s": -1.0}, {"argv": []any{"ls"}, "timeout_s": 1.5},
		{"argv": []any{"ls"}, "network": "yes"}, {"argv": []any{"ls"}, "dir": 3.0},
	} {
		_, err := worker.ExecArgs(bad, "/ws")
		assert.Error(t, err, "%v", bad)
	}
}
