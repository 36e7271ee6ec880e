package mcpgateway

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
)

// The session ids the gateway hands out are the upstream's, sealed to the
// agent that began the session: the upstream's id, "_" and the
// HMAC-SHA256 of the agent and that id (base64url, 43 characters), under
// a key all instances share (derived from the signing key). A request
// carrying a session id is relayed only when the id opens for the
// caller's agent, with the upstream's id in its place; any other (another
// agent's session, read from a conversation_id or a log, a forged or
// unsealed id) is answered 404 as an unknown session, as the MCP
// transport answers one, and never reaches the upstream. So one agent's
// token cannot read another's server-to-client stream (its sampling or
// elicitation requests), end its session, or send on it under its own
// policy while the upstream keeps the other's state.

// sealLen is the length of the seal: "_" and 43 base64url characters.
const sealLen = 1 + 43

// sealSession returns the session id the client of agentID gets for the
// upstream's sid.
func (g *Gateway) sealSession(agentID, sid string) string {
	return sid + "_" + base64.RawURLEncoding.EncodeToString(g.sessionMAC(agentID, sid))
}

// openSession returns the upstream's session id sealed in id for agentID,
// and false when id is not one sealed for agentID.
func (g *Gateway) openSession(agentID, id string) (string, bool) {
	if len(id) <= sealLen || id[len(id)-sealLen] != '_' {
		return "", false
	}
	sid := id[:len(id)-sealLen]
	// Strict: the last character's two unused bits must be zero, so that
	// one seal has one spelling (else four spellings open it).
	got, err := base64.RawURLEncoding.Strict().DecodeString(id[len(id)-sealLen+1:])
	if err != nil || !hmac.Equal(got, g.sessionMAC(agentID, sid)) {
		return "", false
	}
	return sid, true
}

func (g *Gateway) sessionMAC(agentID, sid string) []byte {
	m := hmac.New(sha256.New, g.sessionKey)
	m.Write([]byte("airlock mcp session v1\x00"))
	m.Write([]byte(agentID))
	m.Write([]byte{0})
	m.Write([]byte(sid))
	return m.Sum(nil)
}

// randomKey is a session key for a gateway configured without one (a
// single instance: no other has to open its ids).
func randomKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

// openRequest replaces r's sealed Mcp-Session-Id with the upstream's for
// caller, or answers 404 (an unknown session) and returns false. The
// caller's agent rides in the returned request's context, for sealing the
// upstream's answer (callerAgent).
func (g *Gateway) openRequest(w http.ResponseWriter, r *http.Request, caller Caller) (*http.Request, bool) {
	r = r.WithContext(context.WithValue(r.Context(), agentKey{}, caller.AgentID))
	ids := r.Header.Values("Mcp-Session-Id")
	if len(ids) == 0 {
		return r, true
	}
	sid, ok := "", len(ids) == 1
	if ok {
		sid, ok = g.openSession(caller.AgentID, ids[0])
	}
	if !ok {
		writeRPCError(w, http.StatusNotFound, nil, -32001, "session not found: this agent has no MCP session of that id; start a new session (initialize)")
		return nil, false
	}
	r = r.Clone(r.Context())
	r.Header.Set("Mcp-Session-Id", sid)
	return r, true
}

type agentKey struct{}

// callerAgent is the agent a request opened by openRequest comes from.
func callerAgent(r *http.Request) string {
	id, _ := r.Context().Value(agentKey{}).(string)
	return id
}
