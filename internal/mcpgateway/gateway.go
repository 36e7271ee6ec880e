// Package mcpgateway is Airlock's MCP gateway: /mcp/{name} speaks MCP's
// Streamable HTTP transport to clients holding an agent token and relays
// JSON-RPC to NAME's registered url, unchanged except the requests
// Airlock decides on (mcp.Gated): every tool call is first submitted to
// Airlock (hitl.Service.Submit) as the action mcp.<name>.<tool> with the
// call's arguments, every resources/read as mcp.<name>.resources.read
// with {uri}, every prompts/get as mcp.<name>.prompts.get with {name,
// arguments} (mcp.DecodeRequest). Allowed, it is forwarded and the
// upstream's result reported as the action's result; denied, expired or
// cancelled, the client gets a tool result with isError and the reason
// (a JSON-RPC error for resources/read and prompts/get, which have no
// such form), and the upstream never sees the call; pending,
// the call is held until it is decided, or withdrawn (its action
// cancelled) when its client goes away or cancels it
// (notifications/cancelled from the call's agent and session). Any error
// of Airlock's is an error result, never forwarded (fail closed). Outbound connections pass
// netguard with the registration's allow_private.
//
// The upstream's answer to a forwarded call is held until it has been
// reported: truncated to Config.MaxResultBytes (mcp.ShapeResult), reported
// as the action's result, which scans it for prompt injection, and then
// written, or, when the agent's result_injection_action is redact and the
// scan found something, replaced by an error naming the finding. Other
// messages on the call's event stream (progress, notifications) pass as
// they come.
//
// Every answer is read as the client will read it (exchange): a JSON
// body or an event stream (split into lines at CRLF, LF or CR) by its
// media type, exactly application/json or text/event-stream (the
// client gets that type, not the upstream's spelling); each message
// checked with mcp.ReadMessages; responses matched with requests by id
// as clients match them (mcp.ID). Only the responses to the requests the
// client's message carried pass, once each: a second answer, an answer
// to another request (the client's tool call waiting on another
// stream) or any response on the session's GET stream is dropped. What
// cannot be read exactly is dropped, and fails the tool call it may
// answer.
//
// A tools/list answer passes without the tools whose names share an
// Airlock name with another tool of the server, and a tools/call of such
// a name is refused before it is submitted (tools.go, mcp.ToolCache).
//
// The relay does not interpret protocol revisions: it carries 2025-06-18
// and 2025-11-25 sessions (Mcp-Session-Id, Mcp-Protocol-Version) alike.
package mcpgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/connlimit"
	"github.com/airlockhq/airlock/internal/eventbus"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/mcp"
	"github.com/airlockhq/airlock/internal/netguard"
)

// MaxMessageBytes bounds a client's JSON-RPC message.
const MaxMessageBytes = 4 << 20

// ProgressEvery is how often a held call that asked for progress hears
// that it is still waiting.
const ProgressEvery = 15 * time.Second

// MaxResultBytes bounds an upstream response (or event) the gateway reads
// whole; a longer answer to a tool call is not passed on.
const MaxResultBytes = 8 << 20

// Caller is the authenticated agent.
type Caller struct {
	AgentID string
	TokenID string
}

// Config wires a Gateway.
type Config struct {
	Registry *mcp.Registry
	Service  *hitl.Service
	Logger   *slog.Logger
	// Guard builds the netguard of a registration (nil: netguard.New with
	// its allow_private); tests use it to trust a CA.
	Guard func(reg mcp.Registration) *netguard.Guard
	// Getenv reads the gateway's environment for headers_from_env
	// (nil: os.Getenv).
	Getenv func(string) string
	// SessionKey seals the session ids the gateway hands out to the agent
	// that began each session (session.go); every instance needs the same
	// one (nil: a random key, for a single instance).
	SessionKey []byte
	// MaxResultBytes is the JSON size of a tool result beyond which the
	// model gets it truncated (AIRLOCK_MCP_MAX_RESULT_BYTES; <= 0:
	// mcp.DefaultMaxResultBytes; at most MaxResultBytes).
	MaxResultBytes int
	// Calls bounds the gated calls one agent has waiting for their
	// decision at once on this instance: they count with its long polls
	// (AIRLOCK_MAX_LONG_POLLS). nil: no bound.
	Calls *connlimit.Limiter
	// Bus brings the notifications/cancelled that other instances
	// received for calls held here; Publisher tells the other instances
	// of one received here for a call not held here (a client's requests
	// need not all reach one instance). nil: this instance's calls only.
	Bus       *eventbus.Bus
	Publisher hitl.Publisher
}

