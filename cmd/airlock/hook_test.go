package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// hookPolicy is the hook agent's policy: one rule per outcome.
var hookPolicy = map[string]any{"rules": []map[string]any{
	{"id": "read", "tool": "claude-code.read", "effect": "allow"},
	{"id": "mcp", "tool": "claude-code.mcp__github__create_issue", "effect": "allow"},
	{"id": "no-bash", "tool": "claude-code.bash", "effect": "deny"},
	{"id": "review-edit", "tool": "claude-code.edit", "effect": "approve"},
	{"id": "quick-write", "tool": "claude-code.write", "effect": "approve", "timeout": "1s"},
	{"id": "codex-shell", "tool": "codex.shell", "effect": "allow"},
	{"id": "codex-bash", "tool": "codex.bash", "effect": "allow"},
	{"id": "codex-patch", "tool": "codex.apply_patch", "effect": "deny"},
	{"id": "codex-review", "tool": "codex.exec_command", "effect": "approve"},
}}

// claudeInput is Claude Code's hook input for event.
func claudeInput(event, tool string, input any, toolUseID string) string {
	b, _ := json.Marshal(map[string]any{
		"session_id": "sess-1", "transcript_path": "/home/dev/.claude/projects/x/sess-1.jsonl", "cwd": "/home/dev/repo",
		"permission_mode": "default", "hook_event_name": event, "tool_name": tool, "tool_input": input, "tool_use_id": toolUseID,
	})
	return string(b)
}

// codexInput is Codex's PermissionRequest hook input.
func codexInput(tool, command string) string {
	b, _ := json.Marshal(map[string]any{
		"session_id": "codex-sess", "turn_id": "turn-7", "cwd": "/home/dev/repo", "hook_event_name": "PermissionRequest",
		"model": "gpt-5-codex", "permission_mode": "on-request", "tool_name": tool,
		"tool_input": map[string]any{"command": command, "description": "run it"},
	})
	return string(b)
}

// answer is a hook answer, decoded.
type answer struct {
	HookSpecificOutput struct {
		HookEventName            string `json:"hookEventName"`
		PermissionDecision       string `json:"permissionDecision"`
		PermissionDecisionReason string `json:"permissionDecisionReason"`
		Decision                 *struct {
			Behavior string `json:"behavior"`
			Message  string `json:"message"`
		} `json:"decision"`
	} `json:"hookSpecificOutput"`
}

// decode checks the answer is exactly one JSON object of the event's
// shape and returns its behavior and reason.
func decodeAnswer(t *testing.T, stdout, event string) (behavior, reason string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	var a answer
	require.NoError(t, dec.Decode(&a), "answer: %q", stdout)
	require.False(t, dec.More(), "one answer only: %q", stdout)
	o := a.HookSpecificOutput
	require.Equal(t, event, o.HookEventName)
	if event == "PermissionRequest" {
		require.NotNil(t, o.Decision, stdout)
		assert.Empty(t, o.PermissionDecision)
		return o.Decision.Behavior, o.Decision.Message
	}
	require.Nil(t, o.Decision, stdout)
	return o.PermissionDecision, o.PermissionDecisionReason
}

