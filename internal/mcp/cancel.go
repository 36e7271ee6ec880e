package mcp

import (
	"bytes"
	"encoding/json"

	"github.com/airlockhq/airlock/internal/jsonx"
)

// How the relays (internal/mcpgateway, internal/mcpproxy) hear that a
// client gave up on a tool call it sent: MCP's notifications/cancelled
// {requestId, reason}, which the MCP SDKs send on a request's timeout or
// abort (the TypeScript SDK as a new message, its request possibly left
// open). A held call it names is withdrawn (its pending action
// cancelled, so no reviewer approves a call nobody waits for); a call
// approved as the notification came is never sent, and reported failed
// (NotSentAfterCancel), so that the audit says it did not run and a
// model told the call failed can retry it without it running twice.

// NotSentAfterCancel is the error reported as the result of an approved
// tool call its client cancelled before it was sent upstream.
const NotSentAfterCancel = "the client cancelled the call after its approval; it was not sent"

// cancelledParams are the fields of notifications/cancelled's params the
// relays read.
type cancelledParams struct {
	RequestID json.RawMessage `json:"requestId"`
}

// CancelledID is the id of the request notifications/cancelled names
// (params.requestId), to be compared as clients compare ids (ID.Same);
// ok is false when it names none, or names it only under a key Go's
// decoder folds ("RequestId"), which the upstream does not read.
func CancelledID(params json.RawMessage) (ID, bool) {
	var p cancelledParams
	if json.Unmarshal(params, &p) != nil {
		return ID{}, false
	}
	if t := bytes.TrimSpace(p.RequestID); len(t) == 0 || string(t) == "null" {
		return ID{}, false
	}
	if jsonx.CheckExactNames(params, &p) != nil {
		return ID{}, false
	}
	return NewID(p.RequestID), true
}
