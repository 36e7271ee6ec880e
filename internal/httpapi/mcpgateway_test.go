package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// upstream is a go-sdk MCP server on the loopback, counting the calls
// that reach each tool.
type upstream struct {
	URL   string
	calls map[string]*atomic.Int32
}

type echoIn struct {
	Message string `json:"message"`
}

type sumIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

func startUpstream(t *testing.T, jsonResponses bool) *upstream {
	t.Helper()
	u := &upstream{calls: map[string]*atomic.Int32{"echo": {}, "get-sum": {}, "delete-repo": {}}}
	srv := sdk.NewServer(&sdk.Implementation{Name: "upstream", Version: "1.0.0"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "Echoes a message."},
		func(ctx context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
			u.calls["echo"].Add(1)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "Echo: " + in.Message}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "get-sum", Description: "Adds two numbers."},
		func(ctx context.Context, _ *sdk.CallToolRequest, in sumIn) (*sdk.CallToolResult, any, error) {
			u.calls["get-sum"].Add(1)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("The sum of %d and %d is %d.", in.A, in.B, in.A+in.B)}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "delete-repo", Description: "Deletes a repository."},
		func(ctx context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
			u.calls["delete-repo"].Add(1)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "deleted"}}}, nil, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{JSONResponse: jsonResponses})
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	u.URL = hs.URL + "/mcp"
	return u
}

// bearerTransport adds an agent token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func connectGateway(t *testing.T, env *apptest.Env, name, token string) (*sdk.ClientSession, error) {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1.0.0"}, nil)
	return c.Connect(env.Ctx(), &sdk.StreamableClientTransport{Endpoint: env.URL + "/mcp/" + name,
		HTTPClient: &http.Client{Transport: bearerTransport{token}}, MaxRetries: -1}, nil)
}

var gatewayPolicy = map[string]any{"rules": []map[string]any{
	{"id": "echo", "tool": "mcp.up.echo", "effect": "allow"},
	{"id": "sums", "tool": "mcp.up.get-sum", "effect": "approve", "timeout": "15m"},
	{"id": "no-deletes", "tool": "mcp.up.delete-repo", "effect": "deny"},
}}

