package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/airlockhq/airlock/internal/risk"
)

// ResultReport is what a relay reports as the result of a forwarded tool
// call: the result as the model reads it, or the upstream's JSON-RPC error.
type ResultReport struct {
	Outcome string          // "succeeded" or "failed"
	Output  json.RawMessage // the shaped CallToolResult (nil on a JSON-RPC error)
	Error   string          // the JSON-RPC error object as JSON text
	// Findings are what risk.ScanResult found in Output and Error (the
	// relay ran it), for a reporter in the server's process to pass on.
	Findings []string
}

// Relay hands the upstream's answer to an approved tool call to the model:
// the rule the gateway and the stdio proxy share.
type Relay struct {
	// Method is the gated request's method ("": tools/call). The answer
	// to a resources/read or prompts/get is not a tool result: it is
	// never truncated (one too large is withheld) and what is withheld
	// is answered with a JSON-RPC error (Refused).
	Method string
	// MaxBytes bounds the result the model reads (ShapeResult).
	MaxBytes int
	// Report records r as the action's result (hitl.Service.Result, or
	// its API) and returns the action's stored result, which carries the
	// server's injection verdict.
	Report func(r ResultReport) (actionResult json.RawMessage, err error)
	// Later runs fn after the answer has been given (a background report).
	Later func(fn func())
}

// Answer returns the message the client gets for m, the response to the
// approved call whose client gave it id, raw as received (raw must have
// passed ReadMessages: Go reads it as every reader does), and has it
// reported:
//   - the result is shaped first (truncated to MaxBytes), so that what
//     is recorded and scanned is what the model reads; an error larger
//     than that is withheld with an error saying so;
//   - raw goes on as it is only when it is a plain response
//     (jsonrpc, id and result or error, nothing else) carrying id as the
//     client spelled it and a result shaping left alone; otherwise the
//     client gets the response as Go read it, re-encoded with its id (a
//     respelled id such as 1.0 for 1, or an "error" beside a "result"
//     that Python reads, never pass);
//   - when the prompt-injection scan the server runs (risk.ScanResult)
//     finds nothing here, no verdict could withhold the result: the client
//     gets it at once and the report runs after (Later), so that the call
//     costs one durable write (its submit) before it is answered;
//   - otherwise the report is waited for and the server's verdict applied
//     (redact: the result is withheld, naming the finding); a report that
//     fails then withholds the result too (fail closed: it was not scanned
//     where the setting lives).
//
// The answer to a resources/read or a prompts/get (Method) is reported
// and scanned alike, but it is not a tool result: one that is not a JSON
// object or is larger than MaxBytes is withheld whole (never truncated),
// and whatever is withheld is a JSON-RPC error (Refused), not an isError
// result.
func (rl Relay) Answer(id json.RawMessage, m Message, raw []byte) []byte {
	plain := plainResponse(raw) && Compact(m.ID) == Compact(id)
	if limit := resultLimit(rl.MaxBytes); len(m.Error) > limit {
		// Past what the scan reads and the model is given, as a result
		// would be truncated: withheld, saying so.
		m.Error = encodeJSON(map[string]any{"code": -32603,
			"message": fmt.Sprintf("Airlock withheld the upstream's error: %d bytes, over the %d a model is given", len(m.Error), limit)})
		plain = false
	}
	r := ResultReport{Outcome: "failed", Error: string(m.Error)}
	out := raw
	if !plain {
		out = encodeJSON(Message{JSONRPC: "2.0", ID: id, Error: m.Error})
	}
	var decoded any
	if m.Error == nil && !rl.toolCall() {
		// A resource's contents or a prompt's messages: passed whole or
		// not at all (they have no content to truncate with a note).
		if why := unshapedResult(m.Result, rl.MaxBytes); why != "" {
			r = ResultReport{Outcome: "failed", Error: "Airlock withheld the MCP server's answer: " + why}
			rl.Later(func() { _, _ = rl.Report(r) })
			return rl.refuse(id, "Airlock withheld the MCP server's answer to this "+rl.Method+": "+why)
		}
		r = ResultReport{Outcome: "succeeded", Output: m.Result}
		if !plain {
			out = encodeResult(id, m.Result)
		}
		if json.Unmarshal(m.Result, &decoded) != nil {
			decoded = string(m.Result) // cannot happen: checked above
		}
	}
	if m.Error == nil && rl.toolCall() {
		shaped := ShapeResult(m.Result, rl.MaxBytes, "")
		r = ResultReport{Outcome: "succeeded", Output: shaped}
		var tr struct {
			IsError bool `json:"isError"`
		}
		if json.Unmarshal(shaped, &tr) == nil && tr.IsError {
			r.Outcome = "failed"
		}
		if !plain || string(shaped) != string(m.Result) {
			out = encodeResult(id, shaped)
		}
		if json.Unmarshal(shaped, &decoded) != nil {
			decoded = string(shaped) // cannot happen: ShapeResult returns JSON
		}
	}
	r.Findings = risk.ScanResult(decoded, r.Error)
	if len(r.Findings) == 0 {
		rl.Later(func() { _, _ = rl.Report(r) })
		return out
	}
	res, err := rl.Report(r)
	if err != nil {
		if !rl.toolCall() {
			return rl.refuse(id, "Airlock could not record the MCP server's answer to this "+rl.Method+", so it is withheld")
		}
		return encodeJSON(ToolError(id, "Airlock could not record this tool call's result, so it is withheld (the tool did run)"))
	}
	if finding := RedactFinding(InjectionVerdict(res)); finding != "" {
		if !rl.toolCall() {
			return rl.refuse(id, "Airlock withheld the MCP server's answer to this "+rl.Method+
				" because it looks like a prompt injection ("+finding+"). A reviewer can see the finding on the action.")
		}
		return encodeResult(id, ShapeResult(r.Output, rl.MaxBytes, finding))
	}
	return out
}

