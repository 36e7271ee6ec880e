package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/airlockhq/airlock/internal/jsonx"
)

// ReadMessages reads body, what an upstream sent as one message (a line
// of a stdio server, an event's data, an HTTP response's JSON body), as
// every reader would: one JSON-RPC message, or a JSON array of them (a
// batch, which clients read too). elems are the messages' bytes (body
// itself when it is not an array) and msgs Go's reading of them. It
// fails when Go's reading could differ from another reader's
// (CheckMessage: a key twice, also under Go's folding, as with "reſult"
// beside "result"; a lone surrogate; invalid UTF-8), when body is not
// JSON as Go reads it (NaN, which Python reads; a leading BOM) or when
// an element is not a message. A relay must not pass on as they are the
// messages it cannot read while a tool call waits for its answer: the
// client could read one of them as that answer.
func ReadMessages(body []byte) (elems []json.RawMessage, msgs []Message, batch bool, err error) {
	body = bytes.TrimSpace(body)
	if err := CheckMessage(body); err != nil {
		return nil, nil, false, err
	}
	if body[0] == '[' {
		if err := json.Unmarshal(body, &elems); err != nil {
			return nil, nil, false, fmt.Errorf("the batch cannot be read: %w", err)
		}
		batch = true
	} else {
		elems = []json.RawMessage{body}
	}
	msgs = make([]Message, len(elems))
	for i, e := range elems {
		if err := json.Unmarshal(e, &msgs[i]); err != nil {
			return nil, nil, false, fmt.Errorf("the message cannot be read: %w", err)
		}
	}
	return elems, msgs, batch, nil
}

// LooseIDs returns the ids that a message ReadMessages refused may carry,
// as far as Go can parse it: the values of its top-level keys that fold
// to "id" (of each element of a batch). parsed is false when Go cannot
// parse it at all.
func LooseIDs(body []byte) (ids []json.RawMessage, parsed bool) {
	body = bytes.TrimSpace(body)
	var objs []map[string]json.RawMessage
	if len(body) > 0 && body[0] == '[' {
		var elems []json.RawMessage
		if json.Unmarshal(body, &elems) != nil {
			return nil, false
		}
		for _, e := range elems {
			var o map[string]json.RawMessage
			if json.Unmarshal(e, &o) == nil {
				objs = append(objs, o)
			}
		}
	} else {
		var o map[string]json.RawMessage
		if json.Unmarshal(body, &o) != nil {
			return nil, false
		}
		objs = append(objs, o)
	}
	idKey := jsonx.FoldKey("id")
	for _, o := range objs {
		for k, v := range o {
			if jsonx.FoldKey(k) == idKey {
				ids = append(ids, v)
			}
		}
	}
	return ids, true
}

// plainResponse reports whether raw (a message ReadMessages read) is a
// JSON-RPC 2.0 response with nothing but its jsonrpc, id and one of
// result and error: then every reader reads it as Go does.
func plainResponse(raw []byte) bool {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return false
	}
	for k := range fields {
		switch k {
		case "jsonrpc", "id", "result", "error":
		default:
			return false
		}
	}
	_, result := fields["result"]
	_, failed := fields["error"]
	return result != failed && string(bytes.TrimSpace(fields["jsonrpc"])) == `"2.0"`
}
