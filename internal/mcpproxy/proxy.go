// Package mcpproxy is `airlock mcp proxy`: a stdio MCP proxy that an MCP
// client (Claude Code, Codex, Cursor, VS Code, any MCP host) launches in
// place of a server. It fetches the server's registration from Airlock and
// launches exactly the registered command (in bubblewrap when the
// registration says sandbox, always with a cleared environment holding only
// the registration's env and pass_env names), or, for an http
// registration, connects to the registered URL through netguard.
//
// It relays JSON-RPC both ways unchanged except the requests Airlock
// decides on (mcp.Gated): each tools/call is first submitted to Airlock
// as the action mcp.<server>.<tool> with the call's arguments, each
// resources/read as mcp.<server>.resources.read with {uri}, each
// prompts/get as mcp.<server>.prompts.get with {name, arguments}
// (mcp.DecodeRequest). Allowed, it is forwarded and the upstream's result
// reported as the action's result (Airlock scans it for prompt injection;
// the answer says whether to withhold it); denied, expired or cancelled,
// the client gets a tool result with isError and the reason (a JSON-RPC
// error for resources/read and prompts/get); pending, the
// call is held (with notifications/progress when the client gave a
// progressToken) until it is decided. Any error reaching Airlock is an
// error result, never forwarded: the proxy fails closed.
//
// Every upstream message is read as a client would read it
// (mcp.ReadMessages; one that cannot be is withheld, and fails the
// forwarded call it may answer), and a response reaches the client only
// as the answer to a request of its that awaits one (ids compared as
// clients compare them: mcp.ID): a forwarded call's answer is reported
// and scanned first, a second or early answer is dropped.
//
// A tools/list answer passes without the tools whose names share an
// Airlock name with another tool of the server, and a tools/call of such
// a name is refused before it is submitted (tools.go, mcp.ToolCache).
package mcpproxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/mcp"
	"github.com/airlockhq/airlock/internal/netguard"
)

// MaxMessageBytes bounds one JSON-RPC message in either direction.
const MaxMessageBytes = 64 << 20

// StderrTail is how much of the upstream's stderr is kept (the last bytes).
const StderrTail = 16 << 10

// Config wires a proxy.
type Config struct {
	// Client talks to Airlock with the agent's token.
	Client *client.Client
	// Server is the registration's name.
	Server string
	// Conversation is the conversation_id of every call ("": one random
	// id for this run, the stdio session).
	Conversation string
	// In and Out are the MCP client's side (the proxy's stdin and stdout).
	In  io.Reader
	Out io.Writer
	// Log is the proxy's own log (its stderr); nil: discarded.
	Log *slog.Logger
	// LookupEnv reads the proxy's environment for pass_env and
	// headers_from_env (nil: os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// MaxResultBytes bounds a tool result given to the model; larger ones
	// are truncated with a note (0: mcp.DefaultMaxResultBytes).
	MaxResultBytes int
	// Guard builds the netguard of an http registration (nil: netguard.New
	// with its allow_private); tests use it to trust a CA.
	Guard func(reg mcp.Server) *netguard.Guard
	// ProgressEvery is how often a held call that asked for progress
	// hears that it still waits (0: 15 s).
	ProgressEvery time.Duration
}

// upstream is the MCP server side: a launched command or an HTTP session.
type upstream interface {
	// send delivers one client message.
	send(ctx context.Context, msg []byte) error
	// close ends the session and waits for the upstream to finish.
	close()
	// done is closed when the upstream is gone (the command exited).
	done() <-chan struct{}
	// why says why the upstream is gone, with its redacted stderr tail.
	why() string
}