// rawMCP sends body ("" for none) to the gateway's /mcp/{name} as a
// Streamable HTTP client would, with token, and returns the response and
// its body, read.
func rawMCP(t *testing.T, env *apptest.Env, name, token, method, body string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(env.Ctx(), method, env.URL+"/mcp/"+name, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := env.HTTP.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(data)
}

func textOf(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	require.NotEmpty(t, res.Content)
	tc, ok := res.Content[0].(*sdk.TextContent)
	require.True(t, ok, "%T", res.Content[0])
	return tc.Text
}

// pendingAction waits (by the action's own long poll) for the one pending
// action of tool and returns it as the reviewer sees it.
func pendingAction(t *testing.T, env *apptest.Env, reviewer *client.Client, tool string) *client.Action {
	t.Helper()
	ctx := env.Ctx()
	for ctx.Err() == nil {
		page, err := reviewer.ListActions(ctx, url.Values{"status": {"pending"}, "tool": {tool}})
		require.NoError(t, err)
		if len(page.Actions) == 1 {
			a, err := reviewer.Get(ctx, page.Actions[0].ID)
			require.NoError(t, err)
			return a
		}
	}
	t.Fatal("no pending action")
	return nil
}

// TestMCPGateway: a go-sdk client talks to a go-sdk server through
// /mcp/{name}, for both of the server's response modes (event stream and
// JSON): tools/list is relayed unchanged; an allowed call returns the
// upstream's text and becomes a succeeded action with that result; a
// denied call returns isError with the policy's reason and never reaches
// the upstream; a pending call is held until a reviewer approves it (then
// forwarded) or denies it (isError, not forwarded).
func TestMCPGateway(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sse", "json"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			env := apptest.Start(t)
			ctx := env.Ctx()
			up := startUpstream(t, mode == "json")
			admin := loginToken(t, env)
			resp, body := call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, map[string]any{
				"name": "up", "transport": "http", "url": up.URL, "allow_private": []string{"127.0.0.0/8"}})
			require.Equal(t, http.StatusCreated, resp.StatusCode, "%v", body)
			agent := env.Agent("coder", gatewayPolicy)
			token := agentTokenOf(t, env, "coder")
			reviewer := env.Reviewer("rita")

			s, err := connectGateway(t, env, "up", token)
			require.NoError(t, err)
			defer s.Close()

			tools, err := s.ListTools(ctx, nil)
			require.NoError(t, err)
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
			}
			assert.ElementsMatch(t, []string{"echo", "get-sum", "delete-repo"}, names)

			res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello"}})
			require.NoError(t, err)
			assert.False(t, res.IsError)
			assert.Equal(t, "Echo: hello", textOf(t, res))
			assert.EqualValues(t, 1, up.calls["echo"].Load())
			page, err := reviewer.ListActions(ctx, url.Values{"tool": {"mcp.up.echo"}})
			require.NoError(t, err)
			require.Len(t, page.Actions, 1)
			echo := env.Settled(reviewer, page.Actions[0].ID)
			assert.Equal(t, "succeeded", echo.Status, "the upstream's result is the action's result")
			assert.Equal(t, map[string]any{"message": "hello"}, echo.Args)
			assert.Contains(t, string(echo.Result), "Echo: hello")

			res, err = s.CallTool(ctx, &sdk.CallToolParams{Name: "delete-repo", Arguments: map[string]any{"message": "airlock"}})
			require.NoError(t, err)
			assert.True(t, res.IsError)
			assert.Contains(t, textOf(t, res), "Airlock denied mcp.up.delete-repo")
			assert.Zero(t, up.calls["delete-repo"].Load(), "a denied call never reaches the upstream")

			type outcome struct {
				res *sdk.CallToolResult
				err error
			}
			for _, decide := range []string{"approve", "deny"} {
				done := make(chan outcome, 1)
				go func() {
					res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "get-sum", Arguments: map[string]any{"a": 2, "b": 3}})
					done <- outcome{res, err}
				}()
				a := pendingAction(t, env, reviewer, "mcp.up.get-sum")
				assert.Zero(t, up.calls["get-sum"].Load()-map[string]int32{"approve": 0, "deny": 1}[decide], "held while pending")
				if decide == "approve" {
					_, err = reviewer.Approve(ctx, a.ID, a.ConfirmationPhrase, "")
				} else {
					_, err = reviewer.Deny(ctx, a.ID, "not now")
				}
				require.NoError(t, err)
				o := <-done
				require.NoError(t, o.err)
				if decide == "approve" {
					assert.False(t, o.res.IsError)
					assert.Equal(t, "The sum of 2 and 3 is 5.", textOf(t, o.res))
				} else {
					assert.True(t, o.res.IsError)
					assert.Contains(t, textOf(t, o.res), "not now")
				}
				assert.EqualValues(t, 1, up.calls["get-sum"].Load(), "forwarded once, after the approval only")
			}
			_ = agent
		})
	}
}

// TestMCPGatewayRefuses: no token (401), a person's token (403), an
// unregistered name and a stdio registration (404), and registrations
// whose URL names the loopback in any spelling without allow_private
// covering it: the client gets an error, the upstream no request.
func TestMCPGatewayRefuses(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	up := startUpstream(t, true)
	admin := loginToken(t, env)
	env.Agent("coder", gatewayPolicy)
	token := agentTokenOf(t, env, "coder")

	resp, _ := call(t, env, http.MethodPost, "/mcp/up", "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"})
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = call(t, env, http.MethodPost, "/mcp/up", admin, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, body := call(t, env, http.MethodPost, "/mcp/nope", token, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"})
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, "not_found", errorCode(body))
	resp, _ = call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, map[string]any{"name": "local", "transport": "stdio", "command": "npx"})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	resp, _ = call(t, env, http.MethodPost, "/mcp/local", token, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"})
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "a stdio server is reached through the proxy only")
	_, err := connectGateway(t, env, "nope", token)
	assert.Error(t, err)

	port := up.URL[len("http://127.0.0.1:"):]
	for i, host := range []string{"127.0.0.1", "127.1", "0x7f000001", "2130706433", "[::ffff:127.0.0.1]"} {
		name := fmt.Sprintf("loop%d", i)
		resp, body := call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, map[string]any{
			"name": name, "transport": "http", "url": "https://" + host + ":" + port})
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%v", body)
		_, err := connectGateway(t, env, name, token)
		assert.Error(t, err, host)
	}
	for _, n := range up.calls {
		assert.Zero(t, n.Load())
	}
}