// TestHooks feeds the exact input shapes of Claude Code's and Codex's
// hooks to the binary, against a real server.
func TestHooks(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{ExpiryEvery: 20 * time.Millisecond})
	agent := env.Agent("coder", hookPolicy)
	reviewer := env.Reviewer("rita")
	r := newRunner(t, env.URL, agent.Token())

	for _, tc := range []struct {
		name, hook, input, event string
		behavior, reason         string
		tool                     string
	}{
		{"claude-code PreToolUse allowed", "claude-code", claudeInput("PreToolUse", "Read", map[string]any{"file_path": "/home/dev/repo/go.mod"}, "toolu_01"), "PreToolUse", "allow", "approved", "claude-code.read"},
		{"claude-code PermissionRequest allowed", "claude-code", claudeInput("PermissionRequest", "Read", map[string]any{"file_path": "/etc/hosts", "limit": 10000000000000001}, "toolu_02"), "PermissionRequest", "allow", "", "claude-code.read"},
		{"claude-code an MCP tool keeps its underscores", "claude-code", claudeInput("PreToolUse", "mcp__github__create_issue", map[string]any{"title": "t"}, "toolu_03"), "PreToolUse", "allow", "approved", "claude-code.mcp__github__create_issue"},
		{"claude-code PreToolUse denied by policy", "claude-code", claudeInput("PreToolUse", "Bash", map[string]any{"command": "rm -rf /"}, "toolu_04"), "PreToolUse", "deny", "denied", "claude-code.bash"},
		{"claude-code PermissionRequest denied by policy", "claude-code", claudeInput("PermissionRequest", "Bash", map[string]any{"command": "curl x | sh"}, "toolu_05"), "PermissionRequest", "deny", "denied", "claude-code.bash"},
		{"claude-code pending expires", "claude-code", claudeInput("PreToolUse", "Write", map[string]any{"file_path": "/tmp/x", "content": "x"}, "toolu_06"), "PreToolUse", "deny", "expired", "claude-code.write"},
		{"codex allowed", "codex", codexInput("shell", "ls -la"), "PermissionRequest", "allow", "", "codex.shell"},
		{"codex Bash (its shell and exec approvals)", "codex", codexInput("Bash", "ls -la"), "PermissionRequest", "allow", "", "codex.bash"},
		{"codex denied by policy", "codex", codexInput("apply_patch", "*** Begin Patch"), "PermissionRequest", "deny", "denied", "codex.apply_patch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := r.run(tc.input, "hook", tc.hook)
			require.Equal(t, 0, res.code, "a decision exits 0: %+v", res)
			behavior, reason := decodeAnswer(t, res.stdout, tc.event)
			assert.Equal(t, tc.behavior, behavior)
			assert.Contains(t, reason, tc.reason)
			// The action as submitted: canonical tool, args = tool_input,
			// numbers exact, the session as the conversation.
			var in struct {
				SessionID string         `json:"session_id"`
				ToolUseID string         `json:"tool_use_id"`
				TurnID    string         `json:"turn_id"`
				ToolInput map[string]any `json:"tool_input"`
			}
			dec := json.NewDecoder(strings.NewReader(tc.input))
			dec.UseNumber()
			require.NoError(t, dec.Decode(&in))
			a := findAction(t, reviewer, "coder", tc.tool, in.SessionID)
			assert.Equal(t, in.ToolInput, a.Args)
			if tc.hook == "codex" {
				assert.Equal(t, in.TurnID, a.StepID)
			} else {
				assert.Equal(t, in.ToolUseID, a.StepID)
			}
		})
	}

	t.Run("claude-code PreToolUse and PermissionRequest of one call are one action", func(t *testing.T) {
		input := map[string]any{"file_path": "/home/dev/repo/README.md"}
		for _, event := range []string{"PreToolUse", "PermissionRequest"} {
			res := r.run(claudeInput(event, "Read", input, "toolu_same"), "hook", "claude-code")
			require.Equal(t, 0, res.code, "%+v", res)
			behavior, _ := decodeAnswer(t, res.stdout, event)
			assert.Equal(t, "allow", behavior)
		}
		page, err := reviewer.ListActions(t.Context(), url.Values{"agent": {"coder"}, "limit": {"100"}})
		require.NoError(t, err)
		n := 0
		for _, a := range page.Actions {
			if a.StepID == "toolu_same" {
				n++
			}
		}
		assert.Equal(t, 1, n)
	})

	t.Run("claude-code pending, approved over REST", func(t *testing.T) {
		testPendingApproved(t, r, reviewer, "claude-code",
			claudeInput("PreToolUse", "Edit", map[string]any{"file_path": "/home/dev/repo/main.go", "old_string": "a", "new_string": "b"}, "toolu_10"),
			"PreToolUse", "claude-code.edit", "sess-1")
	})
	t.Run("codex pending, approved over REST", func(t *testing.T) {
		testPendingApproved(t, r, reviewer, "codex", codexInput("exec_command", "make deploy"),
			"PermissionRequest", "codex.exec_command", "codex-sess")
	})
}

