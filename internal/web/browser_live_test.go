package web_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/sandbox"
)

// openAction signs a reviewer in on an action's page and waits until its
// stream is open (changes from then on reach the page).
func (c *chrome) openAction(t *testing.T, env *apptest.Env, id, user string) {
	t.Helper()
	c.signIn(t, env, "/ui/actions/"+id, user, user+"-password-123", "#action-page")
	c.within(t, 20*time.Second, chromedp.WaitReady(chromedp.CSS(`#action-page[data-live="open"]`)))
}

// TestBrowserLiveActionPage: two reviewers have the same action open. A
// third reviewer's approval shows on both pages as quorum progress, with
// their forms still open; then one of the two approves in the browser and
// the other's form is disabled within a second, with what they had typed
// kept and the decision shown, without a reload.
func TestBrowserLiveActionPage(t *testing.T) {
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("billing-bot", map[string]any{"rules": []map[string]any{
		{"id": "big-spend", "tool": "payments.send", "effect": "approve", "approvals": 2, "timeout": "30m"},
	}})
	env.Reviewer("rita")
	env.Reviewer("sam")
	uma := env.Reviewer("uma")
	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "payments.send",
		Args: map[string]any{"amount": 9000, "currency": "EUR", "to": "ACME GmbH", "memo": "annual licence"}})
	require.NoError(t, err)
	require.Equal(t, "pending", a.Status)

	rita, sam := startChrome(t), startChrome(t)
	rita.openAction(t, env, a.ID, "rita")
	sam.openAction(t, env, a.ID, "sam")
	sam.do(t, chromedp.SendKeys(chromedp.CSS("#confirmation"), "payments.send half-typ"))

	t.Run("another reviewer's approval shows as quorum progress", func(t *testing.T) {
		full, err := uma.Get(ctx, a.ID)
		require.NoError(t, err)
		_, err = uma.Approve(ctx, a.ID, full.ConfirmationPhrase, "once")
		require.NoError(t, err)
		for _, c := range []*chrome{rita, sam} {
			c.poll(t, 10*time.Second, `(() => { const el = document.querySelector('#approvals');
				return !!el && el.textContent.includes('uma') && el.textContent.includes('1 of 2'); })()`)
			enabled := run(t, c, chromedp.Evaluate[bool](`!document.getElementById('approve').disabled`))
			assert.True(t, enabled, "the form closed although the action is still pending")
		}
	})

	phrase := rita.text(t, "#phrase")
	rita.do(t, chromedp.SendKeys(chromedp.CSS("#confirmation"), phrase), chromedp.Click(chromedp.CSS("#approve")))
	clicked := time.Now()
	// The bound: sam's form is disabled within 1 s of rita's click.
	sam.poll(t, time.Until(clicked.Add(time.Second)),
		`document.getElementById('approve').disabled && document.getElementById('confirmation').disabled && document.getElementById('deny').disabled`)
	t.Logf("the other reviewer's form was disabled %s after the approving click", time.Since(clicked).Round(time.Millisecond))

	rita.within(t, 10*time.Second, chromedp.WaitVisible(chromedp.CSS("#decision")))
	assert.Equal(t, "payments.send half-typ", run(t, sam, chromedp.Value(chromedp.CSS("#confirmation"))), "what sam typed is kept")
	assert.Contains(t, sam.text(t, "#form-closed"), "approved")
	assert.True(t, run(t, sam, chromedp.Evaluate[bool](`document.getElementById('decision-bar').hidden`)), "the decision bar is hidden")
	// The decision itself arrives with the page's regions, reloaded live.
	sam.within(t, 10*time.Second, chromedp.WaitVisible(chromedp.CSS("#decision")))
	assert.Equal(t, "approved", sam.text(t, "#action-status"))
	assert.Equal(t, "rita", sam.text(t, "#decided-by"))
	sam.screenshot(t, "live-decided-elsewhere.png")
}

