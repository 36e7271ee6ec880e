// Package mcpgateway is Airlock's MCP gateway: /mcp/{name} speaks MCP's
// Streamable HTTP transport to clients holding an agent token and relays
// JSON-RPC to NAME's registered url, unchanged except tools/call: every
// tool call is first submitted to Airlock (hitl.Service.Submit) as the
// action mcp.<name>.<tool> with the call's arguments. Allowed, it is
// forwarded and the upstream's result reported as the action's result;
// denied, expired or cancelled, the client gets a tool result with
// isError and the reason, and the upstream never sees the call; pending,
// the call is held until it is decided. Any error of Airlock's is an error
// result, never forwarded (fail closed). Outbound connections pass
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
// The relay does not interpret protocol revisions: it carries 2025-06-18
// and 2025-11-25 sessions (Mcp-Session-Id, Mcp-Protocol-Version) alike.
package mcpgateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
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
	// MaxResultBytes is the JSON size of a tool result beyond which the
	// model gets it truncated (AIRLOCK_MCP_MAX_RESULT_BYTES; <= 0:
	// mcp.DefaultMaxResultBytes; at most MaxResultBytes).
	MaxResultBytes int
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

	mu      sync.Mutex
	clients map[string]clientAt // name → client of the registration's version

	// reports are the results being reported after their answer.
	reports sync.WaitGroup
	// streams ends the sessions' GET event streams (StopStreams).
	streams    context.Context
	endStreams context.CancelFunc
}

// StopStreams ends the sessions' GET event streams: at shutdown, before
// the HTTP server waits for its requests to finish.
func (g *Gateway) StopStreams() { g.endStreams() }

// Drain waits for the results still being reported (at shutdown, after
// the HTTP server has stopped taking requests).
func (g *Gateway) Drain() { g.reports.Wait() }

type clientAt struct {
	version int
	client  *http.Client
}

// New returns a Gateway.
func New(c Config) *Gateway {
	g := &Gateway{reg: c.Registry, svc: c.Service, log: c.Logger, guard: c.Guard, getenv: c.Getenv, clients: map[string]clientAt{},
		maxResult: c.MaxResultBytes}
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
		g.forward(w, r.WithContext(ctx), reg, nil, nil)
	case http.MethodDelete:
		g.forward(w, r, reg, nil, nil)
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
			if m.Method == "tools/call" {
				writeRPCError(w, http.StatusBadRequest, nil, -32600, "Airlock does not accept tools/call inside a batch; send it alone")
				return
			}
		}
		g.forward(w, r, reg, body, nil)
		return
	}
	var m mcp.Message
	if err := json.Unmarshal(trimmed, &m); err != nil {
		writeRPCError(w, http.StatusBadRequest, nil, -32700, "parse error")
		return
	}
	if m.Method == "tools/call" && len(m.ID) == 0 {
		// A tool call sent as a notification would reach the upstream
		// ungated if relayed: refused.
		writeRPCError(w, http.StatusBadRequest, nil, -32600, "tools/call is a request: it needs an id")
		return
	}
	if m.Method != "tools/call" {
		g.forward(w, r, reg, body, nil)
		return
	}
	p, err := mcp.DecodeCall(m.Params)
	if err != nil {
		writeRPCError(w, http.StatusOK, m.ID, -32602, err.Error())
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
	a, err := g.gate(r.Context(), r, reg, caller, p, progress)
	if err != nil {
		g.log.WarnContext(r.Context(), "mcp gateway: tool call not forwarded", "server", reg.Name, "tool", p.Name, "err", err)
		answerTool(w, es, m.ID, mcp.Undecided(errText(err)))
		return
	}
	if a.Status != hitl.StatusApproved {
		answerTool(w, es, m.ID, refusal(a))
		return
	}
	g.forward(w, r, reg, body, &reported{g: g, action: a, agentID: caller.AgentID, id: m.ID, stream: es})
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
	b.WriteString("event: message\n")
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	_, _ = es.w.Write(b.Bytes())
	_ = es.rc.Flush()
}