// testPendingApproved runs a hook whose call waits for review, approves
// it over REST, and sees the hook answer allow.
func testPendingApproved(t *testing.T, r *runner, reviewer *client.Client, hook, input, event, tool, conversation string) {
	cmd := r.command(input, "hook", hook)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	var pending *client.Action
	for deadline := time.Now().Add(60 * time.Second); pending == nil; {
		require.True(t, time.Now().Before(deadline), "the hook's action never showed up as pending")
		page, err := reviewer.ListActions(t.Context(), url.Values{"status": {"pending"}, "agent": {"coder"}})
		require.NoError(t, err)
		for _, a := range page.Actions {
			if a.Tool == tool && a.ConversationID == conversation {
				pending = &a
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, err := reviewer.Approve(t.Context(), pending.ID, pending.ConfirmationPhrase, "")
	require.NoError(t, err)
	require.NoError(t, cmd.Wait(), "stderr: %s", stderr.String())
	behavior, reason := decodeAnswer(t, stdout.String(), event)
	assert.Equal(t, "allow", behavior)
	if event == "PreToolUse" {
		assert.Contains(t, reason, "approved by rita")
	}
}

// findAction returns the newest action of agent with tool in conversation.
func findAction(t *testing.T, reviewer *client.Client, agent, tool, conversation string) *client.Action {
	t.Helper()
	page, err := reviewer.ListActions(t.Context(), url.Values{"agent": {agent}, "limit": {"100"}})
	require.NoError(t, err)
	for _, a := range page.Actions {
		if a.Tool == tool && a.ConversationID == conversation {
			full, err := reviewer.Get(t.Context(), a.ID)
			require.NoError(t, err)
			return full
		}
	}
	t.Fatalf("no action %s in conversation %s", tool, conversation)
	return nil
}

// TestHooksFailClosed: every failure is a deny answer on stdout, the
// reason on stderr and exit code 2.
func TestHooksFailClosed(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("coder", hookPolicy)
	reviewer := env.Reviewer("rita")

	// A revoked token.
	revoked, err := env.Admin.IssueAgentToken(env.Ctx(), "coder", 0)
	require.NoError(t, err)
	require.NoError(t, env.Admin.RevokeToken(env.Ctx(), revoked.TokenID))

	// A closed loopback port: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := "http://" + l.Addr().String()
	require.NoError(t, l.Close())

	// A server answering 500 to everything.
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	t.Cleanup(broken.Close)

	read := claudeInput("PreToolUse", "Read", map[string]any{"file_path": "/x"}, "toolu_f")
	readPR := claudeInput("PermissionRequest", "Read", map[string]any{"file_path": "/x"}, "toolu_g")
	// tool_input that readers read differently: Airlock would decide on
	// one reading (the last file_path, U+FFFD) and the agent run another.
	// Before, the hook decoded it leniently and allowed the read.
	ambiguous := func(toolInput string) string {
		return strings.Replace(claudeInput("PreToolUse", "Read", map[string]any{}, "toolu_a"), `"tool_input":{}`, `"tool_input":`+toolInput, 1)
	}
	for _, tc := range []struct {
		name, url, token, hook, input, event, reason string
		args                                         []string
	}{
		{"server down", down, agent.Token(), "claude-code", read, "PreToolUse", "unreachable", nil},
		{"server down, PermissionRequest", down, agent.Token(), "claude-code", readPR, "PermissionRequest", "unreachable", nil},
		{"server down, codex", down, agent.Token(), "codex", codexInput("shell", "ls"), "PermissionRequest", "unreachable", nil},
		{"HTTP 500", broken.URL, agent.Token(), "claude-code", read, "PreToolUse", "boom", nil},
		{"HTTP 500, codex", broken.URL, agent.Token(), "codex", codexInput("shell", "ls"), "PermissionRequest", "boom", nil},
		{"revoked token", env.URL, revoked.Token, "claude-code", read, "PreToolUse", "unauthorized", nil},
		{"revoked token, codex", env.URL, revoked.Token, "codex", codexInput("shell", "ls"), "PermissionRequest", "unauthorized", nil},
		{"no token", env.URL, "", "claude-code", read, "PreToolUse", "unauthorized", nil},
		{"input not JSON", env.URL, agent.Token(), "claude-code", "Bash: rm -rf /", "PreToolUse", "not a JSON object", nil},
		{"tool_input not an object", env.URL, agent.Token(), "claude-code", claudeInput("PreToolUse", "Read", "/etc/passwd", "t"), "PreToolUse", "tool_input", nil},
		{"tool_input with a key twice", env.URL, agent.Token(), "claude-code", ambiguous(`{"file_path":"/etc/shadow","file_path":"/x"}`), "PreToolUse", "duplicate", nil},
		{"tool_input with a key twice, in another case", env.URL, agent.Token(), "claude-code", ambiguous(`{"file_path":"/etc/shadow","FILE_PATH":"/x"}`), "PreToolUse", "duplicate", nil},
		{"tool_input with a lone surrogate", env.URL, agent.Token(), "claude-code", ambiguous(`{"file_path":"/x\ud800"}`), "PreToolUse", "surrogate", nil},
		{"no tool_name", env.URL, agent.Token(), "claude-code", claudeInput("PreToolUse", "", map[string]any{}, "t"), "PreToolUse", "tool_name", nil},
		{"unknown event", env.URL, agent.Token(), "claude-code", claudeInput("PostToolUse", "Read", map[string]any{}, "t"), "PreToolUse", "hook_event_name", nil},
		{"codex, not a PermissionRequest", env.URL, agent.Token(), "codex", claudeInput("PreToolUse", "shell", map[string]any{}, "t"), "PermissionRequest", "hook_event_name", nil},
		{"a tool name the server refuses", env.URL, agent.Token(), "claude-code", claudeInput("PreToolUse", strings.Repeat("x", 200), map[string]any{}, "t"), "PreToolUse", "invalid", nil},
		{"bad flag", env.URL, agent.Token(), "claude-code", readPR, "PermissionRequest", "usage", []string{"--timeout", "soon"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRunner(t, tc.url, tc.token)
			res := r.run(tc.input, append([]string{"hook", tc.hook}, tc.args...)...)
			require.Equal(t, 2, res.code, "%+v", res)
			behavior, reason := decodeAnswer(t, res.stdout, tc.event)
			assert.Equal(t, "deny", behavior)
			assert.Contains(t, reason, tc.reason)
			assert.Contains(t, res.stderr, tc.reason)
			assert.True(t, strings.HasPrefix(res.stderr, "airlock: "), res.stderr)
		})
	}

	t.Run("timeout: denied, the pending action cancelled", func(t *testing.T) {
		r := newRunner(t, env.URL, agent.Token())
		res := r.run(claudeInput("PreToolUse", "Edit", map[string]any{"file_path": "/y"}, "toolu_t"), "hook", "claude-code", "--timeout", "1s")
		require.Equal(t, 2, res.code, "%+v", res)
		behavior, reason := decodeAnswer(t, res.stdout, "PreToolUse")
		assert.Equal(t, "deny", behavior)
		assert.Contains(t, reason, "timeout")
		assert.Contains(t, res.stderr, "timeout")
		a := findAction(t, reviewer, "coder", "claude-code.edit", "sess-1")
		assert.Equal(t, "cancelled", a.Status, "nobody waits for it: no reviewer may approve it")
	})
}

// TestHookToolName canonicalises tool names as the issue says.
func TestHookToolName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Bash": "claude-code.bash", "Edit": "claude-code.edit", "mcp__github__create_issue": "claude-code.mcp__github__create_issue",
		"WebFetch": "claude-code.webfetch", "a/b:c d": "claude-code.a_b_c_d", "é": "claude-code._", "x.y-z": "claude-code.x.y-z",
	} {
		got, err := hookToolName("claude-code", in)
		require.NoError(t, err)
		assert.Equal(t, want, got, in)
	}
	_, err := hookToolName("codex", "")
	assert.Error(t, err)
}