// countCalls wraps an MCP handler, counting the tools/call requests that
// reach it.
func countCalls(h http.Handler, n *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if strings.Contains(string(body), `"tools/call"`) {
				n.Add(1)
			}
			r.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		h.ServeHTTP(w, r)
	})
}

// TestMCPGatewayFailsClosed: a call Airlock cannot decide (a tool name
// Airlock refuses, arguments over the agent's limit) and a call that
// expires while pending are answered isError, and no tool call reaches
// the upstream.
func TestMCPGatewayFailsClosed(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{ExpiryEvery: 20 * time.Millisecond})
	ctx := env.Ctx()
	srv := sdk.NewServer(&sdk.Implementation{Name: "upstream", Version: "1.0.0"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "echo"}, func(ctx context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Message}}}, nil, nil
	})
	var calls atomic.Int32
	hs := httptest.NewServer(countCalls(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil), &calls))
	t.Cleanup(hs.Close)
	admin := loginToken(t, env)
	resp, _ := call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, map[string]any{
		"name": "up", "transport": "http", "url": hs.URL, "allow_private": []string{"127.0.0.0/8"}})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	env.Agent("coder", map[string]any{
		"rules": []map[string]any{
			{"id": "quick", "tool": "mcp.up.echo", "effect": "approve", "timeout": "1s"},
			{"id": "anything", "tool": "mcp.up.*", "effect": "allow"},
		},
		"settings": map[string]any{"max_args_bytes": 1024},
	})
	s, err := connectGateway(t, env, "up", agentTokenOf(t, env, "coder"))
	require.NoError(t, err)
	defer s.Close()

	for _, p := range []*sdk.CallToolParams{
		{Name: "rm/rf", Arguments: map[string]any{}},
		{Name: "big", Arguments: map[string]any{"blob": strings.Repeat("x", 2000)}},
	} {
		res, err := s.CallTool(ctx, p)
		require.NoError(t, err, p.Name)
		assert.True(t, res.IsError, p.Name)
		assert.Contains(t, textOf(t, res), "it was not run", p.Name)
	}
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, textOf(t, res), "expired")
	assert.Zero(t, calls.Load(), "no tool call reached the upstream")
}

// TestMCPGatewayHeaders: the agent's Airlock token never reaches the
// upstream; a headers_from_env header carries the gateway's environment
// variable's value.
func TestMCPGatewayHeaders(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	srv := sdk.NewServer(&sdk.Implementation{Name: "upstream", Version: "1.0.0"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "echo"}, func(ctx context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Message}}}, nil, nil
	})
	var mu sync.Mutex
	var auths, extra []string
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		extra = append(extra, r.Header.Get("X-Home"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	admin := loginToken(t, env)
	resp, _ := call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, map[string]any{
		"name": "up", "transport": "http", "url": hs.URL, "allow_private": []string{"127.0.0.0/8"},
		"headers_from_env": map[string]string{"X-Home": "HOME"}})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	env.Agent("coder", map[string]any{"rules": []map[string]any{{"id": "all", "tool": "mcp.up.*", "effect": "allow"}}})
	token := agentTokenOf(t, env, "coder")
	s, err := connectGateway(t, env, "up", token)
	require.NoError(t, err)
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	require.NoError(t, s.Close())

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, auths)
	require.NotEmpty(t, os.Getenv("HOME"), "the test reads HOME as the header's variable")
	for i := range auths {
		assert.Empty(t, auths[i], "the agent's token stays with Airlock")
		assert.Equal(t, os.Getenv("HOME"), extra[i])
	}
}

