package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestBrowserPlanMode: a reviewer turns an agent's plan mode on from its
// page (with a reason): the page and the queue show the banner, the
// agent's calls are denied, and turning it off restores them; the fleet's
// switch on the fleet page does the same for every agent.
func TestBrowserPlanMode(t *testing.T) {
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("planner", map[string]any{"rules": []map[string]any{
		{"id": "mail", "tool": "email.send", "effect": "allow"},
	}})
	env.Reviewer("rita")
	mail := client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com"}}

	c := startChrome(t)
	c.signIn(t, env, "/ui/agents/planner", "rita", "rita-password-123", "#plan-mode-form")
	c.do(t,
		chromedp.SendKeys(chromedp.CSS("#plan-mode-form input[name=reason]"), "read the plan first"),
		chromedp.Click(chromedp.CSS("#plan-mode-on")),
		chromedp.WaitVisible(chromedp.CSS("#plan-mode-banner")),
	)
	assert.Contains(t, c.text(t, "#plan-mode-agent"), "by rita")
	assert.Contains(t, c.text(t, "#plan-mode-agent"), "read the plan first")
	c.screenshot(t, "agent-plan-mode.png")
	a, err := agent.Submit(ctx, mail)
	require.NoError(t, err)
	assert.Equal(t, "plan_mode", a.Decision.Source)

	c.do(t,
		chromedp.Navigate(env.URL+"/ui/queue"),
		chromedp.WaitVisible(chromedp.CSS("#queue-plan-mode")),
	)
	assert.Contains(t, c.text(t, "#queue-plan-mode"), "planner")
	assert.Contains(t, c.text(t, "#queue-plan-mode"), "read the plan first")

	c.do(t,
		chromedp.Navigate(env.URL+"/ui/agents/planner"),
		chromedp.Click(chromedp.CSS("#plan-mode-off")),
		chromedp.WaitVisible(chromedp.CSS("#plan-mode-on")),
	)
	assert.Equal(t, 0, run(t, c, chromedp.Evaluate[int](`document.querySelectorAll("#plan-mode-banner").length`)), "no banner once off")
	a, err = agent.Submit(ctx, mail)
	require.NoError(t, err)
	assert.Equal(t, "approved", a.Status)

	// The fleet's switch.
	c.do(t,
		chromedp.Navigate(env.URL+"/ui/fleet"),
		chromedp.Click(chromedp.CSS("#fleet-plan-mode-on")),
		chromedp.WaitVisible(chromedp.CSS("#fleet-plan-mode-off")),
	)
	a, err = agent.Submit(ctx, mail)
	require.NoError(t, err)
	assert.Equal(t, "plan_mode", a.Decision.Source)
	assert.Equal(t, 0, run(t, c, chromedp.Evaluate[int](`document.querySelectorAll("#fleet-stop-form").length`)),
		"a reviewer is not offered the emergency stop")
	c.do(t,
		chromedp.Navigate(env.URL+"/ui/agents/planner"),
		chromedp.WaitVisible(chromedp.CSS("#plan-mode-fleet")),
		chromedp.Navigate(env.URL+"/ui/queue"),
		chromedp.WaitVisible(chromedp.CSS("#queue-plan-mode-fleet")),
		chromedp.Navigate(env.URL+"/ui/fleet"),
		chromedp.Click(chromedp.CSS("#fleet-plan-mode-off")),
		chromedp.WaitVisible(chromedp.CSS("#fleet-plan-mode-on")),
	)
	a, err = agent.Submit(ctx, mail)
	require.NoError(t, err)
	assert.Equal(t, "approved", a.Status)
}

// TestBrowserFleetStop: an admin stops every agent from the fleet page,
// with a reason; the queue says so; resuming from the same page restores
// them.
func TestBrowserFleetStop(t *testing.T) {
	env := apptest.Start(t)
	ctx := env.Ctx()
	policy := map[string]any{"rules": []map[string]any{{"id": "mail", "tool": "email.send", "effect": "approve", "timeout": "10m"}}}
	one := env.Agent("one", policy)
	two := env.Agent("two", policy)
	mail := client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com"}}
	pending, err := one.Submit(ctx, mail)
	require.NoError(t, err)

	c := startChrome(t)
	c.signIn(t, env, "/ui/fleet", "admin", apptest.AdminPassword, "#fleet-stop-form")
	c.do(t,
		chromedp.SendKeys(chromedp.CSS("#fleet-stop-form input[name=reason]"), "incident 9"),
		chromedp.Click(chromedp.CSS("#fleet-stop-form button")),
		chromedp.WaitVisible(chromedp.CSS("#fleet-resume-form")),
	)
	assert.Contains(t, c.text(t, "#fleet-stop-banner"), "incident 9")
	c.screenshot(t, "fleet-stopped.png")
	got, err := env.Admin.Get(ctx, pending.ID)
	require.NoError(t, err)
	assert.Equal(t, "cancelled", got.Status)
	for _, ag := range []*client.Client{one, two} {
		a, err := ag.Submit(ctx, mail)
		require.NoError(t, err)
		assert.Equal(t, "suspended", a.Decision.Source)
	}
	c.do(t,
		chromedp.Navigate(env.URL+"/ui/queue"),
		chromedp.WaitVisible(chromedp.CSS("#fleet-stop-banner")),
		chromedp.Navigate(env.URL+"/ui/fleet"),
		chromedp.Click(chromedp.CSS("#fleet-resume-form button")),
		chromedp.WaitVisible(chromedp.CSS("#fleet-stop-form")),
	)
	for _, ag := range []*client.Client{one, two} {
		a, err := ag.Submit(ctx, mail)
		require.NoError(t, err)
		assert.Equal(t, "pending", a.Status)
	}
}
