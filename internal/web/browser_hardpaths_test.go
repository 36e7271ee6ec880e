package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/pathrule"
)

// TestFleetPageShowsMergedDenyPaths: the fleet page, in a real browser,
// lists every built-in deny entry and the fleet's own additions, and the
// read-only entries.
func TestFleetPageShowsMergedDenyPaths(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	_, err := env.Admin.PutFleetPolicy(env.Ctx(), map[string]any{"rules": []any{},
		"settings": map[string]any{"deny_paths": []string{"secrets/prod"}, "read_only_paths": []string{"migrations"}}})
	require.NoError(t, err)
	env.User("ada", "admin")
	c := startChrome(t)
	c.signIn(t, env, "/ui/fleet", "ada", "ada-password-123", "#hard-paths")
	deny := c.text(t, "#deny-paths")
	for _, e := range pathrule.BuiltinDeny {
		assert.Contains(t, deny, e)
	}
	assert.Contains(t, deny, "secrets/prod")
	ro := c.text(t, "#read-only-paths")
	for _, e := range append(append([]string{}, pathrule.BuiltinReadOnly...), "migrations") {
		assert.Contains(t, ro, e)
	}
	c.do(t, chromedp.WaitVisible(chromedp.CSS("#overrides")))
	c.screenshot(t, "fleet-hard-paths.png")
}