// Gateway relays MCP sessions to registered servers.
type Gateway struct {
	reg    *mcp.Registry
	svc    *hitl.Service
	log    *slog.Logger
	guard  func(reg mcp.Registration) *netguard.Guard
	getenv func(string) string
	// maxResult is what the model reads of a tool result at most.
	maxResult int
	// tools keeps the registrations' tool lists (tools.go).
	tools *mcp.ToolCache
	// calls bounds an agent's gated calls waiting for a decision.
	calls *connlimit.Limiter

	mu      sync.Mutex
	clients map[string]clientAt // name → client of the registration's version

	sessionKey []byte // seals session ids (session.go)

	// held are the tool calls waiting for a decision, by agent and
	// session, that a notifications/cancelled may withdraw, received
	// here or by another instance (pub, unwatch).
	heldMu  sync.Mutex
	held    map[session][]*heldCall
	pub     hitl.Publisher
	unwatch func()

	// reports are the results being reported after their answer.
	reports sync.WaitGroup
	// streams ends the sessions' GET event streams (StopStreams).
	streams    context.Context
	endStreams context.CancelFunc
}

// StopStreams ends the sessions' GET event streams: at shutdown, before
// the HTTP server waits for its requests to finish.
func (g *Gateway) StopStreams() {
	g.endStreams()
	g.unwatch()
}

// Drain waits for the results still being reported (at shutdown, after
// the HTTP server has stopped taking requests).
func (g *Gateway) Drain() { g.reports.Wait() }

type clientAt struct {
	version int
	client  *http.Client
}

// session is where a client's requests come from: its agent and its
// Mcp-Session-Id ("" for a server that keeps no sessions).
type session struct {
	agentID string
	id      string
}

// heldCall is a tool call waiting for a decision.
type heldCall struct {
	id   mcp.ID // as the client gave it
	stop context.CancelFunc
}

// New returns a Gateway.
func New(c Config) *Gateway {
	g := &Gateway{reg: c.Registry, svc: c.Service, log: c.Logger, guard: c.Guard, getenv: c.Getenv, clients: map[string]clientAt{},
		held: map[session][]*heldCall{}, maxResult: c.MaxResultBytes, sessionKey: c.SessionKey,
		tools: mcp.NewToolCache(0, 0, 0), calls: c.Calls, pub: c.Publisher, unwatch: func() {}}
	if c.Bus != nil {
		g.unwatch = c.Bus.WatchCalls(g.cancelCall)
	}
	if len(g.sessionKey) == 0 {
		g.sessionKey = randomKey()
	}
	if g.maxResult <= 0 {
		g.maxResult = mcp.DefaultMaxResultBytes
	}
	g.maxResult = min(g.maxResult, MaxResultBytes)
	g.streams, g.endStreams = context.WithCancel(context.Background())
	if g.log == nil {
		g.log = slog.Default()
	}
	if g.guard == nil {
		g.guard = func(reg mcp.Registration) *netguard.Guard {
			return netguard.New(netguard.Options{AllowPrivate: reg.Prefixes()})
		}
	}
	if g.getenv == nil {
		g.getenv = os.Getenv
	}
	return g
}

// Registration returns the http registration name, or not_found (also for
// a stdio registration: it is reached through the proxy only).
func (g *Gateway) Registration(ctx context.Context, name string) (mcp.Registration, error) {
	reg, err := g.reg.Get(ctx, []string{"agent"}, name)
	if err != nil {
		return reg, err
	}
	if reg.Transport != mcp.TransportHTTP {
		return reg, apperr.NotFound("MCP server %q is a stdio server: it is reached through `airlock mcp proxy`, not the gateway", name)
	}
	return reg, nil
}

func (g *Gateway) client(reg mcp.Registration) *http.Client {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.clients[reg.Name]; ok && c.version == reg.Version {
		return c.client
	}
	if old, ok := g.clients[reg.Name]; ok {
		old.client.CloseIdleConnections()
	}
	c := g.guard(reg).Client()
	g.clients[reg.Name] = clientAt{version: reg.Version, client: c}
	return c
}

