// Package mcpproxy is `airlock mcp proxy`: a stdio MCP proxy that an MCP
// client (Claude Code, Codex, Cursor, VS Code, any MCP host) launches in
// place of a server. It fetches the server's registration from Airlock and
// launches exactly the registered command (in bubblewrap when the
// registration says sandbox, always with a cleared environment holding only
// the registration's env and pass_env names), or, for an http
// registration, connects to the registered URL through netguard.
//
// It relays JSON-RPC both ways unchanged except tools/call: each call is
// first submitted to Airlock as the action mcp.<server>.<tool> with the
// call's arguments. Allowed, it is forwarded and the upstream's result
// reported as the action's result (Airlock scans it for prompt injection;
// the answer says whether to withhold it); denied, expired or cancelled,
// the client gets a tool result with isError and the reason; pending, the
// call is held (with notifications/progress when the client gave a
// progressToken) until it is decided. Any error reaching Airlock is an
// error result, never forwarded: the proxy fails closed.
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
	forwarded map[string]*client.Action     // compact id → approved action, forwarded
	held      map[string]context.CancelFunc // compact id → call waiting for a decision
	gates     sync.WaitGroup
	reports   sync.WaitGroup // results reported after their answer
}

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
		forwarded: map[string]*client.Action{}, held: map[string]context.CancelFunc{}}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
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
			if m.Method == "tools/call" {
				p.writeRPCError(nil, -32600, "Airlock does not accept tools/call inside a batch; send it alone")
				return
			}
			if m.Method != "" && p.callInProgress(m.ID) {
				p.writeRPCError(nil, -32600, "a request in this batch has the id of a tool call still in progress")
				return
			}
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
	case m.Method == "tools/call" && len(m.ID) == 0:
		// Relayed, a tool call sent as a notification would reach the
		// upstream ungated; it has no id to answer.
		p.log.Warn("mcp proxy: a tools/call without an id was dropped")
	case m.Method == "tools/call":
		call, err := mcp.DecodeCall(m.Params)
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
		p.toUpstream(ctx, line)
	}
}

func (p *proxy) toUpstream(ctx context.Context, line []byte) {
	if err := p.up.send(ctx, line); err != nil {
		p.log.Warn("mcp proxy: sending to the MCP server", "err", err)
	}
}

// cancelHeld stops waiting for the call a notifications/cancelled names.
func (p *proxy) cancelHeld(params json.RawMessage) {
	var c struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &c) != nil || len(c.RequestID) == 0 {
		return
	}
	p.mu.Lock()
	stop := p.held[mcp.Compact(c.RequestID)]
	p.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// callInProgress reports whether id (a request's; nil for a
// notification) is that of a tool call held or forwarded.
func (p *proxy) callInProgress(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	key := mcp.Compact(id)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, held := p.held[key]
	return held || p.forwarded[key] != nil
}

// fromUpstream handles one upstream message: the answer to a forwarded
// tool call is reported to Airlock and shaped before the client gets it;
// every other message goes to the client unchanged.
func (p *proxy) fromUpstream(msg []byte) {
	body := bytes.TrimSpace(msg)
	if len(body) == 0 {
		return
	}
	p.mu.Lock()
	awaited := len(p.forwarded) > 0
	p.mu.Unlock()
	var m mcp.Message
	// Only the answer to a forwarded call is read; the rest (resource
	// contents, list results, notifications) passes without being parsed.
	if awaited && body[0] == '{' && json.Unmarshal(body, &m) == nil && m.IsResponse() {
		key := mcp.Compact(m.ID)
		p.mu.Lock()
		a := p.forwarded[key]
		delete(p.forwarded, key)
		p.mu.Unlock()
		if a != nil {
			p.writeLine(p.reported(a, m, body))
			return
		}
	}
	p.writeLine(body)
}

// failForwarded reports every forwarded call still without an answer as
// failed and answers its client.
func (p *proxy) failForwarded(why string) {
	p.mu.Lock()
	left := p.forwarded
	p.forwarded = map[string]*client.Action{}
	p.mu.Unlock()
	for _, a := range left {
		p.fail(a, why)
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