// TestBrowserLiveJobOutput: the page of an exec waiting for review, left
// open, shows the job's output once another reviewer approved it and the
// worker ran it, without a reload.
func TestBrowserLiveJobOutput(t *testing.T) {
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	root, err := os.MkdirTemp("", "airlock-web-live-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	require.NoError(t, os.Chmod(root, 0o755))
	ws := filepath.Join(root, "ws")
	require.NoError(t, os.Mkdir(ws, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("live output arrives\n"), 0o644))

	env := apptest.Start(t, apptest.Options{Worker: "embedded", Workspaces: map[string]string{"main": ws}})
	ctx := env.Ctx()
	agent := env.Agent("coder", map[string]any{
		"rules":    []map[string]any{{"id": "exec-needs-review", "tool": "exec", "effect": "approve", "timeout": "15m"}},
		"settings": map[string]any{"escalate_at": "none"},
	})
	env.Reviewer("rita")
	uma := env.Reviewer("uma")
	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{"argv": []any{"cat", "notes.txt"}, "workspace": "main"}})
	require.NoError(t, err)
	require.Equal(t, "pending", a.Status)

	c := startChrome(t)
	c.openAction(t, env, a.ID, "rita")
	present := run(t, c, chromedp.Evaluate[bool](`!!document.getElementById('builtin-stdout')`))
	require.False(t, present, "no output before the job ran")

	full, err := uma.Get(ctx, a.ID)
	require.NoError(t, err)
	_, err = uma.Approve(ctx, a.ID, full.ConfirmationPhrase, "once")
	require.NoError(t, err)
	c.within(t, 30*time.Second, chromedp.WaitVisible(chromedp.CSS("#builtin-stdout")))
	assert.Contains(t, c.text(t, "#builtin-stdout"), "live output arrives")
	c.poll(t, 10*time.Second, `document.getElementById('action-status').textContent.trim() === 'succeeded'`)
	assert.True(t, run(t, c, chromedp.Evaluate[bool](`document.getElementById('approve').disabled`)), "the form is closed")
}

// TestBrowserLiveMergePreview: a merge's page opened while no worker has
// computed its preview says so; once a worker host comes online and
// attaches the preview, the diff appears on the open page, without a
// reload, and the form is still open. The phrase the reviewer had typed
// meanwhile is cleared, and the page says why: before, the diff and the
// approval's pin changed under it silently, and the key ending the phrase
// approved a diff the reviewer had not read.
func TestBrowserLiveMergePreview(t *testing.T) {
	pm := newPendingMerge(t, "README.md", "# Service\nversion one\n", "s/version one/version two/")
	env, merge, startHost := pm.env, pm.merge, pm.startHost
	c := startChrome(t)
	c.openAction(t, env, merge.ID, "rita")
	assert.Contains(t, c.text(t, "#builtin-diff"), "A worker is committing the worktree")
	require.False(t, run(t, c, chromedp.Evaluate[bool](`!!document.querySelector('#builtin-diff pre.diff')`)), "no diff before a worker computed it")
	assert.False(t, run(t, c, chromedp.Evaluate[bool](`document.getElementById('preview-changed').hidden === false`)))
	c.within(t, 10*time.Second, chromedp.SendKeys(chromedp.CSS("#confirmation"), "typed before the diff"))

	startHost()
	c.within(t, 30*time.Second, chromedp.WaitVisible(chromedp.CSS("#builtin-diff pre.diff")))
	assert.Equal(t, "-version one", c.text(t, "#builtin-diff .diff-del"))
	assert.Equal(t, "+version two", c.text(t, "#builtin-diff .diff-add"))
	assert.Equal(t, "pending", c.text(t, "#action-status"))
	assert.True(t, run(t, c, chromedp.Evaluate[bool](`!document.getElementById('approve').disabled`)), "the form stays open")
	c.poll(t, 10*time.Second, `document.getElementById('confirmation').value === ''`)
	assert.Contains(t, c.text(t, "#preview-changed"), "The preview changed while this page was open")
	assert.True(t, run(t, c, chromedp.Evaluate[bool](`document.getElementById('preview-changed').hidden === false`)))
}

// waitStatus polls an action until it has one of the statuses.
func waitStatus(t *testing.T, c *client.Client, id string, statuses ...string) *client.Action {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		a, err := c.Get(ctx, id)
		require.NoError(t, err)
		for _, s := range statuses {
			if a.Status == s {
				return a
			}
		}
		require.NoError(t, ctx.Err(), "action %s is still %s", id, a.Status)
		time.Sleep(20 * time.Millisecond)
	}
}