// ServeHTTP serves one request of a session to registration reg for
// caller (authenticated by the API's middleware).
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request, reg mcp.Registration, caller Caller) {
	// A held tool call lasts until it is decided and an event stream as
	// long as the session: the server's write timeout (sized for long
	// polls) does not apply; the client's connection and the action's
	// expiry bound them.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	r, ok := g.openRequest(w, r, caller)
	if !ok {
		return
	}
	switch r.Method {
	case http.MethodPost:
		g.post(w, r, reg, caller)
	case http.MethodGet:
		// The session's event stream lasts as long as the client keeps
		// it: it ends when the server shuts down (the client reconnects
		// to another instance), or it would hold the shutdown.
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(g.streams, cancel)()
		g.forward(w, r.WithContext(ctx), reg, nil, g.exchange())
	case http.MethodDelete:
		g.forward(w, r, reg, nil, g.exchange())
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (g *Gateway) post(w http.ResponseWriter, r *http.Request, reg mcp.Registration, caller Caller) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxMessageBytes))
	if err != nil {
		writeRPCError(w, http.StatusRequestEntityTooLarge, nil, -32600, "the message is larger than the gateway accepts")
		return
	}
	trimmed := bytes.TrimSpace(body)
	if err := mcp.CheckMessage(trimmed); err != nil {
		writeRPCError(w, http.StatusBadRequest, nil, -32600, err.Error())
		return
	}
	if len(trimmed) > 0 && trimmed[0] == '[' {
		// JSON-RPC batches (protocol 2025-03-26 only): relayed unless they
		// hold a tool call, which must be gated one by one.
		var batch []mcp.Message
		if err := json.Unmarshal(trimmed, &batch); err != nil {
			writeRPCError(w, http.StatusBadRequest, nil, -32700, "parse error")
			return
		}
		for _, m := range batch {
			if mcp.Gated(m.Method) {
				writeRPCError(w, http.StatusBadRequest, nil, -32600, "Airlock does not accept "+m.Method+" inside a batch; send it alone")
				return
			}
		}
		for _, m := range batch {
			if m.Method == "notifications/cancelled" {
				g.cancelHeld(sessionOf(r, caller), m.Params)
			}
		}
		g.forward(w, r, reg, body, g.exchange(batch...))
		return
	}
	var m mcp.Message
	if err := json.Unmarshal(trimmed, &m); err != nil {
		writeRPCError(w, http.StatusBadRequest, nil, -32700, "parse error")
		return
	}
	if mcp.Gated(m.Method) && len(m.ID) == 0 {
		// A tool call (or resources/read, prompts/get) sent as a
		// notification would reach the upstream ungated if relayed:
		// refused.
		writeRPCError(w, http.StatusBadRequest, nil, -32600, m.Method+" is a request: it needs an id")
		return
	}
	if m.Method == "notifications/cancelled" {
		// Relayed all the same: the upstream cancels a call it runs.
		g.cancelHeld(sessionOf(r, caller), m.Params)
	}
	if !mcp.Gated(m.Method) {
		g.forward(w, r, reg, body, g.exchange(m))
		return
	}
	// tools/call, resources/read, prompts/get: decided on as the action
	// mcp.<server>.<tool>, mcp.<server>.resources.read, …prompts.get.
	p, err := mcp.DecodeRequest(m.Method, m.Params)
	if err != nil {
		writeRPCError(w, http.StatusOK, m.ID, -32602, err.Error())
		return
	}
	if err := g.checkTool(r, reg, p); err != nil {
		// Its name shares an Airlock name with another tool of the
		// server, or the list to tell could not be read: not run, not
		// submitted (tools.go).
		g.log.WarnContext(r.Context(), "mcp gateway: tool call refused", "server", reg.Name, "tool", p.Name, "err", err)
		writeToolError(w, p.Method, m.ID, mcp.CheckCallText(err))
		return
	}
	// A client that gave a progressToken hears, while its call waits for
	// a reviewer, notifications/progress on an event stream that then
	// carries the answer.
	var es *eventStream
	var progress func(n int, a *hitl.Action)
	if tok := p.ProgressToken; tok != nil {
		progress = func(n int, a *hitl.Action) {
			if es == nil {
				es = startStream(w)
			}
			es.send(mcp.Progress(tok, n, mcp.Waiting(a.Tool, a.ID)))
		}
	}
	// From its submit to its decision the call is one of the agent's long
	// polls on this instance. Beyond them it is refused before anything is
	// submitted, as a call Airlock cannot decide on is (a tool result with
	// isError, or a JSON-RPC error): the model reads why, and nothing of
	// it was recorded.
	done, err := g.calls.Enter(&auth.Principal{Kind: auth.KindAgent, Subject: caller.AgentID})
	if err != nil {
		answerTool(w, nil, p.Method, m.ID, mcp.Undecided(p.Method, errText(err)))
		return
	}
	defer done()
	// Held, the call waits until it is decided, its client goes away, or
	// the client cancels it (notifications/cancelled).
	hctx, release := g.hold(r.Context(), sessionOf(r, caller), m.ID)
	a, err := g.gate(hctx, r, reg, caller, p, progress)
	cancelled := release()
	done() // decided: what follows (forwarding) is the upstream's time
	// What a client that gave up on the call reads, if it still reads.
	gaveUp := "Airlock: " + mcp.ToolName(reg.Name, p.Name) + " was cancelled by the client; it was not run."
	switch {
	case err != nil && cancelled:
		answerTool(w, es, p.Method, m.ID, gaveUp)
	case err != nil:
		g.log.WarnContext(r.Context(), "mcp gateway: tool call not forwarded", "server", reg.Name, "tool", p.Name, "err", err)
		answerTool(w, es, p.Method, m.ID, mcp.Undecided(p.Method, errText(err)))
	case a.Status != hitl.StatusApproved:
		answerTool(w, es, p.Method, m.ID, refusal(a))
	case cancelled:
		// Approved as the client gave up on it: not sent, and the audit
		// says so (a model told the call failed may make it again).
		(&reported{g: g, action: a, agentID: caller.AgentID}).finish(mcp.NotSentAfterCancel)
		answerTool(w, es, p.Method, m.ID, gaveUp)
	default:
		g.forward(w, r, reg, body, &exchange{g: g, rp: &reported{g: g, action: a, agentID: caller.AgentID, id: m.ID,
			method: p.Method, stream: es}})
	}
}

