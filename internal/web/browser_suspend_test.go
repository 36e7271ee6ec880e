package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestBrowserSuspendAgent: an admin stops an agent from its page: its
// pending action is cancelled and its calls are denied until the admin
// resumes it there.
func TestBrowserSuspendAgent(t *testing.T) {
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("rogue", map[string]any{"rules": []map[string]any{
		{"id": "mail", "tool": "email.send", "effect": "approve", "timeout": "10m"},
	}})
	mail := client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com"}}
	pending, err := agent.Submit(ctx, mail)
	require.NoError(t, err)
	require.Equal(t, "pending", pending.Status)

	c := startChrome(t)
	c.signIn(t, env, "/ui/agents/rogue", "admin", apptest.AdminPassword, "#suspend-form")
	c.do(t,
		chromedp.Click(chromedp.CSS("#suspend-form button")),
		chromedp.WaitVisible(chromedp.CSS("#suspended-badge")),
	)
	assert.Contains(t, c.text(t, "#suspension"), "suspended")
	c.screenshot(t, "agent-suspended.png")

	got, err := env.Admin.Get(ctx, pending.ID)
	require.NoError(t, err)
	assert.Equal(t, "cancelled", got.Status)
	denied, err := agent.Submit(ctx, mail)
	require.NoError(t, err)
	assert.Equal(t, "denied", denied.Status)
	assert.Contains(t, denied.Decision.Reason, "suspended")

	c.do(t,
		chromedp.Click(chromedp.CSS("#resume-form button")),
		chromedp.WaitVisible(chromedp.CSS("#suspend-form")),
	)
	again, err := agent.Submit(ctx, mail)
	require.NoError(t, err)
	assert.Equal(t, "pending", again.Status, "resumed: policy decides again")
}
