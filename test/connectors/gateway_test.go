package connectors_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// gatewayPolicy governs server-everything behind the gateway: echo runs,
// get-env is refused, get-sum waits for a reviewer.
var gatewayPolicy = map[string]any{"rules": []map[string]any{
	{"id": "echo", "tool": "mcp.everything.echo", "effect": "allow"},
	{"id": "no-env", "tool": "mcp.everything.get-env", "effect": "deny"},
	{"id": "sums", "tool": "mcp.everything.get-sum", "effect": "approve", "timeout": "15m"},
}}

// hastyPolicy gives a reviewer one second for get-sum.
var hastyPolicy = map[string]any{"rules": []map[string]any{
	{"id": "quick-sums", "tool": "mcp.everything.get-sum", "effect": "approve", "timeout": "1s"},
}}

// TestGatewayDrivesRealMCPSoftware: the official TypeScript SDK's Client,
// over its StreamableHTTPClientTransport with an agent token, talks to
// /mcp/everything, registered as the http server in front of
// server-everything's Streamable HTTP mode (through a tap on the loopback
// that records every tools/call reaching it). tools/list is what
// server-everything answers directly; an allowed echo returns its text; a
// prompt injection in get-env's result (for an agent allowed it) reaches
// the model and flags the action; a denied get-env returns isError with
// the reason and never reaches the upstream; a pending get-sum reaches it
// only after a reviewer approves over REST, and is answered isError after
// a denial and after expiry; an unregistered name is refused, and so is
// a registration naming the loopback (in five spellings) without
// allow_private, before any connection to it; once
// Airlock is stopped the next call is an error and does not reach the
// upstream.
func TestGatewayDrivesRealMCPSoftware(t *testing.T) {
	t.Parallel()
	p := requireNode(t)
	env := apptest.Start(t, apptest.Options{ExpiryEvery: 20 * time.Millisecond})
	ctx := env.Ctx()
	upstream := startEverything(t, p)
	tp := startTap(t, upstream)
	_, err := env.Admin.CreateMCPServer(ctx, client.MCPServer{
		Name: "everything", Transport: "http", URL: tp.URL, AllowPrivate: []string{"127.0.0.0/8"}})
	require.NoError(t, err)
	env.Agent("coder", gatewayPolicy)
	env.Agent("hasty", hastyPolicy)
	env.Agent("reader", map[string]any{"rules": []map[string]any{{"id": "env", "tool": "mcp.everything.get-env", "effect": "allow"}}})
	reviewer := env.Reviewer("rita")
	gateway := func(t *testing.T, name, agent string) *tsClient {
		return startClient(t, p, map[string]any{"transport": "http", "url": env.URL + "/mcp/" + name, "token": agentToken(t, env, agent)})
	}
	coder := gateway(t, "everything", "coder")
	coder.requireConnected()

	t.Run("tools/list unchanged", func(t *testing.T) {
		direct := startClient(t, p, map[string]any{"transport": "http", "url": upstream})
		direct.requireConnected()
		want := direct.listTools()
		assert.Subset(t, toolNames(want), []string{"echo", "get-sum", "get-env"})
		assert.Equal(t, want, coder.listTools())
	})

	t.Run("allowed echo", func(t *testing.T) {
		res := coder.call("echo", map[string]any{"message": "hello from the TypeScript SDK"})
		assert.False(t, res.IsError)
		assert.Equal(t, "Echo: hello from the TypeScript SDK", res.Text())
		assert.Equal(t, 1, tp.count("echo"))
		acts := actionsOf(t, ctx, reviewer, "mcp.everything.echo", "")
		require.Len(t, acts, 1)
		echo := env.Settled(reviewer, acts[0].ID) // the result may be reported just after the answer
		assert.Equal(t, "succeeded", echo.Status, "the upstream's result is the action's result")
		assert.Equal(t, map[string]any{"message": "hello from the TypeScript SDK"}, echo.Args)
		assert.Contains(t, string(echo.Result), "Echo: hello from the TypeScript SDK")
	})

	t.Run("injection in the result flagged", func(t *testing.T) {
		// server-everything's environment holds a prompt injection;
		// get-env, which reader may call, answers with it.
		reader := gateway(t, "everything", "reader")
		reader.requireConnected()
		res := reader.call("get-env", map[string]any{})
		assert.False(t, res.IsError, "flag: the model gets the result as it is")
		assert.Contains(t, res.Text(), injected)
		requireFlagged(t, env, reviewer, "reader", "mcp.everything.get-env")
	})

	t.Run("denied get-env", func(t *testing.T) {
		before := tp.count("get-env") // reader's call above
		res := coder.call("get-env", map[string]any{})
		assert.True(t, res.IsError)
		assert.Contains(t, res.Text(), "Airlock denied mcp.everything.get-env")
		assert.NotContains(t, res.Text(), injected)
		assert.Equal(t, before, tp.count("get-env"), "a denied call never reaches the upstream")
		var acts []client.Action
		for _, a := range actionsOf(t, ctx, reviewer, "mcp.everything.get-env", "") {
			if a.AgentID == "coder" {
				acts = append(acts, a)
			}
		}
		require.Len(t, acts, 1)
		assert.Equal(t, "denied", acts[0].Status)
		assert.Empty(t, string(acts[0].Result))
	})

	t.Run("pending get-sum approved", func(t *testing.T) {
		id := coder.sendCall("get-sum", map[string]any{"a": 2, "b": 3})
		a := pendingAction(t, ctx, reviewer, "mcp.everything.get-sum")
		assert.Zero(t, tp.count("get-sum"), "held while pending")
		_, err := reviewer.Approve(ctx, a.ID, a.ConfirmationPhrase, "")
		require.NoError(t, err)
		res := coder.waitTool(id)
		assert.False(t, res.IsError)
		assert.Equal(t, "The sum of 2 and 3 is 5.", res.Text())
		assert.Equal(t, 1, tp.count("get-sum"), "forwarded once, after the approval")
	})

	t.Run("pending get-sum denied", func(t *testing.T) {
		id := coder.sendCall("get-sum", map[string]any{"a": 20, "b": 22})
		a := pendingAction(t, ctx, reviewer, "mcp.everything.get-sum")
		_, err := reviewer.Deny(ctx, a.ID, "no sums after five")
		require.NoError(t, err)
		res := coder.waitTool(id)
		assert.True(t, res.IsError)
		assert.Contains(t, res.Text(), "no sums after five")
		assert.Equal(t, 1, tp.count("get-sum"), "a denied call never reaches the upstream")
	})

	t.Run("pending get-sum expires", func(t *testing.T) {
		hasty := gateway(t, "everything", "hasty")
		hasty.requireConnected()
		res := hasty.call("get-sum", map[string]any{"a": 4, "b": 5})
		assert.True(t, res.IsError)
		assert.Contains(t, res.Text(), "expired")
		assert.Equal(t, 1, tp.count("get-sum"), "an expired call never reaches the upstream")
		page, err := reviewer.ListActions(ctx, map[string][]string{"agent": {"hasty"}})
		require.NoError(t, err)
		require.Len(t, page.Actions, 1)
		assert.Equal(t, "expired", page.Actions[0].Status)
	})

	t.Run("unregistered server refused", func(t *testing.T) {
		c := gateway(t, "nope", "coder")
		assert.Equal(t, "connect_error", c.Connect.Event)
		require.NotNil(t, c.Connect.Error)
		assert.Contains(t, c.Connect.Error.Message, `"not_found"`)
		assert.Contains(t, c.Connect.Error.Message, `no MCP server \"nope\"`)
	})

	t.Run("loopback URLs refused at connect", func(t *testing.T) {
		// The tap's port under every spelling of the loopback, without
		// allow_private: the gateway refuses before it dials.
		port := tp.URL[len("http://127.0.0.1:"):strings.LastIndex(tp.URL, "/")]
		before := tp.connections()
		require.Positive(t, before, "the tap counts the connections it accepts")
		for i, host := range []string{"127.0.0.1", "127.1", "localhost", "[::ffff:127.0.0.1]", "0x7f000001"} {
			name := fmt.Sprintf("loop%d", i)
			_, err := env.Admin.CreateMCPServer(ctx, client.MCPServer{Name: name, Transport: "http", URL: "https://" + host + ":" + port + "/mcp"})
			require.NoError(t, err, host)
			c := gateway(t, name, "coder")
			require.Equal(t, "connect_error", c.Connect.Event, host)
			assert.Contains(t, c.Connect.Error.Message, "netguard: refused", host)
		}
		assert.Equal(t, before, tp.connections(), "no connection reached the upstream's address")
	})

	t.Run("Airlock stopped", func(t *testing.T) {
		// The stop ends the SDK's GET event stream that the gateway
		// relays from the upstream (else the shutdown would wait for it).
		env.Stop()
		waitRefused(t, env.URL)
		const unique = "sent after Airlock stopped 5c1e"
		r := coder.wait(coder.sendCall("echo", map[string]any{"message": unique}))
		t.Logf("after the stop: error %+v, result %s", r.Error, r.Result)
		if r.Error == nil {
			var res toolResult
			require.NoError(t, json.Unmarshal(r.Result, &res))
			assert.True(t, res.IsError, "%s", r.Result)
		}
		assert.False(t, tp.saw(unique), "the call never reached the upstream")
		assert.Equal(t, 1, tp.count("echo"))
	})
}