// sessionOf is the session r belongs to.
func sessionOf(r *http.Request, caller Caller) session {
	return session{agentID: caller.AgentID, id: r.Header.Get("Mcp-Session-Id")}
}

// hold notes the tool call id of s as held and returns the context it
// waits under (ctx, ended too by a notifications/cancelled of s naming
// id: cancelHeld) and release, which forgets the call and reports
// whether it was cancelled so.
func (g *Gateway) hold(ctx context.Context, s session, id json.RawMessage) (context.Context, func() bool) {
	hctx, stop := context.WithCancel(ctx)
	h := &heldCall{id: mcp.NewID(id), stop: stop}
	g.heldMu.Lock()
	g.held[s] = append(g.held[s], h)
	g.heldMu.Unlock()
	return hctx, func() bool {
		g.heldMu.Lock()
		defer g.heldMu.Unlock()
		// Read under heldMu, which cancelHeld stops a call under: after
		// this, no notification reaches the call (it goes upstream).
		cancelled := hctx.Err() != nil
		left := g.held[s][:0]
		for _, o := range g.held[s] {
			if o != h {
				left = append(left, o)
			}
		}
		if len(left) == 0 {
			delete(g.held, s)
		} else {
			g.held[s] = left
		}
		stop()
		return cancelled
	}
}

// cancelHeld stops waiting for the held calls of s that a
// notifications/cancelled of s names (mcp.CancelledID; ids compared as
// clients compare them): their pending actions are withdrawn. Only the
// session's own agent and session reach its calls.
func (g *Gateway) cancelHeld(s session, params json.RawMessage) {
	id, ok := mcp.CancelledID(params)
	if !ok {
		return
	}
	if g.stopHeld(s, id) || g.pub == nil {
		return
	}
	// Not held here: it may be on another instance, which withdraws it
	// as this one would (cancelCall).
	g.pub.Publish(eventbus.Event{Kind: eventbus.CallCancelled,
		Call: &eventbus.Call{Agent: s.agentID, Session: s.id, ID: id.Raw}})
}

// cancelCall is cancelHeld of a notifications/cancelled that another
// instance received.
func (g *Gateway) cancelCall(c eventbus.Call) {
	g.stopHeld(session{agentID: c.Agent, id: c.Session}, mcp.NewID(c.ID))
}

// stopHeld stops waiting for the held calls of s with id, and reports
// whether there was one.
func (g *Gateway) stopHeld(s session, id mcp.ID) bool {
	g.heldMu.Lock()
	defer g.heldMu.Unlock()
	found := false
	for _, h := range g.held[s] {
		if h.id.Same(id) {
			h.stop()
			found = true
		}
	}
	return found
}

// eventStream is a POST's answer turned into an event stream.
type eventStream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startStream(w http.ResponseWriter) *eventStream {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &eventStream{w: w, rc: http.NewResponseController(w)}
}

// send writes one message event.
func (es *eventStream) send(v any) {
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	es.sendRaw(data)
}

func (es *eventStream) sendRaw(data []byte) {
	var b bytes.Buffer
	mcp.RewriteEvent(&b, [][]byte{[]byte("event: message")}, data)
	_, _ = es.w.Write(b.Bytes())
	_ = es.rc.Flush()
}

// answerTool answers a gated request of method that does not run (or
// whose answer is withheld) with text (mcp.Refused: for a tools/call an
// isError tool result, else a JSON-RPC error), on the event stream when
// one was started.
func answerTool(w http.ResponseWriter, es *eventStream, method string, id json.RawMessage, text string) {
	if es == nil {
		writeToolError(w, method, id, text)
		return
	}
	es.send(mcp.Refused(method, id, text))
}

func errText(err error) string {
	if e, ok := apperr.As(err); ok && e.Code != apperr.CodeInternal {
		return e.Message
	}
	return "internal error"
}

// refusal is the text the model reads for an action that will not run.
func refusal(a *hitl.Action) string {
	return mcp.Refusal(a.Tool, a.ID, string(a.Status), a.Decision.Reason, a.Reason)
}

