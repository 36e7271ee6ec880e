package worker_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/sandbox"
)

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "core.hooksPath=/dev/null", "-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// TestWorktreeEndToEnd: an agent creates a worktree, edits a file in it with
// exec, asks to merge; the reviewer sees the diff, approves, and the base
// branch gets exactly that commit; abandoning leaves nothing behind.
func TestWorktreeEndToEnd(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	root := workspace(t)
	repo := filepath.Join(root, "repo")
	gitIn(t, root, "init", "-q", "-b", "main", repo)
	require.NoError(t, os.WriteFile(filepath.Join(repo, "app.txt"), []byte("line one\nline two\n"), 0o644))
	gitIn(t, repo, "add", ".")
	gitIn(t, repo, "commit", "-q", "-m", "initial")
	marker := filepath.Join(root, "hook-ran")
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".git", "hooks", "post-checkout"), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".git", "hooks", "post-merge"), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755))

	env := apptest.Start(t, apptest.Options{Worker: "embedded", Repos: map[string]string{"app": repo}})
	agent := env.Agent("coder", map[string]any{
		"rules": []map[string]any{
			{"id": "worktrees", "tool": "worktree.*", "effect": "allow"},
			{"id": "edit", "tool": "exec", "effect": "allow"},
		},
		"settings": map[string]any{"escalate_at": "none"},
	})
	alice := env.Reviewer("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run := func(tool string, args map[string]any) (*client.Action, client.JobResult) {
		t.Helper()
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: tool, Args: args})
		require.NoError(t, err)
		require.Equal(t, "approved", a.Status, "%s: %+v", tool, a.Decision)
		done := waitFinal(t, agent, a.ID)
		r := result(t, done)
		require.Equal(t, "succeeded", done.Status, "%s: %+v", tool, r)
		return done, r
	}

	_, created := run("worktree.create", map[string]any{"repo": "app"})
	require.True(t, strings.HasPrefix(created.Worktree, "app/wt-"), created.Worktree)
	assert.Equal(t, "main", created.Base)

	_, edited := run("exec", map[string]any{"argv": []any{"sed", "-i", "s/line two/line 2/", "app.txt"}, "worktree": created.Worktree})
	assert.Equal(t, 0, edited.ExitCode)
	_, gitStatus := run("exec", map[string]any{"argv": []any{"git", "status", "--short"}, "worktree": created.Worktree})
	assert.Contains(t, gitStatus.Stdout, "app.txt", "git works inside the worktree's sandbox")
	_, diffed := run("worktree.diff", map[string]any{"worktree": created.Worktree})
	assert.Contains(t, diffed.Diff, "+line 2")

	merge, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.merge", Args: map[string]any{"worktree": created.Worktree}})
	require.NoError(t, err)
	assert.Equal(t, "pending", merge.Status, "a merge always waits for a reviewer, whatever the policy says")

	var seen *client.Action
	eventually(t, 30*time.Second, "the merge preview", func() bool {
		seen, err = alice.Get(ctx, merge.ID)
		require.NoError(t, err)
		return len(seen.Preview) > 0
	})
	var preview struct{ Commit, Diff, Error string }
	require.NoError(t, json.Unmarshal(seen.Preview, &preview))
	require.Empty(t, preview.Error)
	assert.Contains(t, preview.Diff, "-line two\n+line 2")
	assert.Len(t, preview.Commit, 40)

	approved, err := alice.Approve(ctx, merge.ID, seen.ConfirmationPhrase, "")
	require.NoError(t, err)
	assert.Equal(t, "approved", approved.Status)
	done := waitFinal(t, agent, merge.ID)
	require.Equal(t, "succeeded", done.Status, "%s", done.Result)
	assert.Equal(t, preview.Commit, result(t, done).Commit, "the base branch got exactly the previewed commit")
	assert.Equal(t, preview.Commit, gitIn(t, repo, "rev-parse", "main"))
	assert.Equal(t, "line one\nline 2", gitIn(t, repo, "show", "main:app.txt"))

	// After the merge the reviewer cannot be asked about it again.
	_, err = alice.Approve(ctx, merge.ID, seen.ConfirmationPhrase, "")
	assert.Equal(t, http.StatusConflict, client.StatusOf(err))

	run("worktree.abandon", map[string]any{"worktree": created.Worktree})
	assert.Empty(t, gitIn(t, repo, "branch", "--list", created.Branch), "no branch left")
	entries, err := os.ReadDir(filepath.Join(env.Config.DataDir, "worktrees", "app"))
	require.NoError(t, err)
	assert.Empty(t, entries, "no worktree directory left")
	assert.NoFileExists(t, marker, "no repository hook ran")
}