// toolCall reports whether rl relays a tools/call's answer.
func (rl Relay) toolCall() bool { return rl.Method == "" || rl.Method == MethodToolsCall }

// refuse is the JSON-RPC error answering the gated request id with text.
func (rl Relay) refuse(id json.RawMessage, text string) []byte {
	return encodeJSON(Refused(rl.Method, id, text))
}

// unshapedResult says why result, the answer to a resources/read or a
// prompts/get, cannot reach the model as it is ("": it can): not a JSON
// object, or larger than what the model is given and the injection scan
// reads.
func unshapedResult(result json.RawMessage, maxBytes int) string {
	if t := bytes.TrimSpace(result); len(t) == 0 || t[0] != '{' || !json.Valid(t) || !utf8.Valid(t) {
		return "it is not a JSON object"
	}
	if limit := resultLimit(maxBytes); len(result) > limit {
		return fmt.Sprintf("%d bytes, over the %d a model is given", len(result), limit)
	}
	return ""
}

// WithheldAnswer is the text the model reads instead of an upstream's
// answer that Airlock could not read exactly.
const WithheldAnswer = "Airlock withheld the MCP server's answer to this tool call because it could not read it exactly " +
	"(another program could read it differently); the tool may have run."

// Withhold answers the approved call whose client gave it id with an
// isError result instead of an upstream answer that cannot be read
// exactly (why, for the record: never for the model, it may quote the
// upstream), and has the call reported failed.
func (rl Relay) Withhold(id json.RawMessage, why string) []byte {
	r := ResultReport{Outcome: "failed", Error: "Airlock withheld the MCP server's answer: " + why}
	r.Findings = risk.ScanResult(nil, r.Error)
	rl.Later(func() { _, _ = rl.Report(r) })
	if !rl.toolCall() {
		return rl.refuse(id, "Airlock withheld the MCP server's answer to this "+rl.Method+
			" because it could not read it exactly (another program could read it differently)")
	}
	return encodeJSON(ToolError(id, WithheldAnswer))
}

func encodeResult(id json.RawMessage, result json.RawMessage) []byte {
	return encodeJSON(Message{JSONRPC: "2.0", ID: id, Result: result})
}

func encodeJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Maps of strings and raw JSON that was valid: cannot happen.
		return []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}`)
	}
	return b
}
