package web_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// screenshotDir is where the browser tests save what they saw (README:
// "Console"). AIRLOCK_SCREENSHOT_DIR overrides it.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("AIRLOCK_SCREENSHOT_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "web", "screenshots")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// chrome is a headless Debian chromium driven by chromedp, with a fresh
// profile. Console errors (a Content-Security-Policy violation, a script
// error) fail the test.
type chrome struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

// shortTempDir is a directory under os.TempDir with a short name, removed
// when the test ends.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cr")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func startChrome(t *testing.T) *chrome {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the browser tests need Debian's chromium (apt-get install chromium): %v", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		// Its singleton socket and cookie (org.chromium.Chromium.*) go to
		// TMPDIR, and outlive a killed browser: in a directory of the
		// test's they go with it (a short one: a socket's path is at most
		// 107 bytes, and t.TempDir's holds the test's name).
		chromedp.Env("TMPDIR=" + shortTempDir(t)),
		chromedp.WindowSize(1360, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	require.NoError(t, chromedp.Do(ctx), "starting chromium")
	c := &chrome{ctx: ctx}
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			// A failed resource load (the 403 or 422 page of a refused form)
			// is logged too; what matters is that nothing was refused by the
			// policy or broke.
			if (m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException) && !strings.Contains(m.Text, "Failed to load resource") {
				c.mu.Lock()
				c.errors = append(c.errors, m.Text)
				c.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancelCtx()
		<-done
		c.mu.Lock()
		defer c.mu.Unlock()
		assert.Empty(t, c.errors, "the browser's console reported errors")
	})
	return c
}

func (c *chrome) do(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 60*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

// within runs steps with a shorter deadline (waits that must not hang).
func (c *chrome) within(t *testing.T, d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, d)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

func run[T any](t *testing.T, c *chrome, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	require.NoError(t, err)
	return v
}

func (c *chrome) screenshot(t *testing.T, name string) {
	t.Helper()
	png := run(t, c, chromedp.FullScreenshot(100))
	require.NoError(t, os.WriteFile(filepath.Join(screenshotDir(t), name), png, 0o644))
}

// text is the text of the first element sel matches, once there is one.
// It is read in one evaluation: the live action page swaps whole regions
// when its action changes, and a node looked up first and read after may
// be gone by then ("No node with given id found").
func (c *chrome) text(t *testing.T, sel string) string {
	t.Helper()
	q, err := json.Marshal(sel)
	require.NoError(t, err)
	js := `(() => { const e = document.querySelector(` + string(q) + `); return e ? e.textContent : null; })()`
	ctx, cancel := context.WithTimeout(c.ctx, 60*time.Second)
	defer cancel()
	for {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[*string](js))
		require.NoError(t, err, "reading the text of %s", sel)
		if v != nil {
			return strings.TrimSpace(*v)
		}
		select {
		case <-ctx.Done():
			require.FailNow(t, "no element matches "+sel)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// signInAndOpenQueue logs in through the form and waits for the queue's
// websocket to be open.
func (c *chrome) signInAndOpenQueue(t *testing.T, env *apptest.Env, user string) {
	t.Helper()
	c.signIn(t, env, "/ui/queue", user, user+"-password-123", "#queue")
	c.within(t, 20*time.Second, chromedp.WaitVisible(chromedp.CSS(`#live[data-state="open"]`)))
}

// signIn opens path, signs in on the login form it is sent to, and waits
// for want on the page it comes back to.
func (c *chrome) signIn(t *testing.T, env *apptest.Env, path, user, password, want string) {
	t.Helper()
	c.do(t,
		chromedp.Navigate(env.URL+path),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), user),
		chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS(want)),
	)
}

// browserSetup starts a server with an agent and a reviewer, and a browser
// signed in as the reviewer on the queue page.
func browserSetup(t *testing.T) (*apptest.Env, *client.Client, *chrome) {
	t.Helper()
	env := apptest.Start(t)
	agent := env.Agent("billing-bot", map[string]any{"rules": []map[string]any{
		{"id": "mail-needs-review", "tool": "email.send", "effect": "approve", "timeout": "15m"},
		{"id": "big-spend", "tool": "payments.send", "effect": "approve", "when": "args.amount > 100", "timeout": "30m"},
	}})
	env.Reviewer("rita")
	c := startChrome(t)
	c.signInAndOpenQueue(t, env, "rita")
	return env, agent, c
}