// answerTool answers a tools/call with an isError tool result, on the
// event stream when one was started.
func answerTool(w http.ResponseWriter, es *eventStream, id json.RawMessage, text string) {
	if es == nil {
		writeToolError(w, id, text)
		return
	}
	es.send(mcp.ToolError(id, text))
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

// gate submits the call and waits while it is pending.
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
	a, _, err := g.svc.Submit(ctx, caller.AgentID, caller.TokenID, req)
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

// withdraw cancels pending action id once the client is gone (ctx ended),
// so that no reviewer approves a call that will not be forwarded.
func (g *Gateway) withdraw(ctx context.Context, id, agentID string) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := g.svc.Cancel(cctx, id, agentID); err != nil {
		g.log.Warn("mcp gateway: cancelling a call nobody waits for", "action", id, "err", err)
	}
	return fmt.Errorf("mcpgateway: client gone while %s was pending: %w", id, ctx.Err())
}

// reported captures a forwarded tool call's response to report it as the
// action's result.
type reported struct {
	g       *Gateway
	action  *hitl.Action
	agentID string
	id      json.RawMessage
	done    bool
	// stream is the event stream the answer goes on (nil: none started).
	stream *eventStream
}

// answers tells whether m is the response to the call.
func (rp *reported) answers(m mcp.Message) bool {
	return !rp.done && m.IsResponse() && mcp.Compact(m.ID) == mcp.Compact(rp.id)
}

// answer reports m, the response to the call (raw as received), and
// returns what the client gets (mcp.Relay: truncated, withheld on a
// redact verdict, answered before the report when nothing could be
// withheld).
func (rp *reported) answer(m mcp.Message, raw []byte) []byte {
	rp.done = true
	return mcp.Relay{MaxBytes: rp.g.maxResult, Report: rp.reportResult, Later: rp.g.reports.Go}.Answer(rp.id, m, raw)
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

// passHeaders are the client request headers the upstream gets; never
// Authorization (the agent's Airlock token) or cookies. Nor Last-Event-ID:
// resuming a stream makes the upstream replay what it sent on a broken
// one, a tool call's result among it, on the session's GET stream, which
// the gateway relays as is — the result would reach the model without
// the checks a call's answer gets (and after the call was reported
// failed). A client that resumes gets a fresh stream; a call whose
// answer was lost is reported failed and must be made again.
var passHeaders = []string{"Content-Type", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version"}

// forward relays the request to the upstream and its response back,
// streaming event streams. rp, for a forwarded tool call, sees the
// messages of the response.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, reg mcp.Registration, body []byte, rp *reported) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
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
	for h, env := range reg.HeadersFromEnv {
		if v := g.getenv(env); v != "" {
			up.Header.Set(h, v)
		}
	}
	resp, err := g.client(reg).Do(up)
	if err != nil {
		g.log.WarnContext(r.Context(), "mcp gateway: upstream unreachable", "server", reg.Name, "err", err)
		msg := "the MCP server could not be reached"
		if errors.Is(err, netguard.ErrRefused) || errors.Is(err, netguard.ErrRedirect) {
			msg = "the MCP server's address is refused by Airlock's network guard: " + err.Error()
		}
		rp.finish(msg)
		if rp != nil {
			answerTool(w, rp.stream, rp.id, msg)
			return
		}
		writeRPCError(w, http.StatusBadGateway, nil, -32603, msg)
		return
	}
	defer resp.Body.Close()
	if rp != nil && rp.stream != nil {
		g.forwardOnStream(resp, rp)
		return
	}
	for _, h := range []string{"Content-Type", "Mcp-Session-Id", "Cache-Control"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	ct := resp.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "text/event-stream"):
		w.WriteHeader(resp.StatusCode)
		g.relayStream(w, resp.Body, rp)
		if rp != nil && !rp.done {
			// The stream ended without a response the gateway could
			// pass on: the call still gets an answer.
			msg := "the MCP server's event stream ended without a result the gateway could read"
			rp.finish(msg)
			(&eventStream{w: w, rc: http.NewResponseController(w)}).send(mcp.ToolError(rp.id, msg))
			return
		}
	default:
		data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResultBytes+1))
		if err != nil || len(data) > MaxResultBytes {
			rp.finish("the MCP server's response could not be read whole")
			writeRPCError(w, http.StatusBadGateway, nil, -32603, "the MCP server's response could not be read whole")
			return
		}
		if rp != nil && strings.HasPrefix(ct, "application/json") {
			var m mcp.Message
			if json.Unmarshal(data, &m) == nil && rp.answers(m) {
				data = rp.answer(m, data)
			}
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(data)
	}
	rp.finish(fmt.Sprintf("the MCP server answered %d without a result", resp.StatusCode))
}

