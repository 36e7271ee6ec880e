package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/airlockhq/airlock/internal/jsonx"
)

// CheckMessage refuses a message whose meaning could differ between the
// gate and the upstream (jsonx.CheckUnambiguous): invalid UTF-8 or a lone
// surrogate escape (Go reads U+FFFD, the upstream something else), and an
// object with a key twice under Go's folding of keys (Go's decoder takes
// the last key that folds to a field's name, JavaScript's the last of the
// exact spelling: with {"name":"delete-repo","Name":"echo"}, or
// "paramſ" beside "params", the gate would see one call and the upstream
// run another).
func CheckMessage(body []byte) error {
	if err := jsonx.CheckUnambiguous(body); err != nil {
		return fmt.Errorf("the message cannot be relayed as Airlock reads it: %w", err)
	}
	return nil
}

// Message is one JSON-RPC message as the relays read it.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// IsResponse reports whether m may answer a request: it has an id and a
// result or an error (also beside a method: a reader that takes it for
// a response is not ruled out, so a relay treats it as one).
func (m Message) IsResponse() bool {
	return len(m.ID) > 0 && (m.Result != nil || m.Error != nil)
}

// Call is a tools/call's params.
type Call struct {
	Name string
	// Arguments are the call's arguments, numbers kept exactly as sent
	// (json.Number).
	Arguments map[string]any
	// CorrelationID is _meta.correlation_id when it is a string.
	CorrelationID string
	// ProgressToken is _meta.progressToken (nil: none).
	ProgressToken json.RawMessage
}

// DecodeCall decodes a tools/call's params; an error when they are not an
// object with a name and object arguments.
func DecodeCall(params json.RawMessage) (Call, error) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      struct {
			CorrelationID any             `json:"correlation_id"`
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.Name == "" {
		return Call{}, errors.New("tools/call needs params.name")
	}
	c := Call{Name: p.Name, Arguments: map[string]any{}}
	if a := bytes.TrimSpace(p.Arguments); len(a) > 0 && string(a) != "null" {
		// What the API refuses in a submit's args (NUL, numbers it cannot
		// store) is refused here with the same words, not met as a
		// failure to record the action.
		if err := jsonx.Check(a); err != nil {
			return Call{}, fmt.Errorf("tools/call params.arguments: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(a))
		dec.UseNumber()
		if err := dec.Decode(&c.Arguments); err != nil {
			return Call{}, errors.New("tools/call params.arguments must be an object")
		}
	}
	if s, ok := p.Meta.CorrelationID.(string); ok {
		c.CorrelationID = s
	}
	if t := bytes.TrimSpace(p.Meta.ProgressToken); len(t) > 0 && string(t) != "null" {
		c.ProgressToken = t
	}
	return c, nil
}

// Compact is raw with insignificant space removed (raw itself when it is
// not JSON). JSON-RPC ids do not compare by it but as clients compare
// them (ID.Same: 1, 1.0 and "1" alike).
func Compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