// gate submits the call (under r's context) and waits while it is
// pending, until ctx ends: then the action is withdrawn.
func (g *Gateway) gate(ctx context.Context, r *http.Request, reg mcp.Registration, caller Caller, p mcp.Call, progress func(int, *hitl.Action)) (*hitl.Action, error) {
	args := p.Arguments
	if args == nil {
		args = map[string]any{}
	}
	req := hitl.SubmitRequest{Tool: mcp.ToolName(reg.Name, p.Name), Args: args}
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && len(sid) <= 128 {
		req.ConversationID = sid
	}
	if cid := p.CorrelationID; len(cid) <= 128 {
		req.CorrelationID = cid
	}
	a, _, err := g.svc.Submit(r.Context(), caller.AgentID, caller.TokenID, req)
	if err != nil {
		return nil, err
	}
	wait := hitl.MaxWait
	if progress != nil {
		wait = ProgressEvery
	}
	for n := 0; a.Status == hitl.StatusPending; n++ {
		if ctx.Err() != nil {
			return nil, g.withdraw(ctx, a.ID, caller.AgentID)
		}
		if progress != nil {
			progress(n, a)
		}
		next, err := g.svc.Wait(ctx, a.ID, wait, nil)
		if err != nil && ctx.Err() != nil {
			return nil, g.withdraw(ctx, a.ID, caller.AgentID)
		}
		if err != nil {
			return nil, err
		}
		a = next
	}
	return a, nil
}

// withdraw cancels pending action id once the client is gone or has
// cancelled the call (ctx ended), so that no reviewer approves a call
// that will not be forwarded. When a reviewer approved it meanwhile, it
// is reported failed: it will not be sent either.
func (g *Gateway) withdraw(ctx context.Context, id, agentID string) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := g.svc.Cancel(cctx, id, agentID); err != nil {
		g.log.Warn("mcp gateway: cancelling a call nobody waits for", "action", id, "err", err)
		if a, gerr := g.svc.Get(cctx, id); gerr == nil && a.Status == hitl.StatusApproved {
			(&reported{g: g, action: a, agentID: agentID}).finish(mcp.NotSentAfterCancel)
		}
	}
	return fmt.Errorf("mcpgateway: client gone or cancelled while %s was pending: %w", id, ctx.Err())
}

// reported captures a forwarded tool call's response to report it as the
// action's result.
type reported struct {
	g       *Gateway
	action  *hitl.Action
	agentID string
	id      json.RawMessage
	// method is the gated request's (tools/call, resources/read,
	// prompts/get).
	method string
	done   bool
	// stream is the event stream the answer goes on (nil: none started).
	stream *eventStream
}

// answer reports m, the response to the call (raw as received), and
// returns what the client gets (mcp.Relay: truncated, withheld on a
// redact verdict, answered before the report when nothing could be
// withheld).
func (rp *reported) answer(m mcp.Message, raw []byte) []byte {
	rp.done = true
	return rp.relay().Answer(rp.id, m, raw)
}

// withhold reports the call failed (why) instead of an answer that
// cannot be read exactly, and returns the error the client gets.
func (rp *reported) withhold(why string) []byte {
	rp.done = true
	return rp.relay().Withhold(rp.id, why)
}

func (rp *reported) relay() mcp.Relay {
	return mcp.Relay{Method: rp.method, MaxBytes: rp.g.maxResult, Report: rp.reportResult, Later: rp.g.reports.Go}
}

// reportResult records r as the action's result.
func (rp *reported) reportResult(r mcp.ResultReport) (json.RawMessage, error) {
	a, err := rp.report(hitl.ResultRequest{Outcome: r.Outcome, Output: r.Output, Error: r.Error,
		Scanned: true, Findings: r.Findings})
	if err != nil {
		return nil, err
	}
	return a.Result, nil
}

func (rp *reported) report(res hitl.ResultRequest) (*hitl.Action, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := rp.g.svc.Result(ctx, rp.action.ID, rp.agentID, res)
	if err != nil {
		rp.g.log.Warn("mcp gateway: reporting a tool result", "action", rp.action.ID, "err", err)
	}
	return a, err
}

// finish reports a failure when no response to the call was seen.
func (rp *reported) finish(why string) {
	if rp == nil || rp.done {
		return
	}
	rp.done = true
	_, _ = rp.report(hitl.ResultRequest{Outcome: "failed", Error: why})
}

// headers are the headers reg's headers_from_env sends upstream, read
// from the server's environment (mcp.HeaderValues).
func (g *Gateway) headers(reg mcp.Registration) (map[string]string, error) {
	return mcp.HeaderValues(reg.Server, func(k string) (string, bool) { v := g.getenv(k); return v, v != "" })
}

