package httpapi_test

import (
	"html"
	"io"
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// argsBox is the arguments as the console's action page shows them.
var argsBox = regexp.MustCompile(`(?s)<pre[^>]*id="action-args"[^>]*>(.*?)</pre>`)

// TestReviewerSeesWhereARedactedPathLeads: a Claude Code call held for
// approval is shown to its reviewer redacted, but Claude Code runs it as
// written. Before, "token=q/../../src" was stored and shown as
// "token=[REDACTED]": the reviewer read a command clearing a build
// directory, and approving it deleted ./src (found by a review). The
// secret is still not stored; where the path leads is shown. A value
// hidden whole under a secret-named key that no secret looks like makes
// the call high, and an allowed call waits for a reviewer.
func TestReviewerSeesWhereARedactedPathLeads(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("coder", map[string]any{"rules": []map[string]any{
		{"id": "ask", "tool": "claude-code.*", "effect": "approve", "timeout": "15m"},
		{"id": "lookups", "tool": "mcp.*", "effect": "allow"},
	}})
	alice := env.Reviewer("alice")
	_, login, err := env.Anon.Login(ctx, "alice", "alice-password-123")
	require.NoError(t, err)

	for _, c := range []struct {
		tool string
		args map[string]any
		key  string
		want string
	}{
		{"claude-code.bash", map[string]any{"command": "rm -rf ./build/token=q7Kx/../../src", "description": "clear the build cache"},
			"command", "rm -rf ./build/token=[REDACTED]/../../src"},
		{"claude-code.write", map[string]any{"file_path": "/home/dev/app/build/token=q7Kx/../../src/auth.go", "content": "package auth\n"},
			"file_path", "/home/dev/app/build/token=[REDACTED]/../../src/auth.go"},
	} {
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: c.tool, Args: c.args})
		require.NoError(t, err)
		require.Equal(t, "pending", a.Status, c.tool)
		seen, err := alice.Get(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, c.want, seen.Args[c.key], "%s: the reviewer reads where the path leads", c.tool)

		// The console's page shows it too, and never the secret.
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+"/ui/actions/"+a.ID, nil)
		require.NoError(t, err)
		req.AddCookie(&http.Cookie{Name: "airlock_session", Value: login.Token})
		resp, err := env.HTTP.Do(req)
		require.NoError(t, err)
		page, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		shown := argsBox.FindStringSubmatch(string(page))
		require.Len(t, shown, 2, "%s: the page shows the arguments", c.tool)
		assert.Contains(t, html.UnescapeString(shown[1]), `"`+c.want+`"`, c.tool)
		assert.NotContains(t, string(page), "q7Kx", c.tool)
	}

	// An allowed lookup whose "token" holds a command: hidden, so flagged
	// and sent to a reviewer.
	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "mcp.search.lookup", Args: map[string]any{"q": "weather", "token": "x; rm -rf ~"}})
	require.NoError(t, err)
	assert.Equal(t, "pending", a.Status, "%s", a.Decision.Reason)
	assert.Equal(t, "[REDACTED]", a.Args["token"])
	assert.Contains(t, a.Risk.Reasons, `args.token is hidden by redaction but holds ";", which no secret holds`)
	assert.Contains(t, []string{"high", "critical"}, a.Risk.Level)
	ok, err := agent.Submit(ctx, client.SubmitRequest{Tool: "mcp.search.lookup", Args: map[string]any{"q": "weather", "token": "abc123"}})
	require.NoError(t, err)
	assert.Equal(t, "approved", ok.Status, "a secret-shaped token is no reason to ask: %v", ok.Risk.Reasons)
}
