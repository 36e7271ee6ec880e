package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// permissionSession starts `airlock mcp permission-server` as Claude Code
// does, as a stdio MCP server, and connects the official Go SDK's client.
// stop closes the session, sees the server exit 0 and returns its stderr.
func permissionSession(t *testing.T, r *runner, args ...string) (cs *mcp.ClientSession, stop func() string) {
	t.Helper()
	cmd := r.command("", append([]string{"mcp", "permission-server"}, args...)...)
	cmd.Stdin = nil // the transport's pipe
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "claude-code-test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	var closed bool
	stop = func() string {
		t.Helper()
		if !closed {
			closed = true
			require.NoError(t, cs.Close(), "the server exits 0 when its stdin closes")
		}
		return stderr.String()
	}
	t.Cleanup(func() { stop() })
	return cs, stop
}

// approve calls the approve tool and decodes the answer Claude Code reads.
func approve(t *testing.T, ctx context.Context, cs *mcp.ClientSession, args map[string]any) (answer map[string]any) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "approve", Arguments: args})
	require.NoError(t, err)
	require.False(t, res.IsError, "a decision is a result Claude Code reads, not a tool error")
	require.Len(t, res.Content, 1)
	text, ok := res.Content[0].(*mcp.TextContent)
	require.True(t, ok, "%T", res.Content[0])
	dec := json.NewDecoder(strings.NewReader(text.Text))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&answer), text.Text)
	return answer
}

// TestPermissionServer drives the permission-prompt server with the Go
// SDK's client against a real server: allow (the input unchanged), deny,
// pending then approved over REST, and fail closed.
func TestPermissionServer(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("coder", hookPolicy)
	reviewer := env.Reviewer("rita")
	r := newRunner(t, env.URL, agent.Token())
	cs, stop := permissionSession(t, r, "--conversation", "conv-1")
	ctx := t.Context()

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	require.Len(t, tools.Tools, 1)
	assert.Equal(t, "approve", tools.Tools[0].Name)
	schema, err := json.Marshal(tools.Tools[0].InputSchema)
	require.NoError(t, err)
	assert.Contains(t, string(schema), `"required":["tool_name","input"]`)

	t.Run("allowed: the input unchanged", func(t *testing.T) {
		input := map[string]any{"file_path": "/home/dev/repo/go.mod", "limit": json.Number("10000000000000001"), "nested": map[string]any{"a": []any{"x", true}}}
		got := approve(t, ctx, cs, map[string]any{"tool_name": "Read", "input": input, "tool_use_id": "toolu_p1"})
		assert.Equal(t, map[string]any{"behavior": "allow", "updatedInput": input}, got)
		a := findAction(t, reviewer, "coder", "claude-code.read", "conv-1")
		assert.Equal(t, "toolu_p1", a.StepID)
		assert.Equal(t, input, a.Args, "args = input, numbers exact")
	})
	t.Run("an MCP tool's name keeps its underscores", func(t *testing.T) {
		got := approve(t, ctx, cs, map[string]any{"tool_name": "mcp__github__create_issue", "input": map[string]any{"title": "t"}})
		assert.Equal(t, "allow", got["behavior"])
		findAction(t, reviewer, "coder", "claude-code.mcp__github__create_issue", "conv-1")
	})
	t.Run("denied by policy", func(t *testing.T) {
		got := approve(t, ctx, cs, map[string]any{"tool_name": "Bash", "input": map[string]any{"command": "rm -rf /"}, "tool_use_id": "toolu_p2"})
		assert.Equal(t, "deny", got["behavior"])
		assert.Contains(t, got["message"], "airlock: denied by ")
		assert.NotContains(t, got, "updatedInput")
	})
	t.Run("pending, approved over REST", func(t *testing.T) {
		input := map[string]any{"file_path": "/home/dev/repo/main.go", "old_string": "a", "new_string": "b"}
		done := make(chan map[string]any, 1)
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "approve", Arguments: map[string]any{"tool_name": "Edit", "input": input, "tool_use_id": "toolu_p3"}})
			if err != nil || len(res.Content) != 1 {
				done <- map[string]any{"error": err}
				return
			}
			var answer map[string]any
			_ = json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &answer)
			done <- answer
		}()
		pending := waitPending(t, reviewer, "claude-code.edit", "conv-1")
		assert.Equal(t, "toolu_p3", pending.StepID)
		_, err := reviewer.Approve(ctx, pending.ID, pending.ConfirmationPhrase, "")
		require.NoError(t, err)
		got := <-done
		assert.Equal(t, map[string]any{"behavior": "allow", "updatedInput": input}, got)
	})
	t.Run("a call the client gives up on: its pending action cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "approve", Arguments: map[string]any{"tool_name": "Edit", "input": map[string]any{"file_path": "/z"}, "tool_use_id": "toolu_p4"}})
			done <- err
		}()
		pending := waitPending(t, reviewer, "claude-code.edit", "conv-1")
		require.Equal(t, "toolu_p4", pending.StepID)
		cancel() // the go-sdk client sends notifications/cancelled
		require.Error(t, <-done)
		for deadline := time.Now().Add(60 * time.Second); ; {
			a, err := reviewer.Get(ctx, pending.ID)
			require.NoError(t, err)
			if a.Status != "pending" {
				assert.Equal(t, "cancelled", a.Status, "nobody waits for it: no reviewer may approve it")
				break
			}
			require.True(t, time.Now().Before(deadline), "the abandoned action stayed pending")
			time.Sleep(20 * time.Millisecond)
		}
		// The session still answers.
		got := approve(t, ctx, cs, map[string]any{"tool_name": "Read", "input": map[string]any{"file_path": "/a"}})
		assert.Equal(t, "allow", got["behavior"])
	})
	t.Run("bad input: denied, failing closed", func(t *testing.T) {
		got := approve(t, ctx, cs, map[string]any{"tool_name": "", "input": map[string]any{}})
		assert.Equal(t, "deny", got["behavior"])
		assert.Contains(t, got["message"], "tool_name is empty")
		assert.Contains(t, got["message"], "(failing closed)")
		got = approve(t, ctx, cs, map[string]any{"tool_name": "Read", "input": "/etc/passwd"})
		assert.Equal(t, "deny", got["behavior"])
		assert.Contains(t, got["message"], "not a JSON object")
	})
	assert.Contains(t, stop(), "airlock: error: tool_name is empty", "failures are logged on stderr")
}

