package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/jsonx"
)

// The hooks put a coding agent's tool calls behind Airlock by
// configuration alone: the agent runs `airlock hook claude-code` (or
// codex) before a tool call, with the call as JSON on stdin, and reads the
// decision as JSON on stdout. Every error fails closed: a deny answer on
// stdout, the reason on stderr, exit code 2. A decision (allow, deny,
// expired) exits 0: the answer on stdout says it.

type hookCmd struct {
	ClaudeCode hookClaudeCodeCmd `cmd:"" name:"claude-code" help:"Claude Code's PreToolUse and PermissionRequest hook: submits claude-code.<tool> and answers allow or deny."`
	Codex      hookCodexCmd      `cmd:"" help:"Codex's PermissionRequest hook: submits codex.<tool> and answers allow or deny."`
}

// maxHookInput bounds what a hook reads on stdin.
const maxHookInput = 16 << 20

// The hook events answered.
const (
	eventPreToolUse        = "PreToolUse"
	eventPermissionRequest = "PermissionRequest"
)

// The default --timeout, 9m, stays under Claude Code's 10-minute hook
// limit with time left to cancel the pending action.
type hookClaudeCodeCmd struct {
	Timeout time.Duration `default:"9m" help:"Deny after waiting this long for a reviewer (the pending action is cancelled)."`
}

// Run answers one Claude Code hook call.
func (c *hookClaudeCodeCmd) Run(ctx context.Context, g *globals) error {
	in, err := readHookInput(g.stdin)
	if err != nil {
		return &hookError{err: err}
	}
	event := in.HookEventName
	if event != eventPreToolUse && event != eventPermissionRequest {
		return &hookError{err: fmt.Errorf("hook_event_name %q is not PreToolUse or PermissionRequest", event)}
	}
	req := client.SubmitRequest{ConversationID: in.SessionID, StepID: in.ToolUseID, Reason: hookReason(in)}
	if in.ToolUseID != "" {
		// PreToolUse and PermissionRequest for the same call, or a retry,
		// are one action.
		req.IdempotencyKey = "claude-code:" + in.ToolUseID
	}
	return decideHook(ctx, g, c.Timeout, event, "claude-code", in, req)
}

type hookCodexCmd struct {
	Timeout time.Duration `default:"9m" help:"Deny after waiting this long for a reviewer (the pending action is cancelled)."`
}

// Run answers one Codex hook call.
func (c *hookCodexCmd) Run(ctx context.Context, g *globals) error {
	in, err := readHookInput(g.stdin)
	if err != nil {
		return &hookError{err: err}
	}
	if in.HookEventName != eventPermissionRequest {
		return &hookError{err: fmt.Errorf("hook_event_name %q is not PermissionRequest", in.HookEventName)}
	}
	req := client.SubmitRequest{ConversationID: in.SessionID, StepID: in.TurnID, Reason: hookReason(in)}
	return decideHook(ctx, g, c.Timeout, eventPermissionRequest, "codex", in, req)
}

// hookInput is what Claude Code and Codex send a hook (the fields used
// and shown; others are ignored).
type hookInput struct {
	SessionID      string          `json:"session_id"`
	TurnID         string          `json:"turn_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	Model          string          `json:"model"`
	PermissionMode string          `json:"permission_mode"`
	HookEventName  string          `json:"hook_event_name"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolUseID      string          `json:"tool_use_id"`
}

// readHookInput reads and decodes the hook's stdin.
func readHookInput(r io.Reader) (hookInput, error) {
	var in hookInput
	b, err := io.ReadAll(io.LimitReader(r, maxHookInput+1))
	if err != nil {
		return in, fmt.Errorf("reading the hook input: %w", err)
	}
	if len(b) > maxHookInput {
		return in, fmt.Errorf("the hook input is larger than %d bytes", maxHookInput)
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, fmt.Errorf("the hook input is not a JSON object: %w", err)
	}
	return in, nil
}

// hookArgs is tool_input as the action's args, numbers kept exact. Input
// that readers read differently (a key twice, also in another case; a
// lone surrogate; invalid UTF-8) is refused, as the MCP relays refuse it:
// Airlock would decide on one reading and the agent run another.
func hookArgs(raw json.RawMessage) (map[string]any, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return map[string]any{}, nil
	}
	if err := jsonx.Check(raw); err != nil {
		return nil, fmt.Errorf("tool_input: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil {
		return nil, fmt.Errorf("tool_input is not a JSON object: %w", err)
	}
	return args, nil
}

// hookReason tells reviewers where the agent runs.
func hookReason(in hookInput) string {
	if in.Cwd == "" {
		return ""
	}
	r := "cwd " + in.Cwd
	if len(r) > 1024 {
		r = r[:1024]
	}
	return strings.ToValidUTF8(r, "")
}

