package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/pathrule"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/worker"
	"github.com/airlockhq/airlock/internal/worktree"
)

const plantedPatch = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"

// plantedConfig is a git config whose filter driver (named for every path
// by the attributes planted next to it) and fsmonitor leave a marker in
// markers if the worker's git ever reads it.
func plantedConfig(markers string) string {
	touch := "touch " + filepath.Join(markers, "ran")
	return "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = " + touch + "\n" +
		"[filter \"x\"]\n\tclean = \"" + touch + "; cat\"\n\tsmudge = \"" + touch + "; cat\"\n\tprocess = \"" + touch + "\"\n"
}

// assertNothingRan fails when a planted program left its marker.
func assertNothingRan(t *testing.T, markers, when string) {
	t.Helper()
	assert.NoFileExists(t, filepath.Join(markers, "ran"), "%s: a program planted in the workspace ran on the worker host", when)
}

// TestPatchIgnoresARepositoryPlantedWithFSWrite: an agent allowed fs.write
// turns its workspace (no .git of its own) into a bare repository — HEAD,
// objects/, refs/, a config with a filter driver and fsmonitor, and
// info/attributes naming the filter for every path. Its next fs.patch is
// pending: neither the preview the worker prepares before anyone approves
// nor the approved apply runs what it planted, and the patch applies.
func TestPatchIgnoresARepositoryPlantedWithFSWrite(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	ws, markers := workspace(t), workspace(t)
	require.NoError(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one\ntwo\n"), 0o644))
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Workspaces: map[string]string{"main": ws}})
	agent := env.Agent("planter", map[string]any{
		"rules": []map[string]any{
			{"id": "write", "tool": "fs.write", "effect": "allow"},
			{"id": "patch", "tool": "fs.patch", "effect": "approve"},
		},
		"settings": map[string]any{"escalate_at": "none", "injection_action": "allow"},
	})
	alice := env.Reviewer("alice")
	ctx := env.Ctx()
	for path, content := range map[string]string{
		"HEAD":             "ref: refs/heads/main\n",
		"config":           plantedConfig(markers),
		"info/attributes":  "* filter=x\n",
		"objects/.keep":    "",
		"refs/heads/.keep": "",
	} {
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "fs.write", Args: map[string]any{"workspace": "main", "path": path, "content": content}})
		require.NoError(t, err)
		require.Equal(t, "approved", a.Status, "%s: %+v", path, a.Decision)
		require.Equal(t, "succeeded", waitFinal(t, agent, a.ID).Status, path)
	}

	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "fs.patch", Args: map[string]any{"workspace": "main", "patch": plantedPatch}})
	require.NoError(t, err)
	require.Equal(t, "pending", a.Status, "%+v", a.Decision)
	seen, p := previewOf(t, ctx, alice, a.ID)
	assertNothingRan(t, markers, "the preview")
	require.Empty(t, p.Error)
	assert.Contains(t, p.Diff, "-two\n+2\n")
	_, err = alice.Approve(ctx, a.ID, seen.ConfirmationPhrase, "")
	require.NoError(t, err)
	done := waitFinal(t, agent, a.ID)
	assertNothingRan(t, markers, "the apply")
	require.Equal(t, "succeeded", done.Status, "%s", done.Result)
	b, err := os.ReadFile(filepath.Join(ws, "notes.txt"))
	require.NoError(t, err)
	assert.Equal(t, "one\n2\n", string(b))
}

// TestPatchIgnoresAGitDirPlantedInTheSandbox: a command in the sandbox (a
// reviewed worktree.run line, or any program a policy allows that can
// write files) creates .git in a workspace that had none — with and
// without a disk quota — and whatever of it reaches the host, the
// worker's fs.patch preview and apply there run none of it.
func TestPatchIgnoresAGitDirPlantedInTheSandbox(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	for _, c := range []struct {
		name  string
		quota int64
	}{{"disk quota", 64 << 20}, {"bind", 0}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ws, markers := workspace(t), workspace(t)
			require.NoError(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one\ntwo\n"), 0o644))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			script := `mkdir -p .git/objects .git/refs/heads .git/info && echo 'ref: refs/heads/main' > .git/HEAD && ` +
				`printf '%s' "$1" > .git/config && echo '* filter=x' > .git/info/attributes`
			opts := sandbox.RunOptions{AllowUnboundedProcs: true, DiskQuota: c.quota, ReadOnlyPaths: pathrule.BuiltinReadOnly}
			res, err := sandbox.Run(ctx, sandbox.ExecRequest{Argv: []string{"sh", "-c", script, "sh", plantedConfig(markers)},
				Workspace: ws, Timeout: 30 * time.Second}, opts)
			require.NoError(t, err)
			require.Equal(t, 0, res.ExitCode, "%s %s", res.Stderr, res.Error)
			if _, err := os.Stat(filepath.Join(ws, ".git", "config")); err != nil {
				t.Logf("the sandbox kept .git from the host (%v); the worker's git must ignore it anyway", err)
			}

			exe := &worker.SandboxExecutor{Workspaces: map[string]string{"main": ws}, Policy: sandbox.DefaultPolicy(),
				Options:   sandbox.RunOptions{AllowUnboundedProcs: true, DiskQuota: c.quota},
				Worktrees: &worktree.Manager{Root: filepath.Join(workspace(t), "worktrees")}}
			args := map[string]any{"workspace": "main", "patch": plantedPatch}
			p := exe.Run(ctx, &client.Job{Kind: hitl.JobPreview, Tool: hitl.ToolFSPatch, Args: args})
			assertNothingRan(t, markers, "the preview")
			require.Empty(t, p.Error)
			assert.Contains(t, p.Diff, "-two\n+2\n")
			r := exe.Run(ctx, &client.Job{Kind: hitl.ToolFSPatch, Args: args})
			assertNothingRan(t, markers, "the apply")
			require.Empty(t, r.Error)
			b, err := os.ReadFile(filepath.Join(ws, "notes.txt"))
			require.NoError(t, err)
			assert.Equal(t, "one\n2\n", string(b))
		})
	}
}
