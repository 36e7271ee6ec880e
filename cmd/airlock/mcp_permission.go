package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock/client"
)

// `airlock mcp permission-server` is Claude Code's other way to ask for a
// tool call's permission: a stdio MCP server whose one tool, approve, is
// named with `--permission-prompt-tool mcp__airlock__approve` (the server
// registered as "airlock" in .mcp.json). Claude Code calls it when a tool
// call needs permission; it submits the call exactly as the claude-code
// hook does (decideToolCall) and answers the JSON Claude Code reads from
// the result's text. Every error fails closed: a deny answer with the
// reason.

// permissionToolName is the tool's name; Claude Code sees it as
// mcp__<server>__approve.
const permissionToolName = "approve"

type mcpPermissionServerCmd struct {
	Conversation string        `placeholder:"ID" help:"The conversation the calls belong to (default: the MCP session's id, when the transport has one)."`
	Timeout      time.Duration `default:"9m" help:"Deny after waiting this long for a reviewer (the pending action is cancelled)."`
}

// permissionInput is what Claude Code sends the permission-prompt tool.
type permissionInput struct {
	ToolName  string          `json:"tool_name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
}

// permissionAnswer is the JSON the tool answers, as text: allow with the
// input unchanged, or deny with the reason.
type permissionAnswer struct {
	Behavior     string          `json:"behavior"`
	UpdatedInput json.RawMessage `json:"updatedInput,omitempty"`
	Message      string          `json:"message,omitempty"`
}

// permissionSchema is the approve tool's input schema.
var permissionSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"tool_name":   map[string]any{"type": "string", "description": "The tool Claude Code wants to call."},
		"input":       map[string]any{"type": "object", "description": "The tool call's input."},
		"tool_use_id": map[string]any{"type": "string", "description": "The tool call's id."},
	},
	"required": []string{"tool_name", "input"},
}

// Run serves MCP on stdin and stdout until the client closes them.
func (c *mcpPermissionServerCmd) Run(ctx context.Context, g *globals) error {
	if c.Timeout <= 0 {
		return usageError("--timeout must be positive")
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "airlock", Title: "Airlock", Version: binaryVersion()}, nil)
	srv.AddTool(&mcp.Tool{
		Name:        permissionToolName,
		Description: "Asks Airlock whether a tool call may run: policy decides, or a human reviewer. Answers allow or deny.",
		InputSchema: permissionSchema,
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		conversation := c.Conversation
		if conversation == "" && req.Session != nil {
			conversation = req.Session.ID()
		}
		answer := c.decide(ctx, g, conversation, req.Params.Arguments)
		b, err := json.Marshal(answer)
		if err != nil { // cannot happen: the input was valid JSON
			b = []byte(`{"behavior":"deny","message":"airlock: encoding the answer failed (failing closed)"}`)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
	})
	if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		return fmt.Errorf("serving MCP on stdio: %w", err)
	}
	return nil
}

// decide answers one approve call; every error is a deny with its reason.
func (c *mcpPermissionServerCmd) decide(ctx context.Context, g *globals, conversation string, raw json.RawMessage) permissionAnswer {
	deny := func(err error) permissionAnswer {
		code, message, _ := describe(err)
		reason := fmt.Sprintf("airlock: %s: %s", code, message)
		fmt.Fprintln(g.stderr, reason)
		return permissionAnswer{Behavior: "deny", Message: reason + " (failing closed)"}
	}
	var in permissionInput
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil {
		return deny(fmt.Errorf("the approve input is not a JSON object: %w", err))
	}
	input := bytes.TrimSpace(in.Input)
	if len(input) == 0 || string(input) == "null" {
		input = []byte("{}")
	}
	req := client.SubmitRequest{ConversationID: conversation, StepID: in.ToolUseID}
	if in.ToolUseID != "" {
		// A retried prompt for the same call is one action. Its own key,
		// not the hook's: the hook's request carries the session id,
		// which the prompt does not get.
		req.IdempotencyKey = "claude-code-prompt:" + in.ToolUseID
	}
	behavior, reason, err := decideToolCall(ctx, g, c.Timeout, "claude-code", in.ToolName, input, req)
	if err != nil {
		return deny(err)
	}
	if behavior != "allow" {
		return permissionAnswer{Behavior: "deny", Message: reason}
	}
	return permissionAnswer{Behavior: "allow", UpdatedInput: json.RawMessage(input)}
}