// proxy is one run.
type proxy struct {
	c   Config
	log *slog.Logger
	reg *client.MCPRegistration
	up  upstream

	outMu sync.Mutex
	out   *bufio.Writer

	mu        sync.Mutex
	forwarded map[string]*fwdCall  // compact id → approved call, forwarded
	held      map[string]*heldCall // compact id → call waiting for a decision
	// pending are the client's other requests relayed to the upstream
	// and not answered yet, oldest first: an upstream's response passes
	// to the client only when it answers one of them (or is reported as a
	// forwarded call's result), so that a duplicate, early or respelled
	// answer to a tool call never reaches the client unchecked.
	pending []awaitedReq
	// fetches are the tools/list requests of the proxy's own (reading the
	// server's tool list to check a call's name: tools.go), by id.
	fetches map[string]chan mcp.Message
	// tools keeps the server's tool list (mcp.ToolCache, under the
	// server's name).
	tools *mcp.ToolCache
	// ctx is the run's context.
	ctx     context.Context
	gates   sync.WaitGroup
	reports sync.WaitGroup // results reported after their answer
}

// fwdCall is an approved tool call forwarded to the upstream.
type fwdCall struct {
	id     mcp.ID // as the client gave it
	method string // tools/call, resources/read or prompts/get
	action *client.Action
}

// awaitedReq is a request of the client's relayed to the upstream and
// not answered yet.
type awaitedReq struct {
	id     mcp.ID
	method string
	// first is a tools/list for the first page (mcp.FirstPage).
	first bool
}

// heldCall is a tool call waiting for Airlock's decision.
type heldCall struct {
	id   mcp.ID
	stop context.CancelFunc
}

// maxPending bounds the requests awaited at once (the oldest is forgotten
// beyond: its answer would be dropped).
const maxPending = 4096

// Run proxies until the client closes its side or the upstream exits. An
// error means the proxy could not start (the registration could not be
// fetched, the command could not be launched) or the upstream failed.
func Run(ctx context.Context, c Config) error {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.LookupEnv == nil {
		c.LookupEnv = os.LookupEnv
	}
	if c.MaxResultBytes <= 0 {
		c.MaxResultBytes = mcp.DefaultMaxResultBytes
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 15 * time.Second
	}
	if c.Conversation == "" {
		c.Conversation = randomID()
	}
	if mcp.ValidName(c.Server) != nil {
		return fmt.Errorf("mcp proxy: %q is not an MCP server name ([a-z0-9-], at most %d)", c.Server, mcp.MaxNameLen)
	}
	reg, err := c.Client.MCPServer(ctx, c.Server)
	if err != nil {
		return fmt.Errorf("mcp proxy: fetching the registration of %q from Airlock: %w", c.Server, err)
	}
	p := &proxy{c: c, log: c.Log, reg: reg, out: bufio.NewWriter(c.Out),
		forwarded: map[string]*fwdCall{}, held: map[string]*heldCall{}, fetches: map[string]chan mcp.Message{},
		tools: mcp.NewToolCache(0, 1, 0)}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.ctx = runCtx
	switch reg.Transport {
	case mcp.TransportStdio:
		p.up, err = startCommand(runCtx, p, server(reg))
	case mcp.TransportHTTP:
		p.up, err = newHTTPUpstream(p, server(reg))
	default:
		err = fmt.Errorf("transport %q is not known", reg.Transport)
	}
	if err != nil {
		return fmt.Errorf("mcp proxy: starting %s: %w", c.Server, err)
	}

	clientDone := make(chan error, 1)
	go func() { clientDone <- p.readClient(runCtx) }()
	var runErr error
	select {
	case err := <-clientDone:
		// The client closed its side: the session is over.
		if err != nil {
			p.log.Warn("mcp proxy: reading the client", "err", err)
		}
		cancel()
		p.gates.Wait()
		p.up.close()
	case <-p.up.done():
		runErr = fmt.Errorf("mcp proxy: the MCP server %s is gone: %s", c.Server, p.up.why())
		cancel()
		p.gates.Wait()
	case <-ctx.Done():
		cancel()
		p.gates.Wait()
		p.up.close()
		runErr = ctx.Err()
	}
	p.failForwarded("the MCP server ended before answering")
	p.reports.Wait()
	return runErr
}

