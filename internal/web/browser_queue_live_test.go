package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// press types one key as a browser does: a keydown that carries its text,
// so that a page which cancels the keydown also cancels the typing
// (chromedp.KeyEvent sends the text as a separate char event, which a
// cancelled keydown does not stop).
func press(key string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		var events []*input.DispatchKeyEventParams
		for _, r := range key {
			var down *input.DispatchKeyEventParams
			for _, e := range kb.Encode(r) {
				switch e.Type {
				case kb.KeyDown:
					down = e
					down.Type = input.DispatchKeyEventTypeKeyDown
					events = append(events, e)
				case kb.KeyChar:
					if down != nil {
						down.Text, down.UnmodifiedText = e.Text, e.UnmodifiedText
					}
				default:
					events = append(events, e)
				}
			}
		}
		for _, e := range events {
			if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, *e); err != nil {
				return err
			}
		}
		return nil
	})
}

// fakeNotification replaces the page's Notification API with a recorder
// that the user has already allowed, and makes the tab look unfocused
// (notifications are for a tab in the background).
const fakeNotification = `(() => {
	window.__notes = [];
	class Recorded {
		constructor(title, opts) { window.__notes.push({title: title, body: (opts || {}).body || '', tag: (opts || {}).tag || ''}); }
	}
	Recorded.permission = 'granted';
	Recorded.requestPermission = () => Promise.resolve('granted');
	window.Notification = Recorded;
	document.hasFocus = () => false;
})()`

type recordedNote struct {
	Title string `json:"title"`
	Body  string `json:"body"`
	Tag   string `json:"tag"`
}

// TestBrowserQueueTitleAndNotifications: the queue's tab title counts the
// pending actions (server-rendered and live); a new row is announced in
// the live region; a reviewer who opted in gets a desktop notification for
// a new action their filters show, and none for one they do not.
func TestBrowserQueueTitleAndNotifications(t *testing.T) {
	env := apptest.Start(t)
	ctx := env.Ctx()
	rules := map[string]any{"rules": []map[string]any{
		{"id": "mail-needs-review", "tool": "email.send", "effect": "approve", "timeout": "15m"},
	}}
	billing := env.Agent("billing-bot", rules)
	other := env.Agent("other-bot", rules)
	env.Reviewer("rita")
	first, err := billing.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "a@example.com"}})
	require.NoError(t, err)

	c := startChrome(t)
	c.signIn(t, env, "/ui/queue?agent=billing-bot", "rita", "rita-password-123", "#queue")
	c.within(t, 20*time.Second, chromedp.WaitVisible(chromedp.CSS(`#live[data-state="open"]`)))
	title := func() string { return run(t, c, chromedp.Title()) }
	assert.Equal(t, "(1) Queue · Airlock", title(), "the server renders the count")

	c.do(t, chromedp.Evaluate[chromedp.Void](fakeNotification), chromedp.Click(chromedp.CSS("#notify-toggle")))
	c.poll(t, 5*time.Second, `document.getElementById('notify-toggle').getAttribute('aria-pressed') === 'true'`)
	assert.Equal(t, "Desktop notifications: on", c.text(t, "#notify-toggle"))

	// Not shown by this queue's filter: no row, no notification.
	_, err = other.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "elsewhere@example.com"}})
	require.NoError(t, err)
	second := appears(t, c, billing, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "b@example.com", "subject": "Quarterly"}})
	c.poll(t, 5*time.Second, `document.title === '(2) Queue · Airlock'`)
	c.poll(t, 5*time.Second, `document.getElementById('announce').textContent.includes('New action: email.send from billing-bot')`)

	notes := run(t, c, chromedp.Evaluate[[]recordedNote](`window.__notes`))
	require.Len(t, notes, 1, "one notification, for the action the filter shows")
	assert.Equal(t, "Airlock: email.send waits for review", notes[0].Title)
	assert.Contains(t, notes[0].Body, "billing-bot")
	assert.Contains(t, notes[0].Body, `to="b@example.com"`)
	assert.Equal(t, "airlock-"+second.ID, notes[0].Tag)

	_, err = env.Admin.Deny(context.Background(), first.ID, "not now")
	require.NoError(t, err)
	c.poll(t, 10*time.Second, `document.title === '(1) Queue · Airlock'`)

	t.Run("opting out stops them", func(t *testing.T) {
		// The click's handler runs after the input event reaches the page,
		// which can be after Click returns: wait for it, as for opting in
		// (CI once read "true" here although the notification that followed
		// was, rightly, not shown).
		c.do(t, chromedp.Click(chromedp.CSS("#notify-toggle")))
		c.poll(t, 5*time.Second, `document.getElementById('notify-toggle').getAttribute('aria-pressed') === 'false'`)
		assert.Equal(t, "Desktop notifications: off", c.text(t, "#notify-toggle"))
		appears(t, c, billing, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "c@example.com"}})
		notes := run(t, c, chromedp.Evaluate[[]recordedNote](`window.__notes`))
		assert.Len(t, notes, 1)
	})
}