// appears submits req and waits for its row to appear in the open queue,
// without a reload.
func appears(t *testing.T, c *chrome, agent *client.Client, req client.SubmitRequest) *client.Action {
	t.Helper()
	a, err := agent.Submit(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, "pending", a.Status)
	start := time.Now()
	c.within(t, 10*time.Second, chromedp.WaitVisible(chromedp.CSS("#row-"+a.ID)))
	t.Logf("the new action appeared in the open queue %s after the submit returned", time.Since(start).Round(time.Millisecond))
	return a
}

// waitDecision runs the agent's Wait in the background.
func waitDecision(agent *client.Client, id string) <-chan *client.Action {
	out := make(chan *client.Action, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		a, _ := agent.Wait(ctx, id)
		out <- a
	}()
	return out
}

func received(t *testing.T, ch <-chan *client.Action) *client.Action {
	t.Helper()
	select {
	case a := <-ch:
		require.NotNil(t, a, "the agent's wait failed")
		return a
	case <-time.After(60 * time.Second):
		t.Fatal("the agent's wait did not return")
	}
	return nil
}

func TestBrowserApprove(t *testing.T) {
	env, agent, c := browserSetup(t)
	// Something to look at besides the action under test.
	for _, req := range []client.SubmitRequest{
		{Tool: "payments.send", Args: map[string]any{"amount": 4200, "currency": "EUR", "to": "ACME GmbH", "memo": "Q3 licences"}},
		{Tool: "email.send", Args: map[string]any{"to": "press@example.com", "subject": "Launch date", "body": "We launch on Monday."}},
	} {
		appears(t, c, agent, req)
	}
	a := appears(t, c, agent, client.SubmitRequest{
		Tool: "email.send", ConversationID: "conv-7", StepID: "step-3", Reason: "The CFO asked for the quarterly numbers.",
		Args: map[string]any{"to": "cfo@example.com", "subject": "Q3 numbers", "body": "Attached: the Q3 report.",
			"api_key": "sk-live-abcdefghijklmnopqrstuvwx"},
	})
	c.do(t, chromedp.Sleep(2*time.Second)) // the new rows' highlight fades
	c.screenshot(t, "queue.png")
	decision := waitDecision(agent, a.ID)

	c.do(t,
		chromedp.Click(chromedp.CSS("#row-"+a.ID+" a.open")),
		chromedp.WaitVisible(chromedp.CSS("#phrase")),
	)
	phrase := c.text(t, "#phrase")
	require.True(t, strings.HasPrefix(phrase, "email.send "), "phrase %q", phrase)
	args := c.text(t, "#action-args")
	assert.Contains(t, args, "cfo@example.com")
	assert.NotContains(t, args, "sk-live-abcdefghijklmnopqrstuvwx", "secrets are redacted")
	assert.Equal(t, "mail-needs-review", c.text(t, "#policy-rule"))

	t.Run("paste is refused", func(t *testing.T) {
		refused := run(t, c, chromedp.Evaluate[bool](`(() => {
			const dt = new DataTransfer();
			dt.setData('text/plain', 'pasted');
			const ev = new ClipboardEvent('paste', {clipboardData: dt, bubbles: true, cancelable: true});
			return !document.getElementById('confirmation').dispatchEvent(ev);
		})()`))
		assert.True(t, refused, "the paste event was not refused")
		c.within(t, 5*time.Second, chromedp.WaitVisible(chromedp.CSS("#paste-note")))
	})

	c.do(t, chromedp.SendKeys(chromedp.CSS("#confirmation"), phrase))
	c.screenshot(t, "action.png")
	c.do(t,
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS("#decision")),
	)
	assert.Equal(t, "approved", c.text(t, "#action-status"))
	assert.Equal(t, "rita", c.text(t, "#decided-by"))

	got := received(t, decision)
	assert.Equal(t, "approved", got.Status)
	assert.Equal(t, "rita", got.Decision.By)

	t.Run("the decided action leaves the open queue", func(t *testing.T) {
		c.do(t, chromedp.Navigate(env.URL+"/ui/queue"), chromedp.WaitVisible(chromedp.CSS(`#live[data-state="open"]`)))
		n := run(t, c, chromedp.Evaluate[int](`document.querySelectorAll('#queue-rows tr').length`))
		assert.Equal(t, 2, n)
		other, err := agent.Submit(context.Background(), client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com"}})
		require.NoError(t, err)
		c.within(t, 10*time.Second, chromedp.WaitVisible(chromedp.CSS("#row-"+other.ID)))
		_, err = env.Admin.Deny(context.Background(), other.ID, "decided elsewhere")
		require.NoError(t, err)
		c.within(t, 10*time.Second, chromedp.WaitNotPresent(chromedp.CSS("#row-"+other.ID)))
	})
}

