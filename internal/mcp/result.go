package mcp

import "encoding/json"

// Placeholder until the results work lands (it replaces this file).

// DefaultMaxResultBytes bounds a tool result given to the model.
const DefaultMaxResultBytes = 1 << 20

// ShapeResult returns result unchanged (placeholder).
func ShapeResult(result json.RawMessage, maxBytes int, redactFinding string) json.RawMessage {
	return result
}

// InjectionVerdict reads an action result's injection object (placeholder).
func InjectionVerdict(actionResult json.RawMessage) (action string, findings []string) {
	return "", nil
}
