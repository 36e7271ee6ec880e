package worker_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/sandbox"
)

// symlinkPatch is a git patch making the symlink name -> target.
func symlinkPatch(name, target string) string {
	return "diff --git a/" + name + " b/" + name + "\nnew file mode 120000\n--- /dev/null\n+++ b/" + name +
		"\n@@ -0,0 +1 @@\n+" + target + "\n\\ No newline at end of file\n"
}

// TestWorktreeDotGitOutOfReachThroughSymlinks: the attack on a worktree's
// .git through a symlink, end to end. fs.patch cannot make a symlink
// (a -> .git); a symlink made otherwise (a command in the sandbox may run
// ln -s) takes no fs.write through it, so the .git file keeps pointing at
// the worktree's repository, and a command set behind a symlink is not
// read. And with the .git file swapped all the same for "gitdir: evil", a
// repository the agent wrote with a filter driver for every path, the
// worker's own git — worktree.diff, and the merge preview made before
// anyone approves — still works on the real repository and runs nothing
// on the worker host.
func TestWorktreeDotGitOutOfReachThroughSymlinks(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	repo := lifecycleRepo(t)
	markers := workspace(t)
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Repos: map[string]string{"app": repo}})
	agent := env.Agent("coder", map[string]any{
		"rules": []map[string]any{
			{"id": "worktrees", "tool": "worktree.*", "effect": "allow"},
			{"id": "files", "tool": "fs.*", "effect": "allow"},
		},
		"settings": map[string]any{"escalate_at": "none", "injection_action": "allow"},
	})
	alice := env.Reviewer("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	run := func(tool string, args map[string]any) *client.Action {
		t.Helper()
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: tool, Args: args})
		require.NoError(t, err)
		require.Equal(t, "approved", a.Status, "%s: %+v", tool, a.Decision)
		return waitFinal(t, agent, a.ID)
	}
	created := run("worktree.create", map[string]any{"repo": "app"})
	require.Equal(t, "succeeded", created.Status, "%s", created.Result)
	wt := result(t, created).Worktree
	dir := filepath.Join(env.Config.DataDir, "worktrees", filepath.FromSlash(wt))
	dotGit, err := os.ReadFile(filepath.Join(dir, ".git"))
	require.NoError(t, err)

	done := run("fs.patch", map[string]any{"worktree": wt, "patch": symlinkPatch("a", ".git")})
	assert.Equal(t, "failed", done.Status, "%s", done.Result)
	assert.Contains(t, result(t, done).Error, "never a symlink")
	_, err = os.Lstat(filepath.Join(dir, "a"))
	require.ErrorIs(t, err, os.ErrNotExist, "fs.patch made a symlink")

	require.NoError(t, os.Symlink(".git", filepath.Join(dir, "a")))
	for path, content := range map[string]string{
		"evil/HEAD":             "ref: refs/heads/main\n",
		"evil/config":           plantedConfig(markers),
		"evil/info/attributes":  "* filter=x\n",
		"evil/objects/.keep":    "",
		"evil/refs/heads/.keep": "",
	} {
		done := run("fs.write", map[string]any{"worktree": wt, "path": path, "content": content})
		require.Equal(t, "succeeded", done.Status, "%s: %s", path, done.Result)
	}
	done = run("fs.write", map[string]any{"worktree": wt, "path": "a", "content": "gitdir: evil\n"})
	assert.Equal(t, "failed", done.Status, "%s", done.Result)
	assert.Contains(t, result(t, done).Error, "symlink")
	b, err := os.ReadFile(filepath.Join(dir, ".git"))
	require.NoError(t, err)
	assert.Equal(t, string(dotGit), string(b), "the .git file was written through a symlink")

	// The command set is read through no symlink either.
	commands := filepath.Join(dir, ".airlock", "commands.yaml")
	require.NoError(t, os.Remove(commands))
	require.NoError(t, os.Symlink("../greeting.txt", commands))
	pending, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.run", Args: map[string]any{"worktree": wt, "command": "test"}})
	require.NoError(t, err)
	_, p := previewOf(t, ctx, alice, pending.ID)
	assert.Contains(t, p.Error, "symlink")
	assert.Empty(t, p.Commit)
	require.NoError(t, os.Remove(commands))

	// The .git file swapped all the same.
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: evil\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "greeting.txt"), []byte("hello, world\n"), 0o644))
	done = run("worktree.diff", map[string]any{"worktree": wt})
	assertNothingRan(t, markers, "worktree.diff")
	require.Equal(t, "succeeded", done.Status, "%s", done.Result)
	assert.Contains(t, result(t, done).Diff, "-hello\n+hello, world\n")

	merge, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.merge", Args: map[string]any{"worktree": wt}})
	require.NoError(t, err)
	require.Equal(t, "pending", merge.Status)
	var seen *client.Action
	eventually(t, 30*time.Second, "the merge preview", func() bool {
		seen, err = alice.Get(ctx, merge.ID)
		require.NoError(t, err)
		return len(seen.Preview) > 0
	})
	assertNothingRan(t, markers, "the merge preview")
	var preview struct{ Commit, Diff, Error string }
	require.NoError(t, json.Unmarshal(seen.Preview, &preview))
	require.Empty(t, preview.Error)
	assert.Equal(t, gitIn(t, repo, "rev-parse", "airlock/"+filepath.Base(wt)), preview.Commit, "committed on the worktree's branch")
	assert.Contains(t, preview.Diff, "+hello, world")
}