// forwardOnStream relays the upstream's answer to a held tool call on the
// event stream already started for its progress notifications.
func (g *Gateway) forwardOnStream(resp *http.Response, rp *reported) {
	ct := resp.Header.Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "text/event-stream"):
		g.relayStream(rp.stream.w, resp.Body, rp)
	case strings.HasPrefix(ct, "application/json"):
		data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResultBytes+1))
		var m mcp.Message
		if err == nil && len(data) <= MaxResultBytes && json.Unmarshal(data, &m) == nil && rp.answers(m) {
			rp.stream.sendRaw(rp.answer(m, data))
		}
	}
	if !rp.done {
		msg := fmt.Sprintf("the MCP server answered %d without a result", resp.StatusCode)
		rp.finish(msg)
		rp.stream.send(mcp.ToolError(rp.id, msg))
	}
}

// relayStream copies an event stream event by event, flushing each. While
// a forwarded tool call (rp) waits for its response, each event is held
// until it is whole: the one carrying the response is written as
// rp.answer makes it (its id and event fields kept), the others as they
// came. An event longer than MaxResultBytes cannot be read whole: it is
// dropped, so that an unreported, unscanned answer never passes.
func (g *Gateway) relayStream(w http.ResponseWriter, body io.Reader, rp *reported) {
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	br := bufio.NewReaderSize(body, 64<<10)
	var (
		event bytes.Buffer // the held event's lines
		line  bytes.Buffer // the held line being read
		data  bytes.Buffer // the held event's data
		over  bool         // the held event is longer than the gateway reads
	)
	dispatch := func() error {
		defer func() { event.Reset(); data.Reset(); over = false }()
		out := event.Bytes()
		switch {
		case len(out) == 0:
			return nil
		case over:
			g.log.Warn("mcp gateway: dropped an event too long to read while a tool call waits for its response",
				"action", rp.action.ID, "limit", MaxResultBytes)
			return nil
		}
		var m mcp.Message
		if data.Len() > 0 && json.Unmarshal(data.Bytes(), &m) == nil && rp.answers(m) {
			if msg := rp.answer(m, data.Bytes()); !bytes.Equal(msg, data.Bytes()) {
				out = rewriteEvent(out, msg)
			}
		}
		_, err := w.Write(out)
		_ = rc.Flush()
		return err
	}
	held := func() bool { return rp != nil && !rp.done }
	blank := true // the line read so far is empty
	for {
		frag, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			err = nil
		}
		switch {
		case len(frag) == 0:
		case !held():
			if _, werr := w.Write(frag); werr != nil {
				return
			}
			if len(bytes.TrimRight(frag, "\r\n")) == 0 {
				_ = rc.Flush()
			}
		default:
			if !over && event.Len()+line.Len()+len(frag) > MaxResultBytes {
				over = true
				line.Reset()
				data.Reset()
			}
			if !over {
				line.Write(frag)
			}
			blank = blank && len(bytes.TrimRight(frag, "\r\n")) == 0
			if frag[len(frag)-1] != '\n' {
				break // the line goes on
			}
			ended := blank
			blank = true
			if !over {
				if trimmed := bytes.TrimRight(line.Bytes(), "\r\n"); bytes.HasPrefix(trimmed, []byte("data:")) {
					data.Write(bytes.TrimPrefix(bytes.TrimPrefix(trimmed, []byte("data:")), []byte(" ")))
					data.WriteByte('\n')
				}
				event.Write(line.Bytes())
			}
			line.Reset()
			if ended && dispatch() != nil {
				return
			}
		}
		if err != nil {
			if held() {
				if !over {
					event.Write(line.Bytes())
				}
				_ = dispatch()
			}
			_ = rc.Flush()
			return
		}
	}
}

// rewriteEvent returns the event with its data replaced by msg: its other
// fields (id, event, retry, comments) kept where they were.
func rewriteEvent(event, msg []byte) []byte {
	var b bytes.Buffer
	wrote := false
	for _, line := range bytes.SplitAfter(event, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("data:")) {
			b.Write(line)
			continue
		}
		if wrote {
			continue
		}
		wrote = true
		for _, l := range bytes.Split(bytes.TrimSpace(msg), []byte("\n")) {
			b.WriteString("data: ")
			b.Write(l)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
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

// writeToolError answers a tools/call with a tool result the model reads.
func writeToolError(w http.ResponseWriter, id json.RawMessage, text string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(mcp.ToolError(id, text))
}
