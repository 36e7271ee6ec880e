package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock/internal/mcp"
	"github.com/airlockhq/airlock/internal/netguard"
)

// httpUpstream is an MCP server reached over Streamable HTTP at the
// registered URL, through netguard (the registration's allow_private): the
// proxy turns its stdio session into HTTP requests.
type httpUpstream struct {
	p      *proxy
	s      mcp.Server
	client *http.Client

	mu       sync.Mutex
	session  string // Mcp-Session-Id, once the server gave one
	protocol string // the negotiated protocol version
	stream   bool   // the GET stream was opened
	ctx      context.Context
	stop     context.CancelFunc
	posts    sync.WaitGroup
}

func newHTTPUpstream(p *proxy, s mcp.Server) (*httpUpstream, error) {
	g := p.c.Guard
	if g == nil {
		g = func(s mcp.Server) *netguard.Guard {
			return netguard.New(netguard.Options{AllowPrivate: s.Prefixes()})
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	return &httpUpstream{p: p, s: s, client: g(s).Client(), ctx: ctx, stop: stop}, nil
}

// send posts one message. Requests are posted in the background (a long
// tool call must not hold up the others); notifications and responses in
// order.
func (u *httpUpstream) send(ctx context.Context, msg []byte) error {
	var m mcp.Message
	_ = json.Unmarshal(bytes.TrimSpace(msg), &m)
	if m.Method != "" && len(m.ID) > 0 {
		u.posts.Go(func() { u.post(msg, m) })
		return nil
	}
	u.post(msg, m)
	return nil
}

func (u *httpUpstream) request(method string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(u.ctx, method, u.s.URL, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	u.mu.Lock()
	if u.session != "" {
		req.Header.Set("Mcp-Session-Id", u.session)
	}
	if u.protocol != "" {
		req.Header.Set("Mcp-Protocol-Version", u.protocol)
	}
	u.mu.Unlock()
	headers, err := mcp.HeaderValues(u.s, u.p.c.LookupEnv)
	if err != nil {
		return nil, err
	}
	for h, v := range headers {
		req.Header.Set(h, v)
	}
	return req, nil
}

// post sends m and delivers what the server answers; a request that gets
// no answer is answered with an error (the tool call flow then reports
// it as failed).
func (u *httpUpstream) post(body []byte, m mcp.Message) {
	answered := false
	deliver := func(b []byte) {
		if _, msgs, _, err := mcp.ReadMessages(b); err == nil {
			for _, r := range msgs {
				answered = answered || (r.IsResponse() && mcp.SameID(r.ID, m.ID))
			}
		} else if ids, _ := mcp.LooseIDs(b); len(ids) > 0 {
			// Withheld (fromUpstream): a call it answers is failed there.
			for _, id := range ids {
				answered = answered || mcp.SameID(id, m.ID)
			}
		}
		u.p.fromUpstream(b)
	}
	err := u.exchange(body, m, deliver)
	if err != nil {
		u.p.log.Warn("mcp proxy: the MCP server", "server", u.s.Name, "err", err)
	}
	if !answered && m.Method != "" && len(m.ID) > 0 {
		msg := "the MCP server did not answer"
		if err != nil {
			msg = "the MCP server could not be reached: " + err.Error()
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32603, "message": msg}})
		u.p.fromUpstream(b)
	}
}

func (u *httpUpstream) exchange(body []byte, m mcp.Message, deliver func([]byte)) error {
	req, err := u.request(http.MethodPost, body)
	if err != nil {
		return err
	}
	resp, err := u.client.Do(req)
	if err != nil {
		if errors.Is(err, netguard.ErrRefused) || errors.Is(err, netguard.ErrRedirect) {
			return fmt.Errorf("refused by Airlock's network guard: %w", err)
		}
		return err
	}
	defer resp.Body.Close()
	if m.Method == "initialize" {
		if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
			u.mu.Lock()
			u.session = sid
			u.mu.Unlock()
		}
	}
	switch ct := resp.Header.Get("Content-Type"); {
	case resp.StatusCode == http.StatusAccepted:
		if m.Method == "notifications/initialized" {
			u.openStream()
		}
		return nil
	case resp.StatusCode >= 300:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	case strings.HasPrefix(ct, "text/event-stream"):
		return readEvents(resp.Body, func(b []byte) { u.sawInitialize(m, b); deliver(b) })
	default:
		b, err := io.ReadAll(io.LimitReader(resp.Body, MaxMessageBytes+1))
		if err != nil {
			return err
		}
		if len(b) > MaxMessageBytes {
			return fmt.Errorf("an answer is larger than %d bytes", MaxMessageBytes)
		}
		// An HTTP client reading JSON skips a BOM (fetch's json() does).
		b = bytes.TrimPrefix(bytes.TrimSpace(b), []byte("\xEF\xBB\xBF"))
		if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '[' {
			var batch []json.RawMessage
			if err := json.Unmarshal(t, &batch); err != nil {
				return fmt.Errorf("the answer is not JSON: %w", err)
			}
			for _, one := range batch {
				deliver(one)
			}
			return nil
		}
		u.sawInitialize(m, b)
		deliver(b)
		return nil
	}
}

// sawInitialize keeps the protocol version an initialize result gives.
func (u *httpUpstream) sawInitialize(m mcp.Message, b []byte) {
	if m.Method != "initialize" {
		return
	}
	var r struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if json.Unmarshal(b, &r) == nil && r.Result.ProtocolVersion != "" && len(r.Result.ProtocolVersion) < 64 {
		u.mu.Lock()
		u.protocol = r.Result.ProtocolVersion
		u.mu.Unlock()
	}
}

// openStream opens, once, the GET stream on which the server sends its
// own requests and notifications; a server without one answers 405.
func (u *httpUpstream) openStream() {
	u.mu.Lock()
	if u.stream {
		u.mu.Unlock()
		return
	}
	u.stream = true
	u.mu.Unlock()
	go func() {
		req, err := u.request(http.MethodGet, nil)
		if err != nil {
			return
		}
		req.Header.Set("Accept", "text/event-stream")
		resp, err := u.client.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			return
		}
		_ = readEvents(resp.Body, u.p.fromUpstream)
	}()
}

// readEvents reads an event stream (as the SSE specification reads one:
// mcp.EventReader), giving each event's data to deliver.
func readEvents(body io.Reader, deliver func([]byte)) error {
	er := mcp.NewEventReader(body, MaxMessageBytes)
	for {
		ev, err := er.Next()
		if ev.Over {
			return fmt.Errorf("an event is larger than %d bytes", MaxMessageBytes)
		}
		if len(ev.Data) > 0 {
			deliver(ev.Data)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// close ends the session (DELETE, when the server gave one).
func (u *httpUpstream) close() {
	u.mu.Lock()
	session := u.session
	u.mu.Unlock()
	if session != "" {
		if req, err := u.request(http.MethodDelete, nil); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if resp, err := u.client.Do(req.WithContext(ctx)); err == nil {
				resp.Body.Close()
			}
			cancel()
		}
	}
	u.stop()
	u.posts.Wait()
}

func (u *httpUpstream) done() <-chan struct{} { return nil }

func (u *httpUpstream) why() string { return "the HTTP session ended" }
