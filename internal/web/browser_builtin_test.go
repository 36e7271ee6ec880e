package web_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/sandbox"
)

// gitRepo is a repository with one commit of files (path: content), in
// a directory of its own (root) that the test's end removes; root is
// readable by the sandbox's user. It returns root and the repository.
func gitRepo(t *testing.T, files map[string]string) (root, repo string) {
	t.Helper()
	root, err := os.MkdirTemp("", "airlock-web-repo-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	require.NoError(t, os.Chmod(root, 0o755))
	repo = filepath.Join(root, "repo")
	gitSetup(t, root, "init", "-q", "-b", "main", repo)
	for name, content := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(repo, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644))
	}
	gitSetup(t, repo, "add", ".")
	gitSetup(t, repo, "commit", "-q", "-m", "initial")
	return root, repo
}

func gitSetup(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
}

// TestBrowserBuiltinActions: the action page of an exec shows its command
// line, where it ran and its output; a merge shows the coloured diff of the
// exact commit a reviewer approves, and approving it merges that commit.
func TestBrowserBuiltinActions(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	_, repo := gitRepo(t, map[string]string{"README.md": "# Service\nversion one\n"})

	env := apptest.Start(t, apptest.Options{Worker: "embedded", Repos: map[string]string{"svc": repo}})
	agent := env.Agent("coder", map[string]any{
		"rules":    []map[string]any{{"id": "worktrees", "tool": "worktree.*", "effect": "allow"}, {"id": "edit", "tool": "exec", "effect": "allow"}},
		"settings": map[string]any{"escalate_at": "none"},
	})
	env.Reviewer("rita")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	finished := func(id string) *client.Action {
		for {
			a, err := agent.Get(ctx, id)
			require.NoError(t, err)
			if a.Status == "succeeded" || a.Status == "failed" {
				return a
			}
			require.NoError(t, ctx.Err())
			time.Sleep(20 * time.Millisecond)
		}
	}

	wt, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.create", Args: map[string]any{"repo": "svc"}})
	require.NoError(t, err)
	created := finished(wt.ID)
	require.Equal(t, "succeeded", created.Status, "%s", created.Result)
	worktree := strings.Split(strings.Split(string(created.Result), `"worktree":"`)[1], `"`)[0]
	edit, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{
		"argv": []any{"sed", "-i", "s/version one/version two/", "README.md"}, "worktree": worktree}})
	require.NoError(t, err)
	require.Equal(t, "succeeded", finished(edit.ID).Status)
	show, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{"argv": []any{"cat", "README.md"}, "worktree": worktree}})
	require.NoError(t, err)
	require.Equal(t, "succeeded", finished(show.ID).Status)

	c := startChrome(t)
	c.signIn(t, env, "/ui/actions/"+show.ID, "rita", "rita-password-123", "#builtin-command")
	assert.Equal(t, "cat README.md", c.text(t, "#builtin-argv"))
	assert.Equal(t, "worktree "+worktree, c.text(t, "#builtin-where"))
	assert.Contains(t, c.text(t, "#builtin-stdout"), "version two")
	c.screenshot(t, "exec-action.png")

	merge, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.merge", Args: map[string]any{"worktree": worktree}})
	require.NoError(t, err)
	require.Equal(t, "pending", merge.Status)
	// The preview appears once a worker has committed the worktree.
	for {
		a, err := agent.Get(ctx, merge.ID)
		require.NoError(t, err)
		if len(a.Preview) > 0 {
			break
		}
		require.NoError(t, ctx.Err())
		time.Sleep(20 * time.Millisecond)
	}
	c.do(t, chromedp.Navigate(env.URL+"/ui/actions/"+merge.ID), chromedp.WaitVisible(chromedp.CSS("#builtin-diff pre.diff")))
	assert.Equal(t, "-version one", c.text(t, "#builtin-diff .diff-del"))
	assert.Equal(t, "+version two", c.text(t, "#builtin-diff .diff-add"))
	commit := c.text(t, "#builtin-commit")
	require.Len(t, commit, 40)
	c.screenshot(t, "merge-action.png")

	phrase := c.text(t, "#phrase")
	c.do(t,
		chromedp.SendKeys(chromedp.CSS("#confirmation"), phrase),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS("#decision")),
	)
	merged := finished(merge.ID)
	require.Equal(t, "succeeded", merged.Status, "%s", merged.Result)
	out, err := exec.Command("git", "-C", repo, "rev-parse", "main").Output()
	require.NoError(t, err)
	assert.Equal(t, commit, strings.TrimSpace(string(out)), "main is exactly the commit the reviewer saw")
}