// TestFSNeverFollowsASymlink: in a workspace with .git and a .env, and
// symlinks to them (s -> .env, g -> .git) and to a plain file (n ->
// notes.txt): a pending fs.write or fs.patch through a symlink gets a
// refusal for a preview, never the file's content; fs.write through one
// (at the end of the path or on the way) fails and writes nothing; an
// fs.patch naming one (to change it, to rename it) fails; a plain file
// is still written.
func TestFSNeverFollowsASymlink(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	ws := workspace(t)
	require.NoError(t, os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, ".env"), []byte("SECRET=hunter2\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one\ntwo\n"), 0o644))
	for link, target := range map[string]string{"s": ".env", "g": ".git", "n": "notes.txt"} {
		require.NoError(t, os.Symlink(target, filepath.Join(ws, link)))
	}
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Workspaces: map[string]string{"main": ws}})
	careful := env.Agent("careful", map[string]any{
		"rules":    []map[string]any{{"id": "files", "tool": "fs.*", "effect": "approve"}},
		"settings": map[string]any{"escalate_at": "none"},
	})
	editor := env.Agent("editor", map[string]any{
		"rules":    []map[string]any{{"id": "files", "tool": "fs.*", "effect": "allow"}},
		"settings": map[string]any{"escalate_at": "none", "injection_action": "allow"},
	})
	alice := env.Reviewer("alice")
	ctx := env.Ctx()
	changeN := "--- a/n\n+++ b/n\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"
	renameN := "diff --git a/n b/m\nsimilarity index 100%\nrename from n\nrename to m\n"

	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"fs.write", map[string]any{"workspace": "main", "path": "s", "content": ""}},
		{"fs.write", map[string]any{"workspace": "main", "path": "g/config", "content": ""}},
		{"fs.patch", map[string]any{"workspace": "main", "patch": changeN}},
	} {
		a, err := careful.Submit(ctx, client.SubmitRequest{Tool: c.tool, Args: c.args})
		require.NoError(t, err)
		require.Equal(t, "pending", a.Status, "%v: %+v", c.args, a.Decision)
		seen, p := previewOf(t, ctx, alice, a.ID)
		assert.Contains(t, p.Error, "symlink", "%v", c.args)
		assert.Empty(t, p.Diff, "%v", c.args)
		assert.NotContains(t, string(seen.Preview), "hunter2", "%v", c.args)
		mine, err := careful.Get(ctx, a.ID)
		require.NoError(t, err)
		assert.NotContains(t, string(mine.Preview), "hunter2", "%v", c.args)
	}

	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"fs.write", map[string]any{"workspace": "main", "path": "g/hooks/pre-commit", "content": "#!/bin/sh\necho pwned\n"}},
		{"fs.write", map[string]any{"workspace": "main", "path": "s", "content": "SECRET=mine\n"}},
		{"fs.write", map[string]any{"workspace": "main", "path": "n", "content": "through\n"}},
		{"fs.patch", map[string]any{"workspace": "main", "patch": changeN}},
		{"fs.patch", map[string]any{"workspace": "main", "patch": renameN}},
		{"fs.patch", map[string]any{"workspace": "main", "patch": symlinkPatch("h", ".git/hooks")}},
	} {
		a, err := editor.Submit(ctx, client.SubmitRequest{Tool: c.tool, Args: c.args})
		require.NoError(t, err)
		require.Equal(t, "approved", a.Status, "%v: %+v", c.args, a.Decision)
		done := waitFinal(t, editor, a.ID)
		assert.Equal(t, "failed", done.Status, "%v: %s", c.args, done.Result)
		assert.Contains(t, result(t, done).Error, "symlink", "%v", c.args)
	}
	assert.NoFileExists(t, filepath.Join(ws, ".git", "hooks", "pre-commit"), "a hook written through g -> .git")
	b, err := os.ReadFile(filepath.Join(ws, ".env"))
	require.NoError(t, err)
	assert.Equal(t, "SECRET=hunter2\n", string(b))
	b, err = os.ReadFile(filepath.Join(ws, "notes.txt"))
	require.NoError(t, err)
	assert.Equal(t, "one\ntwo\n", string(b))
	for _, name := range []string{"m", "h"} {
		_, err = os.Lstat(filepath.Join(ws, name))
		assert.ErrorIs(t, err, os.ErrNotExist, name)
	}

	a, err := editor.Submit(ctx, client.SubmitRequest{Tool: "fs.write", Args: map[string]any{"workspace": "main", "path": "notes.txt", "content": "plain\n"}})
	require.NoError(t, err)
	done := waitFinal(t, editor, a.ID)
	require.Equal(t, "succeeded", done.Status, "%s", done.Result)
	b, err = os.ReadFile(filepath.Join(ws, "notes.txt"))
	require.NoError(t, err)
	assert.Equal(t, "plain\n", string(b))
}
