package web_test

import (
	"context"
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

// TestBrowserWorktreeRun: the page of a pending worktree.run shows the
// command line it runs and the whole command set, as parsed (name by name)
// and as written; approving it in the
// console approves that set, so the next run of the repository goes
// without asking. A pending fs.write shows the diff it makes, and that
// approving it pins the file it was made against.
func TestBrowserWorktreeRun(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	_, repo := gitRepo(t, map[string]string{
		".airlock/commands.yaml": "test: echo all tests pass\nlint: echo clean\n",
		"README.md":              "# Service\n",
	})

	env := apptest.Start(t, apptest.Options{Worker: "embedded", Repos: map[string]string{"svc": repo}})
	agent := env.Agent("coder", map[string]any{
		"rules": []map[string]any{
			{"id": "worktrees", "tool": "worktree.*", "effect": "allow"},
			{"id": "files", "tool": "fs.*", "effect": "approve"},
		},
		"settings": map[string]any{"escalate_at": "none"},
	})
	env.Reviewer("rita")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	until := func(id string, ok func(*client.Action) bool) *client.Action {
		for {
			a, err := agent.Get(ctx, id)
			require.NoError(t, err)
			if ok(a) {
				return a
			}
			require.NoError(t, ctx.Err())
			time.Sleep(20 * time.Millisecond)
		}
	}
	final := func(a *client.Action) bool { return a.Status == "succeeded" || a.Status == "failed" }
	previewed := func(a *client.Action) bool { return len(a.Preview) > 0 }

	wt, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.create", Args: map[string]any{"repo": "svc"}})
	require.NoError(t, err)
	created := until(wt.ID, final)
	worktree := strings.Split(strings.Split(string(created.Result), `"worktree":"`)[1], `"`)[0]

	run, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.run", Args: map[string]any{"worktree": worktree, "command": "test"}})
	require.NoError(t, err)
	require.Equal(t, "pending", run.Status)
	until(run.ID, previewed)

	c := startChrome(t)
	c.signIn(t, env, "/ui/actions/"+run.ID, "rita", "rita-password-123", "#builtin-diff pre.diff")
	assert.Equal(t, "sh -c 'echo all tests pass'", c.text(t, "#builtin-argv"))
	row := func(n, sel string) string {
		return c.text(t, "#builtin-commands tbody tr:nth-child("+n+") "+sel)
	}
	assert.Equal(t, "lint", row("1", ".command-name"))
	assert.Equal(t, "echo clean", row("1", "pre.command-line"), "every command is shown as it runs, not only the one run")
	assert.Equal(t, "test", row("2", ".command-name"))
	assert.Equal(t, "echo all tests pass", row("2", "pre.command-line"))
	assert.Equal(t, "test", c.text(t, "#builtin-commands tr.runs .command-name"))
	assert.Contains(t, c.text(t, "#builtin-commands"), "repository svc")
	set := c.text(t, "#builtin-diff")
	assert.Contains(t, set, "test: echo all tests pass", "the file as written is shown too")
	assert.Contains(t, set, "lint: echo clean")
	c.screenshot(t, "worktree-run-action.png")
	phrase := c.text(t, "#phrase")
	c.do(t,
		chromedp.SendKeys(chromedp.CSS("#confirmation"), phrase),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS("#decision")),
	)
	done := until(run.ID, final)
	require.Equal(t, "succeeded", done.Status, "%s", done.Result)
	assert.Contains(t, string(done.Result), "all tests pass")

	next, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.run", Args: map[string]any{"worktree": worktree, "command": "lint"}})
	require.NoError(t, err)
	done = until(next.ID, final)
	assert.Equal(t, "succeeded", done.Status, "the approved command set runs without asking: %s", done.Result)

	w, err := agent.Submit(ctx, client.SubmitRequest{Tool: "fs.write", Args: map[string]any{"worktree": worktree, "path": "README.md", "content": "# Service\nnow documented\n"}})
	require.NoError(t, err)
	require.Equal(t, "pending", w.Status)
	until(w.ID, previewed)
	c.do(t, chromedp.Navigate(env.URL+"/ui/actions/"+w.ID), chromedp.WaitVisible(chromedp.CSS("#builtin-diff pre.diff")))
	assert.Equal(t, "+now documented", c.text(t, "#builtin-diff .diff-add"))
	assert.Contains(t, c.text(t, "#builtin-diff"), "What approving writes to README.md")
	assert.Contains(t, c.text(t, "#builtin-pin"), "approving pins that state, and the write is refused if the file changes before it runs",
		"the page says what the approval pins")
}
