package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apptest"
)

// methodsUpstream is a go-sdk MCP server with a tool, two resources (one
// holding a prompt injection) and a prompt, counting the resources/read
// and prompts/get requests that reach it (by the bytes it is sent, so
// that a request it would refuse is counted too).
type methodsUpstream struct {
	URL     string
	reads   atomic.Int32
	prompts atomic.Int32
}

func startMethodsUpstream(t *testing.T, jsonResponses bool) *methodsUpstream {
	t.Helper()
	u := &methodsUpstream{}
	srv := sdk.NewServer(&sdk.Implementation{Name: "upstream", Version: "1.0.0"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "echo"}, func(ctx context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "Echo: " + in.Message}}}, nil, nil
	})
	for uri, text := range map[string]string{"repo://up/readme": "The secret readme.", "repo://up/evil": injectedText} {
		srv.AddResource(&sdk.Resource{URI: uri, Name: uri, MIMEType: "text/plain"},
			func(ctx context.Context, r *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
				return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: text}}}, nil
			})
	}
	srv.AddPrompt(&sdk.Prompt{Name: "greet", Arguments: []*sdk.PromptArgument{{Name: "who"}}},
		func(ctx context.Context, r *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user",
				Content: &sdk.TextContent{Text: "Say hello to " + r.Params.Arguments["who"]}}}}, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{JSONResponse: jsonResponses})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if strings.Contains(string(body), `"resources/read"`) {
				u.reads.Add(1)
			}
			if strings.Contains(string(body), `"prompts/get"`) {
				u.prompts.Add(1)
			}
			r.Body = io.NopCloser(strings.NewReader(string(body)))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	u.URL = hs.URL
	return u
}