// server is the registration as internal/mcp reads it.
func server(reg *client.MCPRegistration) mcp.Server {
	s := reg.MCPServer
	return mcp.Server{Name: s.Name, Transport: s.Transport, Command: s.Command, Args: s.Args, Env: s.Env,
		PassEnv: s.PassEnv, Sandbox: s.Sandbox, ReadOnlyPaths: s.ReadOnlyPaths, Network: s.Network,
		URL: s.URL, HeadersFromEnv: s.HeadersFromEnv, AllowPrivate: s.AllowPrivate}
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "mcp-stdio-" + hex.EncodeToString(b[:])
}

// readClient reads the client's messages, one per line, until EOF.
func (p *proxy) readClient(ctx context.Context) error {
	br := bufio.NewReaderSize(p.c.In, 64<<10)
	for {
		line, err := readLine(br)
		if len(bytes.TrimSpace(line)) > 0 {
			p.fromClient(ctx, line)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine reads one newline-terminated line of at most MaxMessageBytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxMessageBytes {
			return nil, fmt.Errorf("a message is larger than %d bytes", MaxMessageBytes)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// fromClient handles one client message: every tools/call is gated; every
// other message goes upstream unchanged. A message the proxy cannot read
// exactly as the upstream would is answered with an error, never relayed.
func (p *proxy) fromClient(ctx context.Context, line []byte) {
	body := bytes.TrimSpace(line)
	if i := bytes.IndexByte(line, '\r'); i >= 0 && (i != len(line)-2 || line[len(line)-1] != '\n') {
		// JSON reads a carriage return as space, so Go would read one
		// message; a server reading lines with universal newlines (the
		// MCP Python SDK) ends a line there, and may read a tools/call
		// hidden inside this message. Only the CR of a CRLF is taken.
		p.writeRPCError(nil, -32700, "a message may hold a carriage return only before its newline: servers split lines at it")
		return
	}
	if err := mcp.CheckMessage(body); err != nil {
		p.writeRPCError(nil, -32700, err.Error())
		return
	}
	if body[0] == '[' {
		var batch []mcp.Message
		if err := json.Unmarshal(body, &batch); err != nil {
			p.writeRPCError(nil, -32700, "parse error")
			return
		}
		for _, m := range batch {
			if mcp.Gated(m.Method) {
				p.writeRPCError(nil, -32600, "Airlock does not accept "+m.Method+" inside a batch; send it alone")
				return
			}
			if m.Method != "" && p.callInProgress(m.ID) {
				p.writeRPCError(nil, -32600, "a request in this batch has the id of a tool call still in progress")
				return
			}
		}
		for _, m := range batch {
			p.await(m)
		}
		p.toUpstream(ctx, line)
		return
	}
	var m mcp.Message
	if err := json.Unmarshal(body, &m); err != nil {
		p.writeRPCError(nil, -32700, "parse error")
		return
	}
	switch {
	case mcp.Gated(m.Method) && len(m.ID) == 0:
		// Relayed, a tool call (or resources/read, prompts/get) sent as
		// a notification would reach the upstream ungated; it has no id
		// to answer.
		p.log.Warn("mcp proxy: a request Airlock decides on sent without an id was dropped", "method", m.Method)
	case mcp.Gated(m.Method):
		// tools/call, resources/read, prompts/get: decided on as the
		// action mcp.<server>.<tool>, …resources.read, …prompts.get.
		call, err := mcp.DecodeRequest(m.Method, m.Params)
		if err != nil {
			p.writeRPCError(m.ID, -32602, err.Error())
			return
		}
		p.gate(ctx, m.ID, call, line)
	case m.Method != "" && p.callInProgress(m.ID):
		// Its answer would carry the tool call's id: taken for the call's
		// result, it would be reported and shaped, and the call's real
		// result then pass unchecked.
		p.writeRPCError(m.ID, -32600, "a request with this id is still in progress")
	case m.Method == "notifications/cancelled":
		p.cancelHeld(m.Params)
		p.toUpstream(ctx, line)
	default:
		p.await(m)
		p.toUpstream(ctx, line)
	}
}

// await notes m, when it is a request, as awaiting the upstream's answer.
func (p *proxy) await(m mcp.Message) {
	if m.Method == "" || len(m.ID) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pending) >= maxPending {
		p.pending = p.pending[1:]
	}
	p.pending = append(p.pending, awaitedReq{id: mcp.NewID(m.ID), method: m.Method,
		first: m.Method == mcp.MethodToolsList && mcp.FirstPage(m.Params)})
}

// takePendingLocked removes the request id answers, if one awaits.
func (p *proxy) takePendingLocked(id mcp.ID) (awaitedReq, bool) {
	for i, r := range p.pending {
		if r.id.Same(id) {
			p.pending = append(p.pending[:i:i], p.pending[i+1:]...)
			return r, true
		}
	}
	return awaitedReq{}, false
}

// forwardedLocked returns the forwarded call id answers.
func (p *proxy) forwardedLocked(id mcp.ID) (string, *fwdCall) {
	for k, f := range p.forwarded {
		if f.id.Same(id) {
			return k, f
		}
	}
	return "", nil
}

// heldLocked returns the held call with id.
func (p *proxy) heldLocked(id mcp.ID) *heldCall {
	for _, h := range p.held {
		if h.id.Same(id) {
			return h
		}
	}
	return nil
}

func (p *proxy) toUpstream(ctx context.Context, line []byte) {
	if err := p.up.send(ctx, line); err != nil {
		p.log.Warn("mcp proxy: sending to the MCP server", "err", err)
	}
}

// cancelHeld stops waiting for the call a notifications/cancelled names
// (mcp.CancelledID). It stops it under p.mu, so that the gate, which
// takes the call off held under p.mu too, sees either the cancellation
// (and does not send the call) or no held call here (and the call, sent,
// is the upstream's to cancel).
func (p *proxy) cancelHeld(params json.RawMessage) {
	id, ok := mcp.CancelledID(params)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if h := p.heldLocked(id); h != nil {
		h.stop()
	}
	// A request the client gave up on: the client ignores a late answer.
	p.takePendingLocked(id)
}

// callInProgress reports whether id (a request's; nil for a
// notification) is that of a tool call held or forwarded.
func (p *proxy) callInProgress(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	cid := mcp.NewID(id)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, f := p.forwardedLocked(cid)
	return f != nil || p.heldLocked(cid) != nil
}

// fromUpstream handles one upstream message (a line, an event's data, an
// HTTP body or one element of its batch). Every message is read as every
// client would read it (mcp.ReadMessages); one that cannot be is withheld
// (unreadable). A response is matched with the client's requests by id
// as clients match them (mcp.ID: 1, 1.0 and "1" alike): the answer to a
// forwarded tool call is reported to Airlock and shaped before the client
// gets it; the answer to another request the client awaits passes as it
// is; any other response (a second answer, an answer to a held call or
// to a request not sent yet) is dropped. Requests and notifications pass
// as they are. A batch stays a batch, with the same treatment of each of
// its messages.
func (p *proxy) fromUpstream(msg []byte) {
	body := bytes.TrimSpace(msg)
	if len(body) == 0 {
		return
	}
	elems, msgs, batch, err := mcp.ReadMessages(body)
	if err != nil {
		p.unreadable(body, err)
		return
	}
	out := make([][]byte, 0, len(elems))
	changed := false
	for i, m := range msgs {
		if !m.IsResponse() {
			if m.Method == mcp.NotificationToolsListChanged {
				p.tools.Forget(p.c.Server)
			}
			out = append(out, elems[i])
			continue
		}
		id := mcp.NewID(m.ID)
		if p.ownAnswer(id, m) {
			changed = true
			continue
		}
		p.mu.Lock()
		key, f := p.forwardedLocked(id)
		if f != nil {
			delete(p.forwarded, key)
		}
		held := f == nil && p.heldLocked(id) != nil
		var req awaitedReq
		awaited := false
		if f == nil && !held {
			req, awaited = p.takePendingLocked(id)
		}
		p.mu.Unlock()
		switch {
		case f != nil:
			out = append(out, p.reported(f, m, elems[i]))
			changed = true
		case awaited && req.method == mcp.MethodToolsList:
			// Without the tools that share an Airlock name (tools.go).
			list, ok := p.listAnswer(req.first, elems[i])
			changed = changed || !ok || !bytes.Equal(list, elems[i])
			if ok {
				out = append(out, list)
			}
		case awaited:
			out = append(out, elems[i])
		default:
			p.log.Warn("mcp proxy: dropped a response of the MCP server that answers no request awaited",
				"id", logText(m.ID), "held_call", held)
			changed = true
		}
	}
	switch {
	case !changed:
		p.writeLine(body)
	case !batch:
		if len(out) == 1 {
			p.writeLine(out[0])
		}
	case len(out) > 0:
		p.writeLine(append(append([]byte("["), bytes.Join(out, []byte(","))...), ']'))
	}
}

// unreadable withholds an upstream message that cannot be read as every
// client would read it (never relayed: the client could take it for a
// tool call's answer). The forwarded calls it may answer (by the ids Go
// can find in it; every forwarded call when Go cannot parse it at all
// and it looks like JSON) are reported failed and answered with an
// error, and so are the client's other requests it may answer.
func (p *proxy) unreadable(body []byte, why error) {
	ids, parsed := mcp.LooseIDs(body)
	anyCall := !parsed && (body[0] == '{' || body[0] == '[')
	var failed []*fwdCall
	var answered []awaitedReq
	p.mu.Lock()
	for k, f := range p.forwarded {
		match := anyCall
		for _, id := range ids {
			match = match || f.id.Same(mcp.NewID(id))
		}
		if match {
			delete(p.forwarded, k)
			failed = append(failed, f)
		}
	}
	for _, id := range ids {
		if r, ok := p.takePendingLocked(mcp.NewID(id)); ok {
			answered = append(answered, r)
		}
	}
	p.mu.Unlock()
	for _, id := range ids {
		p.ownAnswer(mcp.NewID(id), mcp.Message{ID: id, Error: json.RawMessage(`{"code":-32603,"message":"the answer cannot be read exactly"}`)})
	}
	p.log.Warn("mcp proxy: withheld a message of the MCP server that cannot be read exactly", "err", why,
		"failed_calls", len(failed))
	for _, f := range failed {
		p.writeLine(p.relay(f).Withhold(f.id.Raw, why.Error()))
	}
	for _, r := range answered {
		p.writeRPCError(r.id.Raw, -32603, "the MCP server's answer could not be read exactly, so Airlock withheld it")
	}
}

// logText is an upstream's value bounded for a log line.
func logText(raw []byte) string {
	if len(raw) > 64 {
		return string(raw[:64]) + "…"
	}
	return string(raw)
}

// failForwarded reports every forwarded call still without an answer as
// failed and answers its client.
func (p *proxy) failForwarded(why string) {
	p.mu.Lock()
	left := p.forwarded
	p.forwarded = map[string]*fwdCall{}
	p.mu.Unlock()
	for _, f := range left {
		p.fail(f.action, why)
	}
}

// fail reports the approved action a as failed.
func (p *proxy) fail(a *client.Action, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.c.Client.ReportResult(ctx, a.ID, client.Result{Outcome: "failed", Error: why}); err != nil {
		p.log.Warn("mcp proxy: reporting a tool result", "action", a.ID, "err", err)
	}
}

// writeLine writes one message to the client.
func (p *proxy) writeLine(b []byte) {
	p.outMu.Lock()
	defer p.outMu.Unlock()
	_, _ = p.out.Write(bytes.TrimSpace(b))
	_ = p.out.WriteByte('\n')
	if err := p.out.Flush(); err != nil {
		p.log.Warn("mcp proxy: writing to the client", "err", err)
	}
}

func (p *proxy) writeJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		p.log.Error("mcp proxy: encoding a message", "err", err)
		return
	}
	p.writeLine(b)
}

func (p *proxy) writeRPCError(id json.RawMessage, code int, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	p.writeJSON(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
}