// TestPermissionServerFailsClosed: with Airlock unreachable, or the token
// revoked, or too slow a reviewer, every call is denied with the reason.
func TestPermissionServerFailsClosed(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("coder", hookPolicy)
	reviewer := env.Reviewer("rita")
	revoked, err := env.Admin.IssueAgentToken(env.Ctx(), "coder", 0)
	require.NoError(t, err)
	require.NoError(t, env.Admin.RevokeToken(env.Ctx(), revoked.TokenID))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := "http://" + l.Addr().String()
	require.NoError(t, l.Close())

	read := map[string]any{"tool_name": "Read", "input": map[string]any{"file_path": "/x"}}
	for _, tc := range []struct {
		name, url, token, reason string
	}{
		{"Airlock unreachable", down, agent.Token(), "airlock: unreachable: "},
		{"a revoked token", env.URL, revoked.Token, "airlock: unauthorized: "},
		{"no token", env.URL, "", "airlock: unauthorized: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, stop := permissionSession(t, newRunner(t, tc.url, tc.token))
			got := approve(t, t.Context(), cs, read)
			assert.Equal(t, "deny", got["behavior"])
			assert.Contains(t, got["message"], tc.reason)
			assert.Contains(t, got["message"], "(failing closed)")
			assert.NotContains(t, got, "updatedInput")
			assert.Contains(t, stop(), tc.reason)
		})
	}

	t.Run("no decision in time: denied, the pending action cancelled", func(t *testing.T) {
		cs, _ := permissionSession(t, newRunner(t, env.URL, agent.Token()), "--timeout", "1s", "--conversation", "conv-t")
		got := approve(t, t.Context(), cs, map[string]any{"tool_name": "Edit", "input": map[string]any{"file_path": "/y"}})
		assert.Equal(t, "deny", got["behavior"])
		assert.Contains(t, got["message"], "airlock: timeout: ")
		a := findAction(t, reviewer, "coder", "claude-code.edit", "conv-t")
		assert.Equal(t, "cancelled", a.Status)
	})
}

// waitPending waits until an action of tool in conversation is pending.
func waitPending(t *testing.T, reviewer *client.Client, tool, conversation string) *client.Action {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; {
		require.True(t, time.Now().Before(deadline), "no pending %s showed up", tool)
		page, err := reviewer.ListActions(t.Context(), url.Values{"status": {"pending"}})
		require.NoError(t, err)
		for _, a := range page.Actions {
			if a.Tool == tool && a.ConversationID == conversation {
				return &a
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}