// TestMCPGatewayDoesNotRelayResumption: Last-Event-ID never reaches the
// upstream. Relayed, a client resuming a broken stream on the session's
// GET stream had the upstream replay a tool call's result there, which
// the gateway passes as is: the answer reached the model unchecked.
func TestMCPGatewayDoesNotRelayResumption(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	var mu sync.Mutex
	var seen []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Header.Get("Mcp-Session-Id")+" last="+r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		if r.Method == http.MethodPost { // the initialize that begins session s-1
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "s-1")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, ": fresh\n\n")
	}))
	t.Cleanup(hs.Close)
	admin := loginToken(t, env)
	resp, _ := call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, map[string]any{
		"name": "up", "transport": "http", "url": hs.URL, "allow_private": []string{"127.0.0.0/8"}})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	env.Agent("coder", gatewayPolicy)
	token := agentTokenOf(t, env, "coder")
	init, _ := rawMCP(t, env, "up", token, http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	require.Equal(t, http.StatusOK, init.StatusCode)
	req, err := http.NewRequestWithContext(env.Ctx(), http.MethodGet, env.URL+"/mcp/up", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", init.Header.Get("Mcp-Session-Id"))
	req.Header.Set("Last-Event-ID", "call-stream-7")
	got, err := env.HTTP.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(got.Body)
	got.Body.Close()
	require.Equal(t, http.StatusOK, got.StatusCode, "%s", body)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"POST  last=", "GET s-1 last="}, seen, "the session id passes, the resumption does not")
}

// TestMCPGatewayProgress: a held call whose client gave a progressToken
// hears notifications/progress while it waits (before any reviewer
// acts), then its answer on the same stream: the upstream's result after
// an approval, isError after a denial.
func TestMCPGatewayProgress(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sse", "json"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			env := apptest.Start(t)
			ctx := env.Ctx()
			up := startUpstream(t, mode == "json")
			admin := loginToken(t, env)
			resp, _ := call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, map[string]any{
				"name": "up", "transport": "http", "url": up.URL, "allow_private": []string{"127.0.0.0/8"}})
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			env.Agent("coder", gatewayPolicy)
			reviewer := env.Reviewer("rita")
			progress := make(chan *sdk.ProgressNotificationParams, 16)
			c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1.0.0"}, &sdk.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
					progress <- req.Params
				}})
			s, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: env.URL + "/mcp/up",
				HTTPClient: &http.Client{Transport: bearerTransport{agentTokenOf(t, env, "coder")}}, MaxRetries: -1}, nil)
			require.NoError(t, err)
			defer s.Close()

			for i, decide := range []string{"approve", "deny"} {
				done := make(chan *sdk.CallToolResult, 1)
				go func() {
					p := &sdk.CallToolParams{Name: "get-sum", Arguments: map[string]any{"a": 20, "b": 22}}
					p.SetProgressToken(fmt.Sprintf("tok-%d", i))
					res, err := s.CallTool(ctx, p)
					assert.NoError(t, err)
					done <- res
				}()
				note := <-progress
				assert.Equal(t, fmt.Sprintf("tok-%d", i), note.ProgressToken)
				assert.Contains(t, note.Message, "waiting for a reviewer")
				a := pendingAction(t, env, reviewer, "mcp.up.get-sum")
				assert.Contains(t, note.Message, a.ID)
				if decide == "approve" {
					_, err = reviewer.Approve(ctx, a.ID, a.ConfirmationPhrase, "")
				} else {
					_, err = reviewer.Deny(ctx, a.ID, "no sums today")
				}
				require.NoError(t, err)
				res := <-done
				require.NotNil(t, res)
				if decide == "approve" {
					assert.False(t, res.IsError)
					assert.Equal(t, "The sum of 20 and 22 is 42.", textOf(t, res))
				} else {
					assert.True(t, res.IsError)
					assert.Contains(t, textOf(t, res), "no sums today")
				}
				assert.EqualValues(t, 1, up.calls["get-sum"].Load())
			}

			// A client that gives up on a held call: its action is withdrawn.
			callCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				p := &sdk.CallToolParams{Name: "get-sum", Arguments: map[string]any{"a": 1, "b": 1}}
				p.SetProgressToken("tok-gone")
				_, err := s.CallTool(callCtx, p)
				done <- err
			}()
			<-progress
			a := pendingAction(t, env, reviewer, "mcp.up.get-sum")
			cancel()
			require.Error(t, <-done)
			got, err := reviewer.Wait(ctx, a.ID)
			require.NoError(t, err)
			assert.Equal(t, "cancelled", got.Status, "nobody waits for it: no reviewer may approve it")
			assert.EqualValues(t, 1, up.calls["get-sum"].Load())
		})
	}
}

