package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"

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
//
// A key that Go would read as one of a message's fields only by folding
// ("ID", "Method", "reſult") is refused too: the upstream does not read it
// at all.
func CheckMessage(body []byte) error {
	if err := jsonx.CheckUnambiguous(body); err != nil {
		return fmt.Errorf("the message cannot be relayed as Airlock reads it: %w", err)
	}
	var shape any = &Message{}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		shape = &[]Message{}
	}
	if err := jsonx.CheckExactNames(body, shape); err != nil {
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

// Call is a gated request's params (DecodeRequest): a tools/call's, or
// a resources/read or prompts/get as the call Airlock decides on.
type Call struct {
	// Method is the request's method ("": tools/call).
	Method string
	// Name is the Airlock tool after mcp.<server>. (ToolName): the
	// tool's name, resources.read or prompts.get.
	Name string
	// Arguments are the call's arguments, numbers kept exactly as sent
	// (json.Number).
	Arguments map[string]any
	// CorrelationID is _meta.correlation_id when it is a string.
	CorrelationID string
	// ProgressToken is _meta.progressToken (nil: none).
	ProgressToken json.RawMessage
}

// callParams are the fields of a tools/call's params the relays read.
type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Task      json.RawMessage `json:"task"`
	Meta      struct {
		CorrelationID any             `json:"correlation_id"`
		ProgressToken json.RawMessage `json:"progressToken"`
	} `json:"_meta"`
}

// DecodeCall decodes a tools/call's params; an error when they are not an
// object with a name and object arguments, when the call asks to run as a
// task (params.task: its result would come back later, on a tasks/result
// request, past the result's checks), or when an argument is a number
// that JavaScript and Python servers read as another (floatExact).
//
// A key that Go would read as one of the params' fields only by folding is
// refused (CheckExactNames): with {"name":"deploy","Arguments":{…}} the
// policy and the reviewers would decide on arguments a JavaScript or
// Python server never reads, and the tool would run on its defaults.
func DecodeCall(params json.RawMessage) (Call, error) {
	var p callParams
	if err := json.Unmarshal(params, &p); err != nil || p.Name == "" {
		return Call{}, errors.New("tools/call needs params.name")
	}
	if err := jsonx.CheckExactNames(params, &p); err != nil {
		return Call{}, fmt.Errorf("tools/call params: %w", err)
	}
	if t := bytes.TrimSpace(p.Task); len(t) > 0 && string(t) != "null" {
		return Call{}, errors.New("a tools/call run as a task (params.task) is not relayed: its result would reach the model on tasks/result, past Airlock's checks; call the tool without it")
	}
	c := Call{Method: MethodToolsCall, Name: p.Name, Arguments: map[string]any{}}
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
		if n, ok := inexactNumber(c.Arguments); !ok {
			return Call{}, fmt.Errorf("tools/call params.arguments: the number %s is read as %s by JavaScript servers, the MCP Go SDK and, with a point or an exponent, Python, and Airlock's policy would decide on another value than the server acts on; send an ID as a string, a quantity as the value they read",
				n, strconv.FormatFloat(mustFloat(n), 'g', -1, 64))
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

// inexactNumber finds a number in v (decoded with UseNumber) that a reader
// of float64 (JavaScript, Python's json for a number with a point or an
// exponent, and any reader for an integer beyond 2^53 in JavaScript) reads
// as another value than the exact decimal the policy compares
// (policy.Number): 42.00000000000000000001 is 42 to them, so a rule
// args.repo_id == 42 would not match a call the server runs on repo 42.
// A number is exact when it is the float64 it reads as, written shortest.
// It returns the first inexact one and false.
func inexactNumber(v any) (json.Number, bool) {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if n, ok := inexactNumber(e); !ok {
				return n, false
			}
		}
	case []any:
		for _, e := range x {
			if n, ok := inexactNumber(e); !ok {
				return n, false
			}
		}
	case json.Number:
		if !floatExact(string(x)) {
			return x, false
		}
	}
	return "", true
}

// floatExact reports whether the JSON number s has the value of the
// float64 nearest to it, or of that float64 written shortest (0.1: the
// float64 a reader takes for 0.1), so that every reader, exact or
// float64, reads one value. Up to 15 significant digits it always does.
func floatExact(s string) bool {
	digits := 0
	for i := 0; i < len(s) && s[i] != 'e' && s[i] != 'E'; i++ {
		if s[i] >= '0' && s[i] <= '9' && (digits > 0 || s[i] != '0') {
			digits++
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil { // out of float64's range
		return false
	}
	if digits <= 15 && math.Abs(f) >= 0x1p-1022 || digits == 0 { // a normal float64 holds 15 digits; a subnormal fewer
		return true
	}
	exact, ok := new(big.Rat).SetString(s)
	if !ok {
		return false
	}
	if held := new(big.Rat).SetFloat64(f); held != nil && exact.Cmp(held) == 0 {
		return true
	}
	short, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	return short != nil && exact.Cmp(short) == 0
}

// mustFloat is n as a float64 reader reads it (0 when it cannot).
func mustFloat(n json.Number) float64 {
	f, _ := strconv.ParseFloat(string(n), 64)
	return f
}
