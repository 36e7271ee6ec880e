package mcpgateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/airlockhq/airlock/internal/mcp"
)

// One Airlock name, one upstream tool (mcp.ToolCache, internal/mcp's
// toolnames.go): the gateway removes from the tool lists it relays the
// tools whose names share an Airlock name, and refuses a tools/call of
// such a name. It may be one of several instances, none of which saw the
// session's tools/list: it keeps each list it relayed or read in its
// mcp.ToolCache (for mcp.ToolListTTL, bounded in lists and names) under
// the registration, its version and the upstream's session, and reads it
// itself, on the client's session, with requests of its own (tools/list,
// every page), when it holds none fresh.

// toolsKey is the key of the tool list of the session r belongs to (its
// upstream Mcp-Session-Id, "" for a server without sessions) on reg's
// version.
func toolsKey(reg mcp.Registration, r *http.Request) string {
	return reg.Name + "\x00" + strconv.Itoa(reg.Version) + "\x00" + r.Header.Get("Mcp-Session-Id")
}

// checkTool is nil when the gated request p may go on to be decided,
// else why it does not run (mcp.ToolCache.CheckCall).
func (g *Gateway) checkTool(r *http.Request, reg mcp.Registration, p mcp.Call) error {
	if p.Method != mcp.MethodToolsCall {
		return nil
	}
	return g.tools.CheckCall(r.Context(), toolsKey(reg, r), reg.Name, p.Name, g.toolsPage(r, reg))
}

// takeInto adds to f what the client gets of raw, a response with id,
// when it answers one of the client's requests (ex.take): as it came, or,
// answering a tools/list, without the tools that share an Airlock name
// (mcp.ToolCache.ListAnswer; the whole list read first when it must be).
func (ex *exchange) takeInto(f *filtered, id json.RawMessage, raw []byte) bool {
	i := ex.take(id)
	if i < 0 {
		return false
	}
	out := raw
	if ex.lists[i] && ex.r != nil {
		out, _ = ex.g.tools.ListAnswer(ex.r.Context(), toolsKey(ex.reg, ex.r), ex.reg.Name, ex.firsts[i], raw,
			ex.g.toolsPage(ex.r, ex.reg), ex.g.log)
	}
	f.msgs = append(f.msgs, out)
	f.changed = f.changed || !bytes.Equal(out, raw)
	return true
}

// toolsPage asks the upstream of reg, on the session of the client's
// request r, for one page of its tool list (mcp.PageFunc).
func (g *Gateway) toolsPage(r *http.Request, reg mcp.Registration) mcp.PageFunc {
	return func(ctx context.Context, cursor json.RawMessage) (json.RawMessage, error) {
		var n [12]byte
		_, _ = rand.Read(n[:])
		id := strconv.Quote("airlock-tools-list-" + hex.EncodeToString(n[:]))
		headers, err := g.headers(reg)
		if err != nil {
			return nil, fmt.Errorf("the registration is refused now: %w", err)
		}
		up, err := http.NewRequestWithContext(ctx, http.MethodPost, reg.URL, bytes.NewReader(mcp.ToolsListRequest(id, cursor)))
		if err != nil {
			return nil, err
		}
		up.Header.Set("Content-Type", typeJSON)
		up.Header.Set("Accept", typeJSON+", "+typeEvents)
		for _, h := range []string{"Mcp-Session-Id", "Mcp-Protocol-Version"} {
			if v := r.Header.Get(h); v != "" {
				up.Header.Set(h, v)
			}
		}
		for h, v := range headers {
			up.Header.Set(h, v)
		}
		resp, err := g.client(reg).Do(up)
		if err != nil {
			return nil, fmt.Errorf("the MCP server could not be reached: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return nil, fmt.Errorf("the MCP server answered tools/list with %d", resp.StatusCode)
		}
		want := mcp.NewID(json.RawMessage(id))
		var found *mcp.Message
		take := func(data []byte) {
			_, msgs, _, err := mcp.ReadMessages(bytes.TrimPrefix(bytes.TrimSpace(data), bom))
			if err != nil {
				return
			}
			for i := range msgs {
				if msgs[i].IsResponse() && want.Same(mcp.NewID(msgs[i].ID)) {
					found = &msgs[i]
				}
			}
		}
		switch mediaType(resp.Header) {
		case typeJSON:
			data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResultBytes+1))
			if err != nil || len(data) > MaxResultBytes {
				return nil, errors.New("the MCP server's answer to tools/list could not be read whole")
			}
			take(data)
		case typeEvents:
			er := mcp.NewEventReader(resp.Body, MaxResultBytes)
			for found == nil {
				ev, err := er.Next()
				if ev.HasData && !ev.Over {
					take(ev.Data)
				}
				if err != nil {
					break
				}
			}
		default:
			return nil, errors.New("the MCP server answered tools/list with a Content-Type that is neither application/json nor text/event-stream")
		}
		switch {
		case found == nil:
			return nil, errors.New("the MCP server did not answer tools/list")
		case found.Error != nil:
			return nil, fmt.Errorf("the MCP server answered tools/list with an error: %s", logText(found.Error))
		}
		return found.Result, nil
	}
}
