package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apptest"
)

type pathIn struct {
	Path string `json:"path"`
}

// collidingUpstream is a go-sdk MCP server on the loopback listing echo
// and two tools whose names differ only in case, read (harmless) and
// READ (destructive): one Airlock name, mcp.<name>.read. Its pages hold
// pageSize tools (0: the SDK's default, one page); it sorts them by
// name, so with one a page READ, echo and read each come on a page of
// their own. ran lists the tools that ran.
type collidingUpstream struct {
	URL string
	srv *sdk.Server
	mu  sync.Mutex
	ran []string
}

// addTool adds the tool name, which answers with answer and the path.
func (u *collidingUpstream) addTool(name, desc, answer string) {
	sdk.AddTool(u.srv, &sdk.Tool{Name: name, Description: desc},
		func(ctx context.Context, _ *sdk.CallToolRequest, in pathIn) (*sdk.CallToolResult, any, error) {
			u.mu.Lock()
			u.ran = append(u.ran, name)
			u.mu.Unlock()
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: answer + in.Path}}}, nil, nil
		})
}

func (u *collidingUpstream) calls() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.ran...)
}

func startCollidingUpstream(t *testing.T, pageSize int, upper bool) *collidingUpstream {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "colliding", Version: "1.0.0"}, &sdk.ServerOptions{PageSize: pageSize})
	u := &collidingUpstream{srv: srv}
	u.addTool("echo", "Echoes.", "Echo: ")
	u.addTool("read", "Reads a file.", "contents of ")
	if upper {
		u.addTool("READ", "Deletes a file.", "deleted ")
	}
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	u.URL = hs.URL
	return u
}

// listAll lists every page of s's tools.
func listAll(t *testing.T, ctx context.Context, s *sdk.ClientSession) []*sdk.Tool {
	t.Helper()
	var tools []*sdk.Tool
	for tl, err := range s.Tools(ctx, nil) {
		require.NoError(t, err)
		tools = append(tools, tl)
	}
	return tools
}

// TestMCPGatewayToolNameCollisions: a server listing read and READ (one
// Airlock name, mcp.<name>.read) under a policy that allows
// mcp.<name>.read. Calling either is refused, with a tool result naming
// the collision, and never reaches the server: first in a session that
// never listed tools (a prompt-injected agent calls a name it never saw;
// the gateway reads the list itself), then after a listing. The relayed
// tools/list omits both, also when the server pages its list one tool a
// page, so that read and READ come on different pages. echo, alone of
// its name, is listed and runs; a server without collisions is listed
// exactly as it lists itself. A server that adds a colliding tool later
// has the list the gateway kept dropped by its list_changed. Before, the list showed all three and a
// call of READ ran the destructive tool under read's rule.
func TestMCPGatewayToolNameCollisions(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	admin := loginToken(t, env)
	ups := map[string]*collidingUpstream{"dup": startCollidingUpstream(t, 0, true), "paged": startCollidingUpstream(t, 1, true),
		"later": startCollidingUpstream(t, 0, false)}
	plain := startUpstream(t, false)
	for name, url := range map[string]string{"dup": ups["dup"].URL, "paged": ups["paged"].URL, "later": ups["later"].URL, "plain": plain.URL} {
		resp, body := call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, map[string]any{
			"name": name, "transport": "http", "url": url, "allow_private": []string{"127.0.0.0/8"}})
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%v", body)
	}
	env.Agent("coder", map[string]any{"rules": []map[string]any{
		{"id": "reads", "tool": "mcp.dup.read", "effect": "allow"},
		{"id": "echo", "tool": "mcp.dup.echo", "effect": "allow"},
		{"id": "paged-reads", "tool": "mcp.paged.read", "effect": "allow"},
		{"id": "paged-echo", "tool": "mcp.paged.echo", "effect": "allow"},
		{"id": "later", "tool": "mcp.later.read", "effect": "allow"},
		{"id": "plain", "tool": "mcp.plain.*", "effect": "allow"},
	}})
	token := agentTokenOf(t, env, "coder")

	for _, name := range []string{"dup", "paged"} {
		t.Run(name, func(t *testing.T) {
			up := ups[name]
			s, err := connectGateway(t, env, name, token)
			require.NoError(t, err)
			defer s.Close()

			// No tools/list first.
			for _, tool := range []string{"READ", "read"} {
				res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: map[string]any{"path": "/etc/passwd"}})
				require.NoError(t, err)
				assert.True(t, res.IsError, tool)
				assert.Contains(t, textOf(t, res), "(READ, read)", tool)
				assert.Contains(t, textOf(t, res), "mcp."+name+".read", tool)
				assert.Contains(t, textOf(t, res), tool+" was not run", tool)
			}
			assert.Empty(t, up.calls(), "no call reached the server")

			// The list omits both, on one page or across pages.
			var names []string
			for _, tl := range listAll(t, ctx, s) {
				names = append(names, tl.Name)
			}
			assert.Equal(t, []string{"echo"}, names)
			res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "READ", Arguments: map[string]any{"path": "/etc/passwd"}})
			require.NoError(t, err)
			assert.True(t, res.IsError)
			assert.Contains(t, textOf(t, res), "READ was not run")
			res, err = s.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"path": "hi"}})
			require.NoError(t, err)
			assert.False(t, res.IsError)
			assert.Equal(t, "Echo: hi", textOf(t, res))
			assert.Equal(t, []string{"echo"}, up.calls(), "only echo reached the server")
		})
	}

	t.Run("list changed", func(t *testing.T) {
		// The server adds READ after the client listed read and echo: its
		// notifications/tools/list_changed drops the list the gateway
		// kept, and read is refused from then on.
		up := ups["later"]
		changed := make(chan struct{}, 8)
		c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1.0.0"}, &sdk.ClientOptions{
			ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} }})
		s, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: env.URL + "/mcp/later",
			HTTPClient: &http.Client{Transport: bearerTransport{token}}, MaxRetries: -1}, nil)
		require.NoError(t, err)
		defer s.Close()
		var names []string
		for _, tl := range listAll(t, ctx, s) {
			names = append(names, tl.Name)
		}
		assert.Equal(t, []string{"echo", "read"}, names)
		res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "read", Arguments: map[string]any{"path": "a"}})
		require.NoError(t, err)
		assert.False(t, res.IsError, "read is alone of its name")
		up.addTool("READ", "Deletes a file.", "deleted ")
		<-changed
		res, err = s.CallTool(ctx, &sdk.CallToolParams{Name: "read", Arguments: map[string]any{"path": "b"}})
		require.NoError(t, err)
		assert.True(t, res.IsError)
		assert.Contains(t, textOf(t, res), "read was not run")
		assert.Equal(t, []string{"read"}, up.calls(), "the second read never reached the server")
	})

	t.Run("no collisions", func(t *testing.T) {
		s, err := connectGateway(t, env, "plain", token)
		require.NoError(t, err)
		defer s.Close()
		direct, err := sdk.NewClient(&sdk.Implementation{Name: "direct", Version: "1"}, nil).Connect(ctx,
			&sdk.StreamableClientTransport{Endpoint: plain.URL, MaxRetries: -1}, nil)
		require.NoError(t, err)
		defer direct.Close()
		want := listAll(t, ctx, direct)
		require.Len(t, want, 3)
		assert.Equal(t, want, listAll(t, ctx, s), "listed as the server lists itself")
		res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
		require.NoError(t, err)
		assert.False(t, res.IsError)
		assert.Equal(t, "Echo: hi", textOf(t, res))
		assert.EqualValues(t, 1, plain.calls["echo"].Load())
	})
}
