package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// CheckMessage refuses a message whose meaning could differ between the
// gate and the upstream: invalid UTF-8 (Go reads it as U+FFFD), and
// an object with a key twice, also in another case (Go's decoder takes the
// last key of any case, JavaScript's the last of the exact case: with
// {"name":"delete-repo","Name":"echo"} the gate would see one tool and
// the upstream run another).
func CheckMessage(body []byte) error {
	if !utf8.Valid(body) {
		return errors.New("the message is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   map[string]bool
		key    bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if len(stack) > 0 {
				return errors.New("the message is not JSON: it ends early")
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("the message is not JSON: %w", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if top != nil && top.object {
					top.key = true
				}
				stack = append(stack, &frame{object: t == '{', keys: map[string]bool{}, key: t == '{'})
				if len(stack) > 64 {
					return errors.New("the message nests too deep")
				}
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].key = true
				}
			}
		default:
			if top != nil && top.object {
				if top.key {
					k := strings.ToLower(tok.(string))
					if top.keys[k] {
						return fmt.Errorf("the message has the key %q twice (keys are compared case-insensitively)", tok)
					}
					top.keys[k] = true
					top.key = false
				} else {
					top.key = true
				}
			}
		}
	}
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

// IsResponse reports whether m answers a request.
func (m Message) IsResponse() bool {
	return m.Method == "" && len(m.ID) > 0 && (m.Result != nil || m.Error != nil)
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
// not JSON): JSON-RPC ids compare by it.
func Compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
