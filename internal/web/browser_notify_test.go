package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
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

// TestBrowserNotificationsAndGroups walks an admin through adding a
// webhook target and a reviewer group in the console, then shows a
// reviewer outside the rule's group the action read-only with the reason,
// kept out of the default queue ("actions I can approve") but reachable
// under "All pending", and a member the deliveries on the action page.
func TestBrowserNotificationsAndGroups(t *testing.T) {
	env := apptest.Start(t)
	var mu sync.Mutex
	var bodies []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	env.Reviewer("mia")
	env.Reviewer("otto")

	c := startChrome(t)
	c.signIn(t, env, "/ui/notify", "admin", apptest.AdminPassword, "#notify-form")
	c.do(t,
		chromedp.SendKeys(chromedp.CSS("#target-name"), "team-hook"),
		chromedp.SetValue(chromedp.CSS("#target-kind"), "webhook"),
		chromedp.SendKeys(chromedp.CSS("#target-url"), hook.URL+"/in"),
		chromedp.SendKeys(chromedp.CSS("#target-secret"), "console-secret"),
		chromedp.SendKeys(chromedp.CSS("#target-allow"), "127.0.0.0/8"),
		chromedp.Click(chromedp.CSS(`#notify-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#target-team-hook")),
	)
	row := c.text(t, "#target-team-hook")
	assert.Contains(t, row, "[redacted]")
	assert.NotContains(t, row, "console-secret")

	c.do(t,
		chromedp.Navigate(env.URL+"/ui/groups"),
		chromedp.WaitVisible(chromedp.CSS("#group-form")),
		chromedp.SendKeys(chromedp.CSS("#group-name"), "treasury"),
		chromedp.SendKeys(chromedp.CSS("#group-members"), "mia"),
		chromedp.Click(chromedp.CSS(`#group-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#group-treasury")),
	)
	c.screenshot(t, "groups.png")

	agent := env.Agent("payer", map[string]any{"rules": []map[string]any{
		{"id": "treasury-only", "tool": "payments.send", "effect": "approve", "reviewers": []string{"treasury"}, "notify": []string{"team-hook"}},
	}})
	a, err := agent.Submit(context.Background(), client.SubmitRequest{Tool: "payments.send", Args: map[string]any{"amount": 5}})
	require.NoError(t, err)

	// otto is outside the group: not in his default queue, read-only on the page.
	otto := startChrome(t)
	otto.signInAndOpenQueue(t, env, "otto")
	otto.within(t, 20*time.Second, chromedp.WaitVisible(chromedp.CSS("#queue-rows")))
	assert.Zero(t, run(t, otto, chromedp.Evaluate[int](`document.querySelectorAll("#row-`+a.ID+`").length`)), "not an action otto can approve")
	otto.do(t,
		chromedp.Navigate(env.URL+"/ui/queue?show=all"),
		chromedp.WaitVisible(chromedp.CSS("#row-"+a.ID)),
		chromedp.Navigate(env.URL+"/ui/actions/"+a.ID),
		chromedp.WaitVisible(chromedp.CSS("#cannot-approve")),
	)
	assert.Contains(t, otto.text(t, "#cannot-approve"), "treasury")
	assert.Zero(t, run(t, otto, chromedp.Evaluate[int](`document.querySelectorAll("#confirmation").length`)), "no approve form")

	// mia is in it: the action is in her queue, and its page shows the delivery.
	mia := startChrome(t)
	mia.signInAndOpenQueue(t, env, "mia")
	mia.within(t, 20*time.Second, chromedp.WaitVisible(chromedp.CSS("#row-"+a.ID)))
	waitFor(t, 30*time.Second, "the webhook", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(bodies) > 0 && strings.Contains(bodies[0], a.ID)
	})
	mia.do(t, chromedp.Navigate(env.URL+"/ui/actions/"+a.ID), chromedp.WaitVisible(chromedp.CSS("#notifications")))
	waitFor(t, 30*time.Second, "the delivery on the page", func() bool {
		mia.do(t, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#notifications")))
		return run(t, mia, chromedp.Evaluate[int](`document.querySelectorAll('#deliveries tr.delivery[data-status="delivered"]').length`)) == 1
	})
	mia.screenshot(t, "action-notifications.png")
}