// TestBrowserQueueNotificationMarksHiddenCharacters: a desktop
// notification shows the arguments as the queue's row does, each hidden
// character as its marker, in the queue of every action and in "Actions I
// can approve". Before, its body was the summary as the agent sent it, so
// a right-to-left override turned "report\u202efdp.exe" into
// "report…exe.pdf" on the reviewer's desktop.
func TestBrowserQueueNotificationMarksHiddenCharacters(t *testing.T) {
	env := apptest.Start(t)
	agent := env.Agent("billing-bot", map[string]any{"rules": []map[string]any{
		{"id": "mail-needs-review", "tool": "email.send", "effect": "approve", "timeout": "15m"},
	}})
	env.Reviewer("rita")
	c := startChrome(t)
	// The reviewer's default queue (actions they can approve) and the
	// queue of every action build their rows each their own way.
	for i, path := range []string{"/ui/queue", "/ui/queue?show=all"} {
		if i == 0 {
			c.signIn(t, env, path, "rita", "rita-password-123", "#queue")
		} else {
			c.do(t, chromedp.Navigate(env.URL+path), chromedp.WaitVisible(chromedp.CSS("#queue")))
		}
		c.within(t, 20*time.Second, chromedp.WaitVisible(chromedp.CSS(`#live[data-state="open"]`)))
		c.do(t, chromedp.Evaluate[chromedp.Void](fakeNotification))
		if i == 0 { // remembered in this browser afterwards
			c.do(t, chromedp.Click(chromedp.CSS("#notify-toggle")))
			c.poll(t, 5*time.Second, `document.getElementById('notify-toggle').getAttribute('aria-pressed') === 'true'`)
		}

		appears(t, c, agent, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"attachment": "report\u202efdp.exe"}})
		c.poll(t, 10*time.Second, `window.__notes.length === 1`)
		notes := run(t, c, chromedp.Evaluate[[]recordedNote](`window.__notes`))
		require.Len(t, notes, 1, path)
		assert.NotContains(t, notes[0].Body, "\u202e", "%s: the override is not sent as it is", path)
		assert.Contains(t, notes[0].Body, "report⟨U+202E⟩fdp.exe", "%s: it is shown as its marker", path)
	}
}

// TestBrowserKeyboardShortcuts: ? lists the shortcuts, j / k move through
// the queue, Enter opens the selected action, / goes to the search, which
// filters the rows.
func TestBrowserKeyboardShortcuts(t *testing.T) {
	_, agent, c := browserSetup(t)
	older := appears(t, c, agent, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "first@example.com"}})
	newer := appears(t, c, agent, client.SubmitRequest{Tool: "payments.send", Args: map[string]any{"amount": 500, "to": "ACME"}})
	focused := func() string {
		return run(t, c, chromedp.Evaluate[string](`(() => { const r = document.activeElement && document.activeElement.closest('tr'); return r ? r.id : ''; })()`))
	}

	c.do(t, press("?"))
	c.poll(t, 5*time.Second, `document.getElementById('shortcuts').open`)
	for _, k := range []string{"j / k", "Enter", "/"} {
		assert.Contains(t, c.text(t, "#shortcuts"), k)
	}
	c.screenshot(t, "shortcuts.png")
	c.do(t, chromedp.KeyEvent(kb.Escape))
	c.poll(t, 5*time.Second, `!document.getElementById('shortcuts').open`)

	c.do(t, press("j"))
	assert.Equal(t, "row-"+newer.ID, focused())
	c.do(t, press("j"))
	assert.Equal(t, "row-"+older.ID, focused())
	c.do(t, press("k"))
	assert.Equal(t, "row-"+newer.ID, focused())

	c.do(t, press("/"))
	assert.Equal(t, "queue-search", run(t, c, chromedp.Evaluate[string](`document.activeElement.id`)))
	c.do(t, chromedp.KeyEvent("first@"))
	c.poll(t, 5*time.Second, `document.getElementById('row-`+newer.ID+`').hidden && !document.getElementById('row-`+older.ID+`').hidden`)
	assert.Equal(t, "first@", run(t, c, chromedp.Value(chromedp.CSS("#queue-search"))), "typing in the search is not taken as shortcuts")

	// j skips the rows the search hides; Enter opens the selected one.
	c.do(t, chromedp.Blur(chromedp.CSS("#queue-search")), press("j"))
	assert.Equal(t, "row-"+older.ID, focused())
	c.do(t, chromedp.KeyEvent(kb.Enter))
	c.within(t, 10*time.Second, chromedp.WaitVisible(chromedp.CSS("#phrase")))
	assert.Contains(t, run(t, c, chromedp.Location()), "/ui/actions/"+older.ID)
}