// passHeaders are the client request headers the upstream gets; never
// Authorization (the agent's Airlock token) or cookies. Nor Last-Event-ID:
// resuming a stream makes the upstream replay what it sent on a broken
// one, a tool call's result among it, on the session's GET stream, which
// the gateway relays as is — the result would reach the model without
// the checks a call's answer gets (and after the call was reported
// failed). A client that resumes gets a fresh stream; a call whose
// answer was lost is reported failed and must be made again.
var passHeaders = []string{"Content-Type", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version"}

// exchange is one relayed request: what of the upstream's answer may
// reach the client.
type exchange struct {
	g *Gateway
	// ids are the ids of the requests the client's message carried
	// (other than a tool call's, rp's): each may be answered once.
	ids      []mcp.ID
	answered []bool
	// lists tells which of ids are tools/list requests, firsts which of
	// those ask for the first page (mcp.FirstPage).
	lists, firsts []bool
	// reg and r are the registration and the client's request (forward).
	reg mcp.Registration
	r   *http.Request
	// rp is the forwarded tool call (nil: none).
	rp *reported
}

// exchange is the exchange of a client's message of msgs (none: a GET or
// a DELETE).
func (g *Gateway) exchange(msgs ...mcp.Message) *exchange {
	ex := &exchange{g: g}
	for _, m := range msgs {
		if m.Method != "" && len(m.ID) > 0 {
			ex.ids = append(ex.ids, mcp.NewID(m.ID))
			list := m.Method == mcp.MethodToolsList
			ex.lists = append(ex.lists, list)
			ex.firsts = append(ex.firsts, list && mcp.FirstPage(m.Params))
		}
	}
	ex.answered = make([]bool, len(ex.ids))
	return ex
}

// waiting reports whether the forwarded tool call waits for its answer.
func (ex *exchange) waiting() bool { return ex.rp != nil && !ex.rp.done }

// requests reports whether the client's message carried a request.
func (ex *exchange) requests() bool { return ex.rp != nil || len(ex.ids) > 0 }

// take marks the request id answers as answered and returns its index;
// -1 when none of the client's requests waits for it.
func (ex *exchange) take(id json.RawMessage) int {
	r := mcp.NewID(id)
	for i, q := range ex.ids {
		if !ex.answered[i] && q.Same(r) {
			ex.answered[i] = true
			return i
		}
	}
	return -1
}

// unanswered is the id of a request of the client's still unanswered
// (nil: none).
func (ex *exchange) unanswered() json.RawMessage {
	for i, q := range ex.ids {
		if !ex.answered[i] {
			return q.Raw
		}
	}
	return nil
}

// filtered is what the client gets of a message or batch the upstream
// sent.
type filtered struct {
	msgs    [][]byte // the messages left, in order
	batch   bool
	changed bool // msgs are not the upstream's as they were
	answer  bool // the tool call's answer is among msgs
}

// body is what is left of orig (ok false: nothing).
func (f filtered) body(orig []byte) (out []byte, ok bool) {
	switch {
	case !f.changed:
		return orig, true
	case !f.batch:
		if len(f.msgs) == 1 {
			return f.msgs[0], true
		}
		return nil, false
	case len(f.msgs) == 0:
		return nil, false
	}
	return append(append([]byte("["), bytes.Join(f.msgs, []byte(","))...), ']'), true
}

// filter reads body, one message or a batch that the upstream sent (an
// event's data, a JSON body), and returns what the client gets of it:
// requests and notifications as they came; the tool call's answer
// reported and shaped (reported.answer); the answer to each request of
// the client's as it came, once; no other response. A body that cannot
// be read exactly is dropped, and, while the tool call waits, fails the
// call when it may be its answer (it carries its id, or Go cannot parse
// it at all): the client then gets an error in its place.
func (ex *exchange) filter(body []byte) filtered {
	if len(bytes.TrimSpace(body)) == 0 {
		return filtered{msgs: [][]byte{body}} // no message: nobody reads one in it
	}
	elems, msgs, batch, err := mcp.ReadMessages(body)
	if err != nil {
		if ex.waiting() {
			ids, parsed := mcp.LooseIDs(body)
			t := bytes.TrimSpace(body)
			match := !parsed && (t[0] == '{' || t[0] == '[')
			for _, id := range ids {
				match = match || mcp.SameID(id, ex.rp.id)
			}
			if match {
				ex.g.log.Warn("mcp gateway: withheld the answer to a tool call that cannot be read exactly",
					"action", ex.rp.action.ID, "err", err)
				return filtered{msgs: [][]byte{ex.rp.withhold(err.Error())}, changed: true, answer: true}
			}
		}
		ex.g.log.Warn("mcp gateway: dropped a message of the MCP server that cannot be read exactly", "err", err)
		return filtered{changed: true}
	}
	f := filtered{batch: batch}
	for i, m := range msgs {
		switch {
		case !m.IsResponse():
			if m.Method == mcp.NotificationToolsListChanged && ex.r != nil {
				ex.g.tools.Forget(toolsKey(ex.reg, ex.r))
			}
			f.msgs = append(f.msgs, elems[i])
		case ex.waiting() && mcp.SameID(ex.rp.id, m.ID):
			out := ex.rp.answer(m, elems[i])
			f.msgs = append(f.msgs, out)
			f.answer = true
			f.changed = f.changed || !bytes.Equal(out, elems[i])
		case ex.takeInto(&f, m.ID, elems[i]):
		default:
			ex.g.log.Warn("mcp gateway: dropped a response of the MCP server that answers no request of this exchange",
				"id", logText(m.ID))
			f.changed = true
		}
	}
	return f
}

// logText is an upstream's value bounded for a log line.
func logText(raw []byte) string {
	if len(raw) > 64 {
		return string(raw[:64]) + "…"
	}
	return string(raw)
}

// Media types of MCP's Streamable HTTP answers.
const (
	typeJSON   = "application/json"
	typeEvents = "text/event-stream"
)

// mediaType is the media type of an answer when it is exactly one of
// MCP's ("": another, several Content-Type headers, or parameters that
// do not parse). A client reads the body by its own reading of the
// header (the TypeScript SDK looks for either type anywhere in it: "text/
// plain; application/json" is JSON to it): the gateway reads only what it
// can read exactly, and gives the client the type it read.
func mediaType(h http.Header) string {
	v := h.Values("Content-Type")
	if len(v) != 1 {
		return ""
	}
	mt, _, err := mime.ParseMediaType(v[0])
	if err != nil || (mt != typeJSON && mt != typeEvents) {
		return ""
	}
	return mt
}

var bom = []byte("\xEF\xBB\xBF")

// forward relays the request to the upstream and its answer back (what
// ex lets through of it), streaming event streams.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, reg mcp.Registration, body []byte, ex *exchange) {
	rp := ex.rp
	ex.reg, ex.r = reg, r
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	// notSent answers a request that never reached the upstream.
	notSent := func(msg string) {
		rp.finish(msg)
		if rp != nil {
			answerTool(w, rp.stream, rp.method, rp.id, msg)
			return
		}
		writeRPCError(w, http.StatusBadGateway, nil, -32603, msg)
	}
	headers, err := g.headers(reg)
	if err != nil {
		// A registration stored before the rule that refuses its
		// headers_from_env now: nothing is sent.
		g.log.WarnContext(r.Context(), "mcp gateway: registration refused", "server", reg.Name, "err", err)
		notSent("the MCP server's registration is refused now: " + err.Error())
		return
	}
	up, err := http.NewRequestWithContext(r.Context(), r.Method, reg.URL, rd)
	if err != nil {
		rp.finish("the gateway could not build the upstream request")
		writeRPCError(w, http.StatusBadGateway, nil, -32603, "the gateway could not build the upstream request")
		return
	}
	for _, h := range passHeaders {
		if v := r.Header.Values(h); len(v) > 0 {
			up.Header[h] = v
		}
	}
	for h, v := range headers {
		up.Header.Set(h, v)
	}
	resp, err := g.client(reg).Do(up)
	if err != nil {
		g.log.WarnContext(r.Context(), "mcp gateway: upstream unreachable", "server", reg.Name, "err", err)
		msg := "the MCP server could not be reached"
		if errors.Is(err, netguard.ErrRefused) || errors.Is(err, netguard.ErrRedirect) {
			msg = "the MCP server's address is refused by Airlock's network guard: " + err.Error()
		}
		notSent(msg)
		return
	}
	defer resp.Body.Close()
	if rp != nil && rp.stream != nil {
		g.forwardOnStream(resp, ex)
		return
	}
	if v := resp.Header.Get("Cache-Control"); v != "" {
		w.Header().Set("Cache-Control", v)
	}
	if v := resp.Header.Get("Mcp-Session-Id"); v != "" {
		w.Header().Set("Mcp-Session-Id", g.sealSession(callerAgent(r), v))
	}
	status := resp.StatusCode
	if status < 200 || status > 299 {
		if rp != nil {
			// A client shows an error status's body as its error's text,
			// which the model may read: it is not passed on unchecked.
			msg := fmt.Sprintf("the MCP server answered %d", status)
			rp.finish(msg)
			writeRPCError(w, status, rp.id, -32603, msg+"; Airlock withheld the body of that answer")
			return
		}
		// Clients do not read an error status's body as messages.
		if v := resp.Header.Get("Content-Type"); v != "" {
			w.Header().Set("Content-Type", v)
		}
		w.WriteHeader(status)
		_, _ = io.Copy(w, io.LimitReader(resp.Body, MaxResultBytes))
		return
	}
	mt := mediaType(resp.Header)
	switch r.Method {
	case http.MethodGet:
		mt = typeEvents // clients read a GET's answer as an event stream whatever its type
	case http.MethodDelete:
		w.WriteHeader(status) // clients do not read a DELETE's body
		return
	}
	if mt == typeEvents {
		w.Header().Set("Content-Type", typeEvents)
		w.WriteHeader(status)
		g.relayStream(w, resp.Body, ex)
		if rp != nil && !rp.done {
			// The stream ended without a response the gateway could
			// pass on: the call still gets an answer.
			msg := "the MCP server's event stream ended without a result the gateway could read"
			rp.finish(msg)
			(&eventStream{w: w, rc: http.NewResponseController(w)}).send(mcp.Refused(rp.method, rp.id, msg))
		}
		return
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResultBytes+1))
	if err != nil || len(data) > MaxResultBytes {
		rp.finish("the MCP server's response could not be read whole")
		writeRPCError(w, http.StatusBadGateway, nil, -32603, "the MCP server's response could not be read whole")
		return
	}
	// An HTTP client reading JSON skips a BOM (fetch's json() does).
	data = bytes.TrimPrefix(bytes.TrimSpace(data), bom)
	switch {
	case len(data) == 0 && rp != nil:
		msg := fmt.Sprintf("the MCP server answered %d without a result", status)
		rp.finish(msg)
		writeToolError(w, rp.method, rp.id, msg)
		return
	case len(data) == 0 || !ex.requests():
		// 202 Accepted; or the answer to notifications and responses,
		// which clients do not read.
		w.WriteHeader(status)
		return
	case mt != typeJSON:
		msg := "the MCP server answered with a Content-Type that is neither application/json nor text/event-stream"
		if rp != nil {
			rp.finish(msg)
			writeToolError(w, rp.method, rp.id, msg)
			return
		}
		writeRPCError(w, http.StatusBadGateway, ex.unanswered(), -32603, msg)
		return
	}
	out, ok := ex.filter(data).body(data)
	switch {
	case rp != nil && !rp.done:
		msg := fmt.Sprintf("the MCP server answered %d without a result", status)
		rp.finish(msg)
		writeToolError(w, rp.method, rp.id, msg)
	case !ok:
		writeRPCError(w, http.StatusBadGateway, ex.unanswered(), -32603, "the MCP server's answer was withheld: it answers no request of this message")
	default:
		w.Header().Set("Content-Type", typeJSON)
		w.WriteHeader(status)
		_, _ = w.Write(out)
	}
}