// hookToolName is prefix.<tool_name> canonicalised: lower case, each
// character outside [a-z0-9._-] as '_' (mcp__github__create_issue keeps
// its underscores; a '/' or ':' can never pass for a '.').
func hookToolName(prefix, name string) (string, error) {
	if name == "" {
		return "", errors.New("tool_name is empty")
	}
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteByte('.')
	for _, r := range strings.ToLower(name) {
		switch {
		case 'a' <= r && r <= 'z', '0' <= r && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String(), nil
}

// decideHook submits the call, waits for a pending one at most timeout,
// and prints the answer.
func decideHook(ctx context.Context, g *globals, timeout time.Duration, event, prefix string, in hookInput, req client.SubmitRequest) error {
	behavior, reason, err := decideToolCall(ctx, g, timeout, prefix, in.ToolName, in.ToolInput, req)
	if err != nil {
		return &hookError{event: event, err: err}
	}
	return writeHookAnswer(g.stdout, event, behavior, reason)
}

// decideToolCall is what every coding-agent connector (the hooks, the
// permission-prompt server) does with one tool call: it submits tool
// prefix.<toolName> (canonicalised, hookToolName) with args = toolInput
// and the rest of req, waits for a pending one at most timeout (then
// cancels it), and returns "allow" or "deny" with the reason to show.
// An error means no decision: the caller fails closed.
func decideToolCall(ctx context.Context, g *globals, timeout time.Duration, prefix, toolName string, toolInput json.RawMessage, req client.SubmitRequest) (behavior, reason string, err error) {
	tool, err := hookToolName(prefix, toolName)
	if err != nil {
		return "", "", err
	}
	args, err := hookArgs(toolInput)
	if err != nil {
		return "", "", err
	}
	req.Tool, req.Args = tool, args
	if timeout <= 0 {
		return "", "", usageError("--timeout must be positive")
	}
	cl, err := g.client()
	if err != nil {
		return "", "", err
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	a, err := cl.Decide(wctx, req, client.DecideOptions{})
	if abandoned, ok := errors.AsType[*client.AbandonedError](err); ok && wctx.Err() != nil {
		// Nobody waits for it any more (out of time, or the agent gave up
		// on the call): Decide took it off the queue, so that no reviewer
		// approves what will not run.
		msg := fmt.Sprintf("no decision on action %s within %s", abandoned.ActionID, timeout)
		code := "timeout"
		if ctx.Err() != nil {
			code, msg = "cancelled", fmt.Sprintf("the call was abandoned while action %s was pending", abandoned.ActionID)
		}
		if abandoned.CancelErr == nil {
			msg += "; it was cancelled"
		}
		return "", "", &cliError{code: code, message: msg, exit: exitUsage}
	}
	if err != nil {
		return "", "", err
	}
	behavior = "deny"
	by := a.Decision.By
	switch a.Status {
	case "approved":
		behavior, reason = "allow", fmt.Sprintf("airlock: approved by %s (action %s)", by, a.ID)
	case "expired":
		reason = fmt.Sprintf("airlock: expired: no reviewer decided in time (action %s)", a.ID)
	case "denied":
		reason = fmt.Sprintf("airlock: denied by %s: %s (action %s)", by, a.Decision.Reason, a.ID)
	default:
		reason = fmt.Sprintf("airlock: action %s is %s", a.ID, a.Status)
	}
	return behavior, reason, nil
}

// hookError is a hook's failure, with the event it answers when known.
type hookError struct {
	event string
	err   error
}

func (e *hookError) Error() string { return e.err.Error() }
func (e *hookError) Unwrap() error { return e.err }

// hookAnswer is a hook's answer: hookSpecificOutput for the event.
type hookAnswer struct {
	HookSpecificOutput hookOutput `json:"hookSpecificOutput"`
}

type hookOutput struct {
	HookEventName string `json:"hookEventName"`
	// PreToolUse
	PermissionDecision       string `json:"permissionDecision,omitempty"`
	PermissionDecisionReason string `json:"permissionDecisionReason,omitempty"`
	// PermissionRequest
	Decision *hookDecision `json:"decision,omitempty"`
}

type hookDecision struct {
	Behavior string `json:"behavior"`
	Message  string `json:"message,omitempty"`
}

// writeHookAnswer prints the answer for event.
func writeHookAnswer(w io.Writer, event, behavior, reason string) error {
	out := hookOutput{HookEventName: event}
	if event == eventPermissionRequest {
		d := &hookDecision{Behavior: behavior}
		if behavior == "deny" {
			d.Message = reason
		}
		out.Decision = d
	} else {
		out.PermissionDecision, out.PermissionDecisionReason = behavior, reason
	}
	b, err := json.Marshal(hookAnswer{HookSpecificOutput: out})
	if err != nil {
		return fmt.Errorf("encoding the answer: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// failClosed answers deny for a hook that failed: the deny answer on
// stdout, the reason on stderr, exit code 2. The answer has the shape of
// the event the input names when it can be read (stdin, when not nil and
// not a terminal, is read for it), else of the hook's usual event.
func failClosed(kind string, stdin *os.File, stdout, stderr io.Writer, err error) int {
	event := eventPreToolUse
	if kind == "codex" {
		event = eventPermissionRequest
	}
	var he *hookError
	if errors.As(err, &he) && he.event != "" {
		event = he.event
	} else if stdin != nil && !term.IsTerminal(int(stdin.Fd())) {
		if in, rerr := readHookInput(stdin); rerr == nil && kind == "claude-code" &&
			(in.HookEventName == eventPreToolUse || in.HookEventName == eventPermissionRequest) {
			event = in.HookEventName
		}
	}
	code, message, _ := describe(err)
	reason := fmt.Sprintf("airlock: %s: %s", code, message)
	if werr := writeHookAnswer(stdout, event, "deny", reason+" (failing closed)"); werr != nil {
		fmt.Fprintf(stderr, "airlock: writing the answer: %v\n", werr)
	}
	fmt.Fprintln(stderr, reason)
	return exitUsage
}