// TestMCPGatewayResourcesAndPrompts: resources/read and prompts/get are
// decided on as tools/call is, as the actions mcp.up.resources.read
// {uri} and mcp.up.prompts.get {name, arguments}. Before, they were
// relayed as is: an agent whose policy denies mcp.up.* (but a tool) read
// the server's resources with the gateway's credentials, and their text
// reached the model unscanned. Denied, the client gets a JSON-RPC error
// and the upstream never sees the request; allowed, it is forwarded and
// recorded; a resource holding a prompt injection is withheld under
// result_injection_action redact; a request held for a reviewer is
// forwarded once approved; inside a batch they are refused.
func TestMCPGatewayResourcesAndPrompts(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"sse", "json"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			env := apptest.Start(t)
			ctx := env.Ctx()
			up := startMethodsUpstream(t, mode == "json")
			admin := loginToken(t, env)
			resp, body := call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, map[string]any{
				"name": "up", "transport": "http", "url": up.URL, "allow_private": []string{"127.0.0.0/8"}})
			require.Equal(t, http.StatusCreated, resp.StatusCode, "%v", body)
			env.Agent("toolonly", map[string]any{"rules": []map[string]any{
				{"id": "echo", "tool": "mcp.up.echo", "effect": "allow"},
			}}) // the rest of mcp.up.* denied by default
			env.Agent("reader", map[string]any{"rules": []map[string]any{
				{"id": "reads", "tool": "mcp.up.resources.read", "effect": "allow"},
				{"id": "prompts", "tool": "mcp.up.prompts.get", "effect": "approve", "timeout": "15m"},
			}, "settings": map[string]any{"result_injection_action": "redact"}})
			reviewer := env.Reviewer("rita")

			denied, err := connectGateway(t, env, "up", agentTokenOf(t, env, "toolonly"))
			require.NoError(t, err)
			defer denied.Close()
			res, err := denied.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
			require.NoError(t, err)
			assert.False(t, res.IsError, "the allowed tool still runs")
			_, err = denied.ReadResource(ctx, &sdk.ReadResourceParams{URI: "repo://up/readme"})
			require.Error(t, err, "a denied resources/read is a JSON-RPC error")
			assert.Contains(t, err.Error(), "Airlock denied mcp.up.resources.read")
			assert.NotContains(t, err.Error(), "secret readme")
			_, err = denied.GetPrompt(ctx, &sdk.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "Ada"}})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "Airlock denied mcp.up.prompts.get")
			assert.Zero(t, up.reads.Load(), "a denied resources/read never reaches the upstream")
			assert.Zero(t, up.prompts.Load(), "a denied prompts/get never reaches the upstream")
			a := onlyAction(t, env, reviewer, "toolonly", "mcp.up.resources.read")
			assert.Equal(t, "denied", a.Status)
			assert.Equal(t, map[string]any{"uri": "repo://up/readme"}, a.Args)

			reader, err := connectGateway(t, env, "up", agentTokenOf(t, env, "reader"))
			require.NoError(t, err)
			defer reader.Close()
			rr, err := reader.ReadResource(ctx, &sdk.ReadResourceParams{URI: "repo://up/readme"})
			require.NoError(t, err)
			require.Len(t, rr.Contents, 1)
			assert.Equal(t, "The secret readme.", rr.Contents[0].Text)
			assert.EqualValues(t, 1, up.reads.Load())

			_, err = reader.ReadResource(ctx, &sdk.ReadResourceParams{URI: "repo://up/evil"})
			require.Error(t, err, "a resource holding a prompt injection is withheld under redact")
			assert.Contains(t, err.Error(), "looks like a prompt injection")
			assert.NotContains(t, err.Error(), "attacker@example.com")
			assert.EqualValues(t, 2, up.reads.Load(), "it was read; its text was withheld")

			page, err := reviewer.ListActions(ctx, url.Values{"agent": {"reader"}, "tool": {"mcp.up.resources.read"}})
			require.NoError(t, err)
			var readme, evil string
			for _, x := range page.Actions {
				{
					switch x.Args["uri"] {
					case "repo://up/readme":
						readme = x.ID
					case "repo://up/evil":
						evil = x.ID
					}
				}
			}
			require.NotEmpty(t, readme)
			require.NotEmpty(t, evil)
			got := env.Settled(reviewer, readme)
			assert.Equal(t, "succeeded", got.Status)
			assert.Equal(t, map[string]any{"uri": "repo://up/readme"}, got.Args)
			assert.Contains(t, string(got.Result), "The secret readme.", "the result is recorded")
			r := resultOf(t, env.Settled(reviewer, evil).Result)
			require.NotNil(t, r.Injection)
			assert.Equal(t, "redact", r.Injection.Action)

			// prompts/get held for a reviewer, forwarded once approved.
			type outcome struct {
				res *sdk.GetPromptResult
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := reader.GetPrompt(ctx, &sdk.GetPromptParams{Name: "greet", Arguments: map[string]string{"who": "Ada"}})
				done <- outcome{res, err}
			}()
			held := pendingAction(t, env, reviewer, "mcp.up.prompts.get")
			assert.Equal(t, map[string]any{"name": "greet", "arguments": map[string]any{"who": "Ada"}}, held.Args)
			assert.Zero(t, up.prompts.Load(), "held while pending")
			_, err = reviewer.Approve(ctx, held.ID, held.ConfirmationPhrase, "")
			require.NoError(t, err)
			o := <-done
			require.NoError(t, o.err)
			require.Len(t, o.res.Messages, 1)
			tc, ok := o.res.Messages[0].Content.(*sdk.TextContent)
			require.True(t, ok)
			assert.Equal(t, "Say hello to Ada", tc.Text)
			assert.EqualValues(t, 1, up.prompts.Load())

			// Inside a batch, or as a notification: refused, not relayed.
			token := agentTokenOf(t, env, "reader")
			resp, raw := rawMCP(t, env, "up", token, http.MethodPost,
				`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"repo://up/readme"}}]`)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, raw)
			assert.Contains(t, raw, "resources/read inside a batch")
			resp, raw = rawMCP(t, env, "up", token, http.MethodPost,
				`{"jsonrpc":"2.0","method":"prompts/get","params":{"name":"greet"}}`)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, raw)
			assert.EqualValues(t, 2, up.reads.Load())
			assert.EqualValues(t, 1, up.prompts.Load())
		})
	}
}
