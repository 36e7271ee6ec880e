package connectors_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// proxyPolicy governs server-everything behind the stdio proxy: echo and
// get-env run, get-tiny-image is refused, get-sum waits for a reviewer.
var proxyPolicy = map[string]any{"rules": []map[string]any{
	{"id": "echo", "tool": "mcp.everything.echo", "effect": "allow"},
	{"id": "env", "tool": "mcp.everything.get-env", "effect": "allow"},
	{"id": "no-images", "tool": "mcp.everything.get-tiny-image", "effect": "deny"},
	{"id": "sums", "tool": "mcp.everything.get-sum", "effect": "approve", "timeout": "15m"},
}}

// buildAirlock builds cmd/airlock into a temporary directory.
func buildAirlock(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "airlock")
	build := exec.Command("go", "build", "-o", bin, "./cmd/airlock")
	build.Dir = "../.."
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// The proxy's own environment holds these; the MCP server it launches must
// see none of them.
const (
	awsSecret = "wJalrXUtnFEMI/K7MDENG/proxy-env-secret-7f3a"
	awsKeyID  = "AKIAPROXYENVTEST7F3A"
)

// TestProxyDrivesRealMCPSoftware: the official TypeScript SDK's Client,
// over its StdioClientTransport, launches `airlock mcp proxy --server
// everything` (AIRLOCK_URL and an agent's AIRLOCK_TOKEN in its
// environment, AWS credentials too) where the registration launches
// server-everything's stdio mode with node, in bubblewrap, behind
// stdio-tap.mjs, which records the tools/call requests that reach it.
// tools/list is what server-everything answers directly; an allowed echo
// returns its text; a prompt injection in get-env's result (from the
// registration's env) reaches the model and flags the action; a denied
// get-tiny-image returns isError with the reason and never reaches the
// server; a pending get-sum reaches it only after a reviewer approves over
// REST, and is answered isError after a denial and after expiry; get-env
// shows the registration's env and none of the proxy's (no AIRLOCK_TOKEN,
// no AWS_*); an unregistered name is refused; once Airlock is stopped the
// next call is an error and does not reach the server.
func TestProxyDrivesRealMCPSoftware(t *testing.T) {
	t.Parallel()
	p := requireNode(t)
	bin := buildAirlock(t)
	env := apptest.Start(t, apptest.Options{ExpiryEvery: 20 * time.Millisecond})
	ctx := env.Ctx()
	_, err := env.Admin.CreateMCPServer(ctx, client.MCPServer{
		Name: "everything", Transport: "stdio", Command: "node", Args: []string{p.Tap, p.Everything, "stdio"},
		Env: map[string]string{"EVERYTHING_MARK": "set-by-the-registration", "WEATHER_NOTE": injected}, ReadOnlyPaths: []string{p.Dir}})
	require.NoError(t, err)
	env.Agent("coder", proxyPolicy)
	env.Agent("hasty", hastyPolicy)
	reviewer := env.Reviewer("rita")
	proxy := func(t *testing.T, server, agent string) (*tsClient, string) {
		token := agentToken(t, env, agent)
		return startClient(t, p, map[string]any{
			"transport": "stdio", "command": bin, "args": []string{"mcp", "proxy", "--server", server},
			"cwd": t.TempDir(),
			"env": map[string]string{
				"PATH": os.Getenv("PATH"), "HOME": t.TempDir(),
				"AIRLOCK_URL": env.URL, "AIRLOCK_TOKEN": token,
				"AWS_SECRET_ACCESS_KEY": awsSecret, "AWS_ACCESS_KEY_ID": awsKeyID,
			}}), token
	}
	coder, coderToken := proxy(t, "everything", "coder")
	coder.requireConnected()

	t.Run("tools/list unchanged", func(t *testing.T) {
		direct := startClient(t, p, map[string]any{"transport": "stdio", "command": p.Node,
			"args": []string{p.Everything, "stdio"}, "env": map[string]string{"PATH": os.Getenv("PATH"), "HOME": t.TempDir()}})
		direct.requireConnected()
		want := direct.listTools()
		assert.Subset(t, toolNames(want), []string{"echo", "get-sum", "get-env", "get-tiny-image"})
		assert.Equal(t, want, coder.listTools())
	})

	t.Run("allowed echo", func(t *testing.T) {
		res := coder.call("echo", map[string]any{"message": "hello through the proxy"})
		assert.False(t, res.IsError)
		assert.Equal(t, "Echo: hello through the proxy", res.Text())
		assert.Equal(t, []toolCall{{Name: "echo", Arguments: map[string]any{"message": "hello through the proxy"}}}, coder.tapCalls())
		acts := actionsOf(t, ctx, reviewer, "mcp.everything.echo", "")
		require.Len(t, acts, 1)
		echo := env.Settled(reviewer, acts[0].ID) // the result may be reported just after the answer
		assert.Equal(t, "succeeded", echo.Status, "the upstream's result is the action's result")
		assert.Equal(t, map[string]any{"message": "hello through the proxy"}, echo.Args)
		assert.Contains(t, string(echo.Result), "Echo: hello through the proxy")
	})

	t.Run("injection in the result flagged", func(t *testing.T) {
		// The registration's env holds a prompt injection; get-env
		// answers with it.
		res := coder.call("get-env", map[string]any{})
		assert.False(t, res.IsError, "flag: the model gets the result as it is")
		assert.Contains(t, res.Text(), injected)
		requireFlagged(t, env, reviewer, "coder", "mcp.everything.get-env")
	})

	t.Run("denied get-tiny-image", func(t *testing.T) {
		res := coder.call("get-tiny-image", map[string]any{})
		assert.True(t, res.IsError)
		assert.Contains(t, res.Text(), "Airlock denied mcp.everything.get-tiny-image")
		for _, c := range res.Content {
			assert.Equal(t, "text", c.Type, "no image: the upstream did not run it")
		}
		assert.Zero(t, countCalls(coder.tapCalls(), "get-tiny-image"), "a denied call never reaches the server")
		acts := actionsOf(t, ctx, reviewer, "mcp.everything.get-tiny-image", "")
		require.Len(t, acts, 1)
		assert.Equal(t, "denied", acts[0].Status)
		assert.Empty(t, string(acts[0].Result), "nothing ran, so nothing was reported")
	})

	t.Run("get-env shows none of the proxy's environment", func(t *testing.T) {
		res := coder.call("get-env", map[string]any{})
		require.False(t, res.IsError, res.Text())
		var seen map[string]string
		require.NoError(t, json.Unmarshal([]byte(res.Text()), &seen), res.Text())
		assert.Equal(t, "set-by-the-registration", seen["EVERYTHING_MARK"], "get-env reports the server's environment")
		for k := range seen {
			assert.False(t, strings.HasPrefix(k, "AWS_"), k)
			assert.False(t, strings.HasPrefix(k, "AIRLOCK_"), k)
			assert.False(t, strings.HasPrefix(k, "LD_"), k)
		}
		for _, secret := range []string{coderToken, awsSecret, awsKeyID, "AIRLOCK_TOKEN"} {
			assert.NotContains(t, res.Text(), secret)
		}
	})

	t.Run("pending get-sum approved", func(t *testing.T) {
		id := coder.sendCall("get-sum", map[string]any{"a": 2, "b": 3})
		a := pendingAction(t, ctx, reviewer, "mcp.everything.get-sum")
		assert.Zero(t, countCalls(coder.tapCalls(), "get-sum"), "held while pending")
		_, err := reviewer.Approve(ctx, a.ID, a.ConfirmationPhrase, "")
		require.NoError(t, err)
		res := coder.waitTool(id)
		assert.False(t, res.IsError)
		assert.Equal(t, "The sum of 2 and 3 is 5.", res.Text())
		assert.Equal(t, 1, countCalls(coder.tapCalls(), "get-sum"), "forwarded once, after the approval")
		got := env.Settled(reviewer, a.ID)
		assert.Equal(t, "succeeded", got.Status)
		assert.Contains(t, string(got.Result), "The sum of 2 and 3 is 5.")
	})

	t.Run("pending get-sum denied", func(t *testing.T) {
		id := coder.sendCall("get-sum", map[string]any{"a": 20, "b": 22})
		a := pendingAction(t, ctx, reviewer, "mcp.everything.get-sum")
		_, err := reviewer.Deny(ctx, a.ID, "no sums after five")
		require.NoError(t, err)
		res := coder.waitTool(id)
		assert.True(t, res.IsError)
		assert.Contains(t, res.Text(), "no sums after five")
		assert.NotContains(t, res.Text(), "42")
		assert.Equal(t, 1, countCalls(coder.tapCalls(), "get-sum"), "a denied call never reaches the server")
		got, err := reviewer.Get(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, "denied", got.Status)
		assert.Empty(t, string(got.Result))
	})

	t.Run("pending get-sum expires", func(t *testing.T) {
		hasty, _ := proxy(t, "everything", "hasty")
		hasty.requireConnected()
		res := hasty.call("get-sum", map[string]any{"a": 4, "b": 5})
		assert.True(t, res.IsError)
		assert.Contains(t, res.Text(), "expired")
		assert.NotContains(t, res.Text(), "is 9")
		assert.Empty(t, hasty.tapCalls(), "an expired call never reaches the server")
		page, err := reviewer.ListActions(ctx, map[string][]string{"agent": {"hasty"}})
		require.NoError(t, err)
		require.Len(t, page.Actions, 1)
		assert.Equal(t, "expired", page.Actions[0].Status)
		assert.Empty(t, string(page.Actions[0].Result))
	})

	t.Run("unregistered server refused", func(t *testing.T) {
		c, _ := proxy(t, "nope", "coder")
		assert.Equal(t, "connect_error", c.Connect.Event, "%+v", c.Connect)
		c.waitExit()
		t.Logf("the proxy said: %s", c.stderr.String())
		assert.Contains(t, c.stderr.String(), `"nope"`)
		assert.Contains(t, c.stderr.String(), "not_found")
	})

	t.Run("Airlock stopped", func(t *testing.T) {
		env.Stop()
		r := coder.wait(coder.sendCall("echo", map[string]any{"message": "sent after Airlock stopped"}))
		t.Logf("after the stop: error %+v, result %s", r.Error, r.Result)
		if r.Error == nil {
			var res toolResult
			require.NoError(t, json.Unmarshal(r.Result, &res))
			assert.True(t, res.IsError, "%s", r.Result)
			assert.NotContains(t, res.Text(), "Echo: sent after Airlock stopped")
		}
		calls := coder.tapCalls()
		assert.Equal(t, 1, countCalls(calls, "echo"), "%v: the call after the stop never reached the server", calls)
	})
}