func TestBrowserDeny(t *testing.T) {
	_, agent, c := browserSetup(t)
	a := appears(t, c, agent, client.SubmitRequest{Tool: "payments.send",
		Args: map[string]any{"amount": 950, "currency": "USD", "to": "unknown-vendor", "memo": "urgent, pay today"}})
	decision := waitDecision(agent, a.ID)
	c.do(t,
		chromedp.Click(chromedp.CSS("#row-"+a.ID+" a.open")),
		chromedp.WaitVisible(chromedp.CSS("#deny-reason")),
		chromedp.SendKeys(chromedp.CSS("#deny-reason"), "Unknown vendor: ask finance first."),
		chromedp.Click(chromedp.CSS("#deny")),
		chromedp.WaitVisible(chromedp.CSS("#decision")),
	)
	assert.Equal(t, "denied", c.text(t, "#action-status"))
	assert.Equal(t, "Unknown vendor: ask finance first.", c.text(t, "#decision-reason"))
	c.screenshot(t, "action-denied.png")

	got := received(t, decision)
	assert.Equal(t, "denied", got.Status)
	assert.Equal(t, "Unknown vendor: ask finance first.", got.Decision.Reason)
}

func TestBrowserWrongPhraseIsRefused(t *testing.T) {
	env, agent, c := browserSetup(t)
	a := appears(t, c, agent, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "all@example.com", "subject": "Reorg"}})
	c.do(t,
		chromedp.Click(chromedp.CSS("#row-"+a.ID+" a.open")),
		chromedp.WaitVisible(chromedp.CSS("#confirmation")),
	)
	phrase := c.text(t, "#phrase")
	wrong := "email.send ZZZZ"
	if phrase == wrong {
		wrong = "email.send YYYY"
	}
	c.do(t,
		chromedp.SendKeys(chromedp.CSS("#confirmation"), wrong),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS("#confirmation-error")),
	)
	// The error is at the field, tied to it for screen readers, and what
	// was typed is kept for correcting.
	assert.Contains(t, c.text(t, "#confirmation-error"), "does not match")
	assert.Equal(t, "pending", c.text(t, "#action-status"), "nothing changed")
	typed := run(t, c, chromedp.Value(chromedp.CSS("#confirmation")))
	assert.Equal(t, wrong, typed, "the typed phrase is kept")
	field := run(t, c, chromedp.Attributes(chromedp.CSS("#confirmation")))
	assert.Equal(t, "true", field["aria-invalid"])
	assert.Contains(t, field["aria-describedby"], "confirmation-error")
	// The error sits right after the field, not at the top of the page.
	below := run(t, c, chromedp.Evaluate[bool](`document.getElementById('confirmation').nextElementSibling.id === 'confirmation-error'`))
	assert.True(t, below, "the error is not at the field")
	focused := run(t, c, chromedp.Evaluate[string](`document.activeElement && document.activeElement.id`))
	assert.Equal(t, "confirmation", focused, "the field is focused for correcting")
	c.screenshot(t, "wrong-phrase.png")

	got, err := env.Admin.Get(context.Background(), a.ID)
	require.NoError(t, err)
	assert.Equal(t, "pending", got.Status)
	assert.Empty(t, got.Approvals)
}
