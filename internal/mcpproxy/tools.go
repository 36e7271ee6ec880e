package mcpproxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/airlockhq/airlock/internal/mcp"
)

// One Airlock name, one upstream tool (mcp.ToolCache, internal/mcp's
// toolnames.go): the proxy removes from the tool lists it relays the
// tools whose names share an Airlock name, and refuses a tools/call of
// such a name. It knows the server's list from the lists it relayed (a
// whole one, kept for mcp.ToolListTTL and forgotten on
// notifications/tools/list_changed), and otherwise reads it itself: its
// own tools/list requests, with ids of its own that the client never
// sees, their answers taken out of what the client gets.

// fetchSeq numbers the proxy's own requests; fetchRun tells runs apart.
var (
	fetchSeq atomic.Uint64
	fetchRun = func() string {
		var b [8]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}()
)

// checkTool is nil when a tools/call may go on to be decided, else why
// it does not run (mcp.ToolCache.CheckCall).
func (p *proxy) checkTool(ctx context.Context, call mcp.Call) error {
	if call.Method != mcp.MethodToolsCall {
		return nil
	}
	return p.tools.CheckCall(ctx, p.c.Server, p.c.Server, call.Name, p.toolsPage)
}

// listAnswer is what the client gets of raw, the answer to its tools/list
// (mcp.ToolCache.ListAnswer). ok is false when the whole list must be read
// first: the answer is then written when it has been, in the background
// (the upstream's messages, the list's pages among them, keep flowing).
func (p *proxy) listAnswer(first bool, raw []byte) ([]byte, bool) {
	out, ok := p.tools.ListAnswer(p.ctx, p.c.Server, p.c.Server, first, raw, nil, p.log)
	if ok {
		return out, true
	}
	raw = append([]byte(nil), raw...)
	// On reports, which Run waits for once the upstream is closed (gates
	// it waits for before, while the upstream may still answer a list).
	p.reports.Go(func() {
		out, _ := p.tools.ListAnswer(p.ctx, p.c.Server, p.c.Server, first, raw, p.toolsPage, p.log)
		p.writeLine(out)
	})
	return nil, false
}

// toolsPage asks the upstream for one page of its tool list
// (mcp.PageFunc).
func (p *proxy) toolsPage(ctx context.Context, cursor json.RawMessage) (json.RawMessage, error) {
	idJSON := strconv.Quote("airlock-tools-list-" + fetchRun + "-" + strconv.FormatUint(fetchSeq.Add(1), 10))
	key := mcp.Compact(json.RawMessage(idJSON))
	ch := make(chan mcp.Message, 1)
	p.mu.Lock()
	p.fetches[key] = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.fetches, key)
		p.mu.Unlock()
	}()
	if err := p.up.send(ctx, mcp.ToolsListRequest(idJSON, cursor)); err != nil {
		return nil, fmt.Errorf("sending tools/list: %w", err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, fmt.Errorf("the server answered tools/list with an error: %s", logText(m.Error))
		}
		return m.Result, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("no answer to tools/list: %w", ctx.Err())
	case <-p.up.done():
		return nil, errors.New("the server is gone")
	}
}

// ownAnswer takes m, a response, when it answers one of the proxy's own
// requests (toolsPage), and reports whether it did: the client never
// gets it.
func (p *proxy) ownAnswer(id mcp.ID, m mcp.Message) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, ch := range p.fetches {
		if mcp.NewID(json.RawMessage(k)).Same(id) {
			delete(p.fetches, k)
			ch <- m
			return true
		}
	}
	return false
}
