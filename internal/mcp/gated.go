package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/airlockhq/airlock/internal/jsonx"
)

// Which client requests Airlock decides on before they reach the MCP
// server: the rule the gateway (internal/mcpgateway) and the stdio proxy
// (internal/mcpproxy) share. Not only tools/call: resources/read and
// prompts/get also reach the server (on the gateway with its
// headers_from_env credentials) and bring back text the model reads, so
// that an agent whose policy denies mcp.github.* could otherwise still
// read the server's repo://… resources. Each gated request becomes an
// Airlock action (ToolName(server, Call.Name)):
//
//	tools/call     mcp.<server>.<tool>            its arguments
//	resources/read mcp.<server>.resources.read    {"uri": params.uri}
//	prompts/get    mcp.<server>.prompts.get       {"name": params.name, "arguments": params.arguments}
//
// Every other method is relayed as it is.

// The gated methods.
const (
	MethodToolsCall     = "tools/call"
	MethodResourcesRead = "resources/read"
	MethodPromptsGet    = "prompts/get"
)

// The Airlock tool names (after mcp.<server>.) of the gated methods
// other than tools/call. Airlock tool names are [a-z0-9._-], so a
// server's tool named "resources.read" would share the policy name: the
// relays hide and refuse such a tool (CollidingTools).
const (
	ToolResourcesRead = "resources.read"
	ToolPromptsGet    = "prompts.get"
)

// Gated reports whether a request of method is decided by Airlock before
// it is forwarded (and refused inside a batch, and as a notification).
func Gated(method string) bool {
	switch method {
	case MethodToolsCall, MethodResourcesRead, MethodPromptsGet:
		return true
	}
	return false
}

// CodeNotRun is the JSON-RPC error code of a gated request other than
// tools/call that Airlock does not forward (denied, expired, cancelled,
// undecided) or whose answer it withholds.
const CodeNotRun = -32001

// Refused is the response to the gated request id of method that will
// not run, or whose answer is withheld, with text: for tools/call an
// isError tool result (ToolError) the model reads; resources/read and
// prompts/get have no such form, so a JSON-RPC error (CodeNotRun).
func Refused(method string, id json.RawMessage, text string) map[string]any {
	if method == "" || method == MethodToolsCall {
		return ToolError(id, text)
	}
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": CodeNotRun, "message": text}}
}

// gatedMeta are the _meta fields of a gated request the relays read.
type gatedMeta struct {
	CorrelationID any             `json:"correlation_id"`
	ProgressToken json.RawMessage `json:"progressToken"`
}

// readParams are the fields of resources/read's params the relays read.
type readParams struct {
	URI  json.RawMessage `json:"uri"`
	Task json.RawMessage `json:"task"`
	Meta gatedMeta       `json:"_meta"`
}

// promptParams are the fields of prompts/get's params the relays read.
type promptParams struct {
	Name      json.RawMessage `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Task      json.RawMessage `json:"task"`
	Meta      gatedMeta       `json:"_meta"`
}

// DecodeRequest decodes the params of a gated request of method (Gated)
// as the call Airlock decides on: DecodeCall's for tools/call; for
// resources/read the call resources.read with {"uri": uri}, for
// prompts/get the call prompts.get with {"name": name, "arguments": {…}}.
// It is as strict as DecodeCall: a key Go reads only by folding is
// refused (with {"URI":…} Go would decide on a resource the server never
// reads), so is a task, an argument that is not exactly one number to
// every reader, and a uri or name that is not a non-empty string.
func DecodeRequest(method string, params json.RawMessage) (Call, error) {
	switch method {
	case MethodToolsCall:
		return DecodeCall(params)
	case MethodResourcesRead:
		var p readParams
		if err := json.Unmarshal(params, &p); err != nil {
			return Call{}, errors.New("resources/read needs params.uri, a string")
		}
		uri, ok := nonEmptyString(p.URI)
		if !ok {
			return Call{}, errors.New("resources/read needs params.uri, a string")
		}
		if err := strictParams(method, params, &p, p.Task); err != nil {
			return Call{}, err
		}
		if err := jsonx.Check(p.URI); err != nil {
			return Call{}, fmt.Errorf("resources/read params.uri: %w", err)
		}
		return withMeta(Call{Method: method, Name: ToolResourcesRead, Arguments: map[string]any{"uri": uri}}, p.Meta), nil
	case MethodPromptsGet:
		var p promptParams
		if err := json.Unmarshal(params, &p); err != nil {
			return Call{}, errors.New("prompts/get needs params.name, a string")
		}
		name, ok := nonEmptyString(p.Name)
		if !ok {
			return Call{}, errors.New("prompts/get needs params.name, a string")
		}
		if err := strictParams(method, params, &p, p.Task); err != nil {
			return Call{}, err
		}
		if err := jsonx.Check(p.Name); err != nil {
			return Call{}, fmt.Errorf("prompts/get params.name: %w", err)
		}
		args, err := decodeArguments(method, p.Arguments)
		if err != nil {
			return Call{}, err
		}
		return withMeta(Call{Method: method, Name: ToolPromptsGet,
			Arguments: map[string]any{"name": name, "arguments": args}}, p.Meta), nil
	}
	return Call{}, fmt.Errorf("%s is not a request Airlock decides on", method)
}

// nonEmptyString is raw as a string when it is a non-empty JSON string.
func nonEmptyString(raw json.RawMessage) (string, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(t, &s) != nil || s == "" {
		return "", false
	}
	return s, true
}

// strictParams refuses params with a key Go reads only by folding, or
// asking to run as a task.
func strictParams(method string, params json.RawMessage, shape any, task json.RawMessage) error {
	if err := jsonx.CheckExactNames(params, shape); err != nil {
		return fmt.Errorf("%s params: %w", method, err)
	}
	if t := bytes.TrimSpace(task); len(t) > 0 && string(t) != "null" {
		return fmt.Errorf("a %s run as a task (params.task) is not relayed: its result would reach the model past Airlock's checks", method)
	}
	return nil
}

// decodeArguments decodes the arguments object of a gated request as
// DecodeCall does (numbers kept exactly, and exact to every reader).
func decodeArguments(method string, raw json.RawMessage) (map[string]any, error) {
	out := map[string]any{}
	a := bytes.TrimSpace(raw)
	if len(a) == 0 || string(a) == "null" {
		return out, nil
	}
	if err := jsonx.Check(a); err != nil {
		return nil, fmt.Errorf("%s params.arguments: %w", method, err)
	}
	dec := json.NewDecoder(bytes.NewReader(a))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil || out == nil {
		return nil, fmt.Errorf("%s params.arguments must be an object", method)
	}
	if n, ok := inexactNumber(out); !ok {
		return nil, fmt.Errorf("%s params.arguments: the number %s is read as %s by JavaScript servers, the MCP Go SDK and, with a point or an exponent, Python, and Airlock's policy would decide on another value than the server acts on",
			method, n, strconv.FormatFloat(mustFloat(n), 'g', -1, 64))
	}
	return out, nil
}

func withMeta(c Call, m gatedMeta) Call {
	if s, ok := m.CorrelationID.(string); ok {
		c.CorrelationID = s
	}
	if t := bytes.TrimSpace(m.ProgressToken); len(t) > 0 && string(t) != "null" {
		c.ProgressToken = t
	}
	return c
}