// forwardOnStream relays the upstream's answer to a held tool call on the
// event stream already started for its progress notifications.
func (g *Gateway) forwardOnStream(resp *http.Response, ex *exchange) {
	rp := ex.rp
	msg := fmt.Sprintf("the MCP server answered %d without a result", resp.StatusCode)
	switch mt := mediaType(resp.Header); {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		msg = fmt.Sprintf("the MCP server answered %d; Airlock withheld the body of that answer", resp.StatusCode)
	case mt == typeEvents:
		g.relayStream(rp.stream.w, resp.Body, ex)
	default:
		data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResultBytes+1))
		data = bytes.TrimPrefix(bytes.TrimSpace(data), bom)
		switch {
		case err != nil || len(data) > MaxResultBytes:
			msg = "the MCP server's response could not be read whole"
		case len(data) == 0:
		case mt != typeJSON:
			msg = "the MCP server answered with a Content-Type that is neither application/json nor text/event-stream"
		default:
			for _, m := range ex.filter(data).msgs {
				rp.stream.sendRaw(m)
			}
		}
	}
	if !rp.done {
		rp.finish(msg)
		rp.stream.send(mcp.Refused(rp.method, rp.id, msg))
	}
}

// relayStream relays an event stream event by event, each read whole
// (mcp.EventReader: lines end at CRLF, LF or CR) and flushed: an event
// without data as it came (with LF line ends), an event with data as ex
// filters its message: as it came when it passes unchanged, rewritten
// (its id and other fields kept, its type "message") when it carries
// the tool call's answer or lost some of a batch, dropped when nothing
// of it passes. An event longer than MaxResultBytes cannot be read
// whole: it is dropped, so that an unreported, unscanned answer never
// passes.
func (g *Gateway) relayStream(w http.ResponseWriter, body io.Reader, ex *exchange) {
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	er := mcp.NewEventReader(body, MaxResultBytes)
	for {
		ev, err := er.Next()
		var b bytes.Buffer
		switch {
		case ev.Over:
			g.log.Warn("mcp gateway: dropped an event too long to read", "limit", MaxResultBytes)
		case !ev.HasData:
			if len(ev.Lines) > 0 {
				mcp.WriteEvent(&b, ev.Lines)
			}
		default:
			f := ex.filter(ev.Data)
			switch out, ok := f.body(ev.Data); {
			case !ok:
			case f.changed || f.answer:
				mcp.RewriteEvent(&b, ev.Lines, out)
			default:
				mcp.WriteEvent(&b, ev.Lines)
			}
		}
		if b.Len() > 0 {
			if _, werr := w.Write(b.Bytes()); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": msg}})
}

// writeToolError answers a gated request of method with text
// (mcp.Refused: a tool result the model reads for a tools/call).
func writeToolError(w http.ResponseWriter, method string, id json.RawMessage, text string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(mcp.Refused(method, id, text))
}
