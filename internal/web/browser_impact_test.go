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

// TestBrowserImpactPreview: the page of a pending exec in a worktree shows
// its impact preview (status, the state it ran on and the coloured diff
// the command made to the copy, hidden characters marked); approving it
// runs the command, and the page then says the run made the previewed
// diff.
func TestBrowserImpactPreview(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	_, repo := gitRepo(t, map[string]string{"README.md": "# Service\nversion one\n"})

	env := apptest.Start(t, apptest.Options{Worker: "embedded", Repos: map[string]string{"svc": repo}})
	agent := env.Agent("coder", map[string]any{
		"rules":    []map[string]any{{"id": "worktrees", "tool": "worktree.*", "effect": "allow"}, {"id": "edit", "tool": "exec", "effect": "approve"}},
		"settings": map[string]any{"escalate_at": "none"},
	})
	env.Reviewer("rita")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	until := func(id string, done func(a *client.Action) bool) *client.Action {
		for {
			a, err := agent.Get(ctx, id)
			require.NoError(t, err)
			if done(a) {
				return a
			}
			require.NoError(t, ctx.Err())
			time.Sleep(20 * time.Millisecond)
		}
	}
	finished := func(a *client.Action) bool { return a.Status == "succeeded" || a.Status == "failed" }

	wt, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.create", Args: map[string]any{"repo": "svc"}})
	require.NoError(t, err)
	created := until(wt.ID, finished)
	require.Equal(t, "succeeded", created.Status, "%s", created.Result)
	worktree := strings.Split(strings.Split(string(created.Result), `"worktree":"`)[1], `"`)[0]
	edit, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{
		"argv": []any{"sed", "-i", "s/version one/version\u202etwo/", "README.md"}, "worktree": worktree}})
	require.NoError(t, err)
	require.Equal(t, "pending", edit.Status)
	until(edit.ID, func(a *client.Action) bool { return !strings.Contains(string(a.Preview), `"preparing"`) })

	c := startChrome(t)
	c.signIn(t, env, "/ui/actions/"+edit.ID, "rita", "rita-password-123", "#impact-preview")
	assert.Equal(t, "ready", c.text(t, "#impact-status"))
	assert.Len(t, c.text(t, "#impact-head"), 40)
	assert.Len(t, c.text(t, "#impact-tree"), 40)
	assert.Equal(t, "-version one", c.text(t, "#impact-diff .diff-del"))
	assert.Contains(t, c.text(t, "#impact-diff .diff-add"), "+version")
	marks := run(t, c, chromedp.Evaluate[int](`document.querySelectorAll("#impact-diff .diff-add .hidden-char").length`))
	assert.Equal(t, 1, marks, "the bidi override in the diff is marked")
	assert.NotEmpty(t, c.text(t, "#impact-flags"), "the diff's hidden character is flagged")
	c.screenshot(t, "exec-impact-preview.png")

	phrase := c.text(t, "#phrase")
	c.do(t,
		chromedp.SendKeys(chromedp.CSS("#confirmation"), phrase),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS("#decision")),
	)
	done := until(edit.ID, finished)
	require.Equal(t, "succeeded", done.Status, "%s", done.Result)
	c.do(t, chromedp.Navigate(env.URL+"/ui/actions/"+edit.ID), chromedp.WaitVisible(chromedp.CSS("#impact-matches")))
	assert.Equal(t, "The run made exactly the previewed diff.", c.text(t, "#impact-matches"))
}