// TestMCPGatewayRefusesAmbiguousCalls: a tool call the gate and the
// upstream could read differently (a key twice, in another case or under
// Go's Unicode folding; a lone surrogate) or sent as a notification, and a batch holding a tool call, are refused (400)
// and never reach the upstream.
func TestMCPGatewayRefusesAmbiguousCalls(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	srv := sdk.NewServer(&sdk.Implementation{Name: "upstream", Version: "1.0.0"}, nil)
	var calls atomic.Int32
	hs := httptest.NewServer(countCalls(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil), &calls))
	t.Cleanup(hs.Close)
	admin := loginToken(t, env)
	resp, _ := call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, map[string]any{
		"name": "up", "transport": "http", "url": hs.URL, "allow_private": []string{"127.0.0.0/8"}})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	env.Agent("coder", gatewayPolicy)
	token := agentTokenOf(t, env, "coder")
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete-repo","Name":"echo"}}`,
		`{"jsonrpc":"2.0","id":1,"Method":"ping","method":"tools/call","params":{"name":"delete-repo"}}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"delete-repo"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete-repo"}}]`,
		// Go's decoder folds "ſ" (U+017F) to "s": it would gate the
		// search and the upstream (the TypeScript or Python SDK) run the
		// delete.
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete-repo","arguments":{}},"paramſ":{"name":"echo","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"s":"\udc00"}}}`,
	} {
		resp, data := rawMCP(t, env, "up", token, http.MethodPost, body)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
		assert.Contains(t, data, `"error"`, body)
	}
	assert.Zero(t, calls.Load())
	page, err := env.Reviewer("rita").ListActions(env.Ctx(), url.Values{})
	require.NoError(t, err)
	assert.Empty(t, page.Actions, "nothing was submitted either")
}

// sessionMCP is rawMCP's POST of body within MCP session sid.
func sessionMCP(t *testing.T, env *apptest.Env, token, sid, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(env.Ctx(), http.MethodPost, env.URL+"/mcp/up", strings.NewReader(body))
	if err != nil {
		return nil, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := env.HTTP.Do(req)
	if err != nil {
		return nil, err.Error()
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp, err.Error()
	}
	return resp, string(data)
}

// holdSum sends get-sum's tools/call with id on session sid of env's
// gateway, in the background: its answer comes on the channel.
func holdSum(t *testing.T, env *apptest.Env, token, sid string, id int) <-chan string {
	done := make(chan string, 1)
	go func() {
		_, body := sessionMCP(t, env, token, sid, fmt.Sprintf(
			`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"get-sum","arguments":{"a":2,"b":3}}}`, id))
		done <- body
	}()
	return done
}

// answerOf waits for the answer of a call holdSum sent.
func answerOf(t *testing.T, ctx context.Context, done <-chan string) string {
	t.Helper()
	return awaitDone(t, ctx, done, "the held call was never answered")
}

// cancelCall sends notifications/cancelled for request id (JSON) on
// session sid of env's gateway.
func cancelCall(t *testing.T, env *apptest.Env, token, sid, id string) {
	_, _ = sessionMCP(t, env, token, sid,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+id+`,"reason":"timed out"}}`)
}

// TestMCPGatewayCancelled: a held call whose client sends
// notifications/cancelled for it (as the TypeScript SDK does on a
// timeout, as a new POST, its call's POST left open) is withdrawn: the
// pending action is cancelled, the call answered and never forwarded, so
// no reviewer approves a call the client gave up on (and may make
// again). The cancellation counts only from the call's own agent and
// session: another session's or another agent's leaves it held.
func TestMCPGatewayCancelled(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	up := startUpstream(t, true)
	token, otherToken := twoAgentsOn(t, env, up.URL)
	reviewer := env.Reviewer("rita")
	s, err := connectGateway(t, env, "up", token)
	require.NoError(t, err)
	defer s.Close()
	sid := s.ID()
	require.NotEmpty(t, sid)

	held := func(id int) <-chan string { return holdSum(t, env, token, sid, id) }
	answer := func(done <-chan string) string { return answerOf(t, ctx, done) }
	cancel := func(token, sid, id string) { cancelCall(t, env, token, sid, id) }

	done := held(7)
	a := pendingAction(t, env, reviewer, "mcp.up.get-sum")
	cancel(token, sid+"-other", "7")
	cancel(otherToken, sid, "7")
	_, err = reviewer.Approve(ctx, a.ID, a.ConfirmationPhrase, "")
	require.NoError(t, err, "another session's or agent's cancellation leaves the call held")
	assert.Contains(t, answer(done), "The sum of 2 and 3 is 5.")
	assert.EqualValues(t, 1, up.calls["get-sum"].Load())

	done = held(9)
	a = pendingAction(t, env, reviewer, "mcp.up.get-sum")
	cancel(token, sid, `"9"`) // the id as clients compare ids: "9" is 9
	body := answer(done)
	assert.Contains(t, body, `"isError":true`)
	assert.Contains(t, body, "cancelled by the client; it was not run")
	got, err := reviewer.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, "cancelled", got.Status, "withdrawn: no reviewer may approve it")
	_, err = reviewer.Approve(ctx, a.ID, a.ConfirmationPhrase, "")
	assert.Error(t, err)
	assert.EqualValues(t, 1, up.calls["get-sum"].Load(), "the cancelled call never reached the upstream")
}

// TestMCPGatewayCancelledOnAnotherInstance: behind a load balancer a
// client's POSTs reach any instance, so its notifications/cancelled may
// reach another one than the instance holding its call. That call is
// withdrawn all the same, and still only by the call's own agent and
// session. Before, the other instance relayed the notification and
// withdrew nothing: the call stayed held, a reviewer could approve it,
// and it ran after its client had given up on it.
func TestMCPGatewayCancelledOnAnotherInstance(t *testing.T) {
	t.Parallel()
	one := apptest.Start(t)
	two := apptest.Start(t, apptest.Options{DatabaseURL: one.DBURL, DataDir: one.Config.DataDir})
	ctx := one.Ctx()
	up := startUpstream(t, true)
	token, otherToken := twoAgentsOn(t, one, up.URL)
	reviewer := one.Reviewer("rita")
	session := func(token string) string {
		s, err := connectGateway(t, one, "up", token)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		require.NotEmpty(t, s.ID())
		return s.ID()
	}
	sid, secondSid, otherSid := session(token), session(token), session(otherToken)
	held := func(token, sid string, id int) <-chan string { return holdSum(t, one, token, sid, id) }
	answer := func(done <-chan string) string { return answerOf(t, ctx, done) }
	cancelOnTwo := func(token, sid, id string) { cancelCall(t, two, token, sid, id) }

	done := held(token, sid, 5)
	a := pendingAction(t, one, reviewer, "mcp.up.get-sum")
	cancelOnTwo(token, sid, "5")
	body := answer(done)
	assert.Contains(t, body, "cancelled by the client; it was not run")
	got, err := reviewer.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, "cancelled", got.Status, "withdrawn: no reviewer may approve it")

	// The agent's other session's and another agent's cancellations,
	// through the other instance, leave the call held. The other agent's
	// own call, cancelled after them, is answered once they have all been
	// heard (one instance's notifications arrive in order).
	done = held(token, sid, 7)
	a = pendingAction(t, one, reviewer, "mcp.up.get-sum")
	otherDone := held(otherToken, otherSid, 7)
	cancelOnTwo(otherToken, sid, "7")
	cancelOnTwo(token, secondSid, "7")
	for {
		page, err := reviewer.ListActions(ctx, url.Values{"status": {"pending"}, "tool": {"mcp.up.get-sum"}})
		require.NoError(t, err)
		if len(page.Actions) == 2 {
			break
		}
	}
	cancelOnTwo(otherToken, otherSid, "7")
	assert.Contains(t, answer(otherDone), "cancelled by the client; it was not run")
	_, err = reviewer.Approve(ctx, a.ID, a.ConfirmationPhrase, "")
	require.NoError(t, err, "the others' cancellations leave the call held")
	assert.Contains(t, answer(done), "The sum of 2 and 3 is 5.")
	assert.EqualValues(t, 1, up.calls["get-sum"].Load(), "only the approved call reached the upstream")
}

// TestMCPGatewaySessionsBelongToTheirAgent: the session id a client gets
// is the upstream's sealed to the agent that began the session. The
// upstream sees its own id; the agent's requests on the session are
// relayed; another agent holding the id (read from a conversation_id, a
// log), a forged seal and the bare upstream id are answered 404 as an
// unknown session, on POST, GET and DELETE, and never reach the upstream.
// Before, any agent token could send on, read the server's stream of, or
// end another agent's session.
func TestMCPGatewaySessionsBelongToTheirAgent(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	srv := sdk.NewServer(&sdk.Implementation{Name: "upstream", Version: "1.0.0"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "echo"}, func(ctx context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Message}}}, nil, nil
	})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	var mu sync.Mutex
	upstreamIDs := map[string]int{} // session ids the upstream was sent, with how many requests
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
			mu.Lock()
			upstreamIDs[sid]++
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	token, otherToken := twoAgentsOn(t, env, hs.URL)

	s, err := connectGateway(t, env, "up", token)
	require.NoError(t, err)
	defer s.Close()
	res, err := s.CallTool(env.Ctx(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "the agent's own session works")

	sealed := s.ID()
	mu.Lock()
	require.Len(t, upstreamIDs, 1)
	var upstreamID string
	for id := range upstreamIDs {
		upstreamID = id
	}
	before := upstreamIDs[upstreamID]
	mu.Unlock()
	require.NotEqual(t, upstreamID, sealed, "the client holds the sealed id")
	require.True(t, strings.HasPrefix(sealed, upstreamID+"_"), "%q seals %q", sealed, upstreamID)

	forged := sealed[:len(sealed)-1] + map[bool]string{true: "B", false: "A"}[strings.HasSuffix(sealed, "A")]
	// The same seal spelled otherwise: a 32-byte MAC leaves the last
	// base64 character's two low bits unused (always zero when sealed).
	const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(b64, sealed[len(sealed)-1])
	require.Zero(t, last&3, "a sealed MAC's last character carries no low bits")
	respelled := sealed[:len(sealed)-1] + string(b64[last|1])
	ping := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"message":"x"}}}`
	for _, tc := range []struct{ name, token, sid string }{
		{"another agent", otherToken, sealed},
		{"a forged seal", token, forged},
		{"a re-spelled seal", token, respelled},
		{"the bare upstream id", token, upstreamID},
		{"another agent, bare id", otherToken, upstreamID},
	} {
		for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			body := ""
			if method == http.MethodPost {
				body = ping
			}
			req, err := http.NewRequestWithContext(env.Ctx(), method, env.URL+"/mcp/up", strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+tc.token)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", tc.sid)
			got, err := env.HTTP.Do(req)
			require.NoError(t, err)
			data, _ := io.ReadAll(got.Body)
			got.Body.Close()
			assert.Equal(t, http.StatusNotFound, got.StatusCode, "%s %s: %s", tc.name, method, data)
			assert.Contains(t, string(data), "session not found", "%s %s", tc.name, method)
		}
	}
	mu.Lock()
	assert.Equal(t, before, upstreamIDs[upstreamID], "no refused request reached the upstream")
	mu.Unlock()
	page, err := env.Reviewer("rita").ListActions(env.Ctx(), url.Values{"agent": {"other"}})
	require.NoError(t, err)
	assert.Empty(t, page.Actions, "nothing was submitted for the other agent")
}

// twoAgentsOn registers the upstream at upstreamURL as "up" and returns
// the tokens of two agents under gatewayPolicy, "coder" and "other".
func twoAgentsOn(t *testing.T, env *apptest.Env, upstreamURL string) (string, string) {
	t.Helper()
	resp, _ := call(t, env, http.MethodPost, "/api/v1/mcp/servers", loginToken(t, env), map[string]any{
		"name": "up", "transport": "http", "url": upstreamURL, "allow_private": []string{"127.0.0.0/8"}})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	env.Agent("coder", gatewayPolicy)
	env.Agent("other", gatewayPolicy)
	return agentTokenOf(t, env, "coder"), agentTokenOf(t, env, "other")
}
