package worker_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/worker"
)

// TestTwoJobsRunAtOnce: one worker host runs two jobs at the same time
// (AIRLOCK_WORKER_CONCURRENCY, default 2): each exec prints when it began
// and when it ended, and the two intervals overlap.
func TestTwoJobsRunAtOnce(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	pol, err := worker.NewPolicy([]string{"sleep", "date"}, true, false)
	require.NoError(t, err)
	ws := workspace(t)
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Workspaces: map[string]string{"main": ws}, ExecPolicy: &pol})
	agent := env.Agent("runner", execPolicy)
	ctx := env.Ctx()
	// Each job holds its slot until both have started (a file each, seen
	// by the other through the shared workspace is not possible with a
	// per-run copy, so a fixed sleep long enough for the other to start).
	var ids []string
	for range 2 {
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{
			"argv": []any{"sh", "-c", "date +%s%N; sleep 3; date +%s%N"}, "workspace": "main"}})
		require.NoError(t, err)
		require.Equal(t, "approved", a.Status, "%+v", a.Decision)
		ids = append(ids, a.ID)
	}
	var spans [2][2]int64
	for i, id := range ids {
		r := result(t, waitFinal(t, agent, id))
		lines := strings.Fields(r.Stdout)
		require.Len(t, lines, 2, "stdout %q stderr %q", r.Stdout, r.Stderr)
		for j, l := range lines {
			spans[i][j], err = strconv.ParseInt(l, 10, 64)
			require.NoError(t, err)
		}
	}
	assert.True(t, spans[0][0] < spans[1][1] && spans[1][0] < spans[0][1],
		"the two runs did not overlap: %v and %v", spans[0], spans[1])
}

// TestUnknownTargetsDeniedAtSubmit: an exec or worktree call naming a
// workspace or repository no worker serves is denied at once by the
// validator, with the target named, instead of waiting forever; a target
// registered a moment ago is served at once; and a timeout above the
// host's maximum is denied with the limit.
func TestUnknownTargetsDeniedAtSubmit(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Workspaces: map[string]string{"main": ws}})
	agent := env.Agent("runner", map[string]any{
		"rules": []map[string]any{
			{"id": "run", "tool": "exec", "effect": "allow"},
			{"id": "trees", "tool": "worktree.create", "effect": "allow"},
		},
		"settings": map[string]any{"escalate_at": "none"},
	})
	ctx := env.Ctx()
	ls := func(target map[string]any) *client.Action {
		t.Helper()
		args := map[string]any{"argv": []any{"ls"}}
		for k, v := range target {
			args[k] = v
		}
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: args})
		require.NoError(t, err)
		return a
	}
	served := ls(map[string]any{"workspace": "main"})
	assert.Equal(t, "approved", served.Status, "%+v", served.Decision)

	for _, tc := range []struct {
		name  string
		tool  string
		args  map[string]any
		named string
	}{
		{"exec in an unknown workspace", "exec", map[string]any{"argv": []any{"ls"}, "workspace": "nope"}, `workspace "nope"`},
		{"worktree.create of an unknown repository", "worktree.create", map[string]any{"repo": "ghost"}, `repository "ghost"`},
	} {
		// (A call naming a worktree nobody created is refused earlier, as
		// not found.)
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: tc.tool, Args: tc.args})
		require.NoError(t, err, tc.name)
		assert.Equal(t, "denied", a.Status, tc.name)
		assert.Equal(t, "validator", a.Decision.Source, tc.name)
		assert.Contains(t, a.Decision.Reason, tc.named, tc.name)
	}

	// Registered just now: the cached set misses it and looks again.
	before := ls(map[string]any{"workspace": "fresh"})
	require.Equal(t, "denied", before.Status)
	_, err := env.Admin.IssueWorkerToken(ctx, "fresh-host", []string{"workspace:fresh"}, 0)
	require.NoError(t, err)
	after := ls(map[string]any{"workspace": "fresh"})
	assert.Equal(t, "approved", after.Status, "%+v", after.Decision)

	long, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{"argv": []any{"ls"}, "workspace": "main", "timeout_s": 7200}})
	require.NoError(t, err)
	assert.Equal(t, "denied", long.Status)
	assert.Contains(t, long.Decision.Reason, "above the limit of 1h0m0s")
}

// TestEndlessSedStopsAtTheQuota: through the embedded worker, an approved
// sed -i ':a;p;ba' under a 256 MiB quota fails with the quota named in its
// result, the workspace is as it was (no sed temp file), and the disk
// holding the workspace kept its free space.
func TestEndlessSedStopsAtTheQuota(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	ws := workspace(t)
	require.NoError(t, os.WriteFile(filepath.Join(ws, "f.txt"), []byte("one line\n"), 0o644))
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Workspaces: map[string]string{"main": ws},
		Host: worker.HostSettings{DiskMB: 256}})
	agent := env.Agent("runner", execPolicy)
	var before syscall.Statfs_t
	require.NoError(t, syscall.Statfs(ws, &before))

	a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "exec", Args: map[string]any{
		"argv": []any{"sed", "-i", ":a;p;ba", "f.txt"}, "workspace": "main", "timeout_s": 120}})
	require.NoError(t, err)
	require.Equal(t, "approved", a.Status, "%+v", a.Decision)
	done := waitFinal(t, agent, a.ID)
	assert.Equal(t, "failed", done.Status)
	r := result(t, done)
	assert.Contains(t, r.Error, "disk quota exceeded")
	assert.Contains(t, r.Error, "256 MiB")

	entries, err := os.ReadDir(ws)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"f.txt"}, names, "nothing but the file is left in the workspace")
	got, err := os.ReadFile(filepath.Join(ws, "f.txt"))
	require.NoError(t, err)
	assert.Equal(t, "one line\n", string(got))
	var after syscall.Statfs_t
	require.NoError(t, syscall.Statfs(ws, &after))
	lost := (int64(before.Bavail) - int64(after.Bavail)) * before.Bsize
	// The filesystem is shared with whatever else runs here: the bound
	// is half of what the sed wrote.
	assert.Less(t, lost, int64(128<<20), "free space of the workspace's filesystem went down by %d bytes", lost)
}
