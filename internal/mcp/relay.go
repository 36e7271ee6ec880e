package mcp

import (
	"encoding/json"
	"fmt"
)

// The texts and shapes a model reads when Airlock does not run a tool
// call, shared by the gateway (internal/mcpgateway) and the stdio proxy
// (internal/mcpproxy) so that both surfaces answer alike.

// Refusal is the text the model reads for a tool call that will not run:
// the action's tool, id, status and decision reason (the agent's reason
// when the decision gave none).
func Refusal(tool, actionID, status, decisionReason, agentReason string) string {
	reason := decisionReason
	if reason == "" {
		reason = agentReason
	}
	switch status {
	case "expired":
		return fmt.Sprintf("Airlock: %s was not approved in time (expired); it was not run.", tool)
	case "cancelled":
		return fmt.Sprintf("Airlock: %s was cancelled; it was not run.", tool)
	case "pending":
		return fmt.Sprintf("Airlock: %s is still waiting for a reviewer (action %s); it was not run.", tool, actionID)
	}
	if reason == "" {
		return fmt.Sprintf("Airlock denied %s; it was not run.", tool)
	}
	return fmt.Sprintf("Airlock denied %s: %s", tool, reason)
}

// Undecided is the text the model reads when Airlock could not decide on
// a gated request of method (unreachable, an error, a refused request):
// it was not run.
func Undecided(method, why string) string {
	what := "tool call"
	switch method {
	case MethodResourcesRead:
		what = "resource read"
	case MethodPromptsGet:
		what = "prompt request"
	}
	return "Airlock could not decide on this " + what + ", so it was not run: " + why
}

// Waiting is the message of a notifications/progress sent while a call
// waits for a reviewer.
func Waiting(tool, actionID string) string {
	return fmt.Sprintf("Airlock: %s is waiting for a reviewer (action %s)", tool, actionID)
}

// ToolError is the JSON-RPC response to tools/call id carrying an isError
// tool result with text.
func ToolError(id json.RawMessage, text string) map[string]any {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return map[string]any{"jsonrpc": "2.0", "id": id,
		"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "isError": true}}
}

// Progress is a notifications/progress message for progressToken tok.
func Progress(tok json.RawMessage, n int, message string) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{
		"progressToken": tok, "progress": n, "message": message}}
}
