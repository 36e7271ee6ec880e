package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/worker"
	"github.com/airlockhq/airlock/internal/worktree"
)

// TestExecPreviewWithoutQuota: an executor without a disk quota binds
// the copy itself into the sandbox (no tmpfs in between); the preview
// still changes only the copy, the run pinned to it makes the same diff,
// and a pin that no longer holds refuses the run.
func TestExecPreviewWithoutQuota(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	ctx := context.Background()
	root := workspace(t)
	repo := filepath.Join(root, "repo")
	gitIn(t, root, "init", "-q", "-b", "main", repo)
	require.NoError(t, os.WriteFile(filepath.Join(repo, "app.txt"), []byte("line one\nline two\n"), 0o644))
	gitIn(t, repo, "add", ".")
	gitIn(t, repo, "commit", "-q", "-m", "initial")
	m := &worktree.Manager{Repos: map[string]string{"app": repo}, Root: filepath.Join(root, "worktrees")}
	info, err := m.Create(ctx, "app", "")
	require.NoError(t, err)
	exe := &worker.SandboxExecutor{Worktrees: m, Policy: sandbox.DefaultPolicy(), Options: sandbox.RunOptions{AllowUnboundedProcs: true}}
	args := map[string]any{"argv": []any{"sed", "-i", "s/line two/line 2/", "app.txt"}, "worktree": info.Worktree}
	before := snapshot(t, info.Path)

	p := exe.Run(ctx, &client.Job{Kind: hitl.JobExecPreview, Tool: hitl.ToolExec, Args: args})
	require.Empty(t, p.Error)
	assert.Contains(t, p.Diff, "-line two\n+line 2\n")
	require.Len(t, p.Tree, 40)
	assert.Equal(t, before, snapshot(t, info.Path), "the preview left the worktree as it was")

	pin := p.Commit + ":" + p.Tree
	r := exe.Run(ctx, &client.Job{Kind: hitl.ToolExec, Args: args, Pin: pin})
	require.Empty(t, r.Error)
	assert.Equal(t, p.Diff, r.Diff, "the run made the previewed diff")

	again := exe.Run(ctx, &client.Job{Kind: hitl.ToolExec, Args: args, Pin: pin})
	assert.Contains(t, again.Error, "changed since its impact preview", "the worktree is no longer in the pinned state")
	assert.Equal(t, -1, again.ExitCode)
}
