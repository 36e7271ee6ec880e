package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/mcp"
)

// gate decides on one tools/call in the background (other messages keep
// flowing while it waits for a reviewer): approved, line goes upstream and
// its answer is reported; otherwise the client gets an isError result.
func (p *proxy) gate(ctx context.Context, id json.RawMessage, call mcp.Call, line []byte) {
	key := mcp.Compact(id)
	gctx, stop := context.WithCancel(ctx)
	p.mu.Lock()
	if _, busy := p.held[key]; busy || p.forwarded[key] != nil {
		p.mu.Unlock()
		stop()
		p.writeRPCError(id, -32600, "a request with this id is still in progress")
		return
	}
	p.held[key] = stop
	p.mu.Unlock()
	p.gates.Add(1)
	go func() {
		defer p.gates.Done()
		defer stop()
		a, err := p.decide(gctx, id, call)
		p.mu.Lock()
		delete(p.held, key)
		if err == nil && a.Status == "approved" {
			p.forwarded[key] = a
		}
		p.mu.Unlock()
		switch {
		case gctx.Err() != nil && ctx.Err() == nil:
			// The client cancelled the request: it expects no answer.
		case err != nil:
			p.log.Warn("mcp proxy: tool call not forwarded", "server", p.c.Server, "tool", call.Name, "err", err)
			p.writeJSON(mcp.ToolError(id, mcp.Undecided(errText(err))))
		case a.Status != "approved":
			p.writeJSON(mcp.ToolError(id, refusal(a)))
		default:
			p.toUpstream(ctx, line)
		}
	}()
}

// decide submits the call and waits while it is pending. When the wait
// ends without a decision (the client cancelled, the proxy stops) the
// pending action is cancelled, so no reviewer approves what will not run.
func (p *proxy) decide(ctx context.Context, id json.RawMessage, call mcp.Call) (*client.Action, error) {
	req := client.SubmitRequest{Tool: mcp.ToolName(p.c.Server, call.Name), Args: call.Arguments,
		ConversationID: p.c.Conversation}
	if len(call.CorrelationID) <= 128 {
		req.CorrelationID = call.CorrelationID
	}
	a, err := p.c.Client.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	for n := 0; a.Pending(); n++ {
		wait := hitlMaxWait
		if call.ProgressToken != nil {
			p.writeJSON(mcp.Progress(call.ProgressToken, n, mcp.Waiting(a.Tool, a.ID)))
			wait = p.c.ProgressEvery
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		next, err := p.c.Client.Wait(wctx, a.ID)
		cancel()
		switch {
		case err == nil:
			a = next
		case ctx.Err() != nil:
			p.withdraw(a.ID)
			return nil, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			// Still pending: wait again (and tell the client).
		default:
			return nil, err
		}
	}
	return a, nil
}

// hitlMaxWait is one long poll's length when no progress is asked for.
const hitlMaxWait = 60 * time.Second

// withdraw cancels a pending action nobody waits for any more.
func (p *proxy) withdraw(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p.c.Client.Cancel(ctx, id); err != nil {
		p.log.Warn("mcp proxy: cancelling a call nobody waits for", "action", id, "err", err)
	}
}

// reported reports the upstream's answer m to the approved action a and
// returns what the client gets: the answer, unless Airlock's scan of the
// result says to withhold it, truncated to MaxResultBytes. A result that
// could not be reported (so not scanned) is withheld: fail closed.
func (p *proxy) reported(a *client.Action, m mcp.Message) []byte {
	res := client.Result{Outcome: "succeeded", Output: m.Result}
	if m.Error != nil {
		res = client.Result{Outcome: "failed", Error: string(m.Error)}
	} else {
		var tr struct {
			IsError bool `json:"isError"`
		}
		if json.Unmarshal(m.Result, &tr) == nil && tr.IsError {
			res.Outcome = "failed"
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done, err := p.c.Client.ReportResult(ctx, a.ID, res)
	if err != nil {
		p.log.Warn("mcp proxy: reporting a tool result", "action", a.ID, "err", err)
		b, _ := json.Marshal(mcp.ToolError(m.ID, "Airlock could not record this tool call's result, so it is withheld: "+errText(err)))
		return b
	}
	if m.Error != nil {
		b, _ := json.Marshal(m)
		return b
	}
	finding := ""
	if action, findings := mcp.InjectionVerdict(done.Result); action == "redact" && len(findings) > 0 {
		finding = findings[0]
	}
	shaped := mcp.ShapeResult(m.Result, p.c.MaxResultBytes, finding)
	b, _ := json.Marshal(mcp.Message{JSONRPC: "2.0", ID: m.ID, Result: shaped})
	return b
}

// refusal is the text the model reads for an action that will not run.
func refusal(a *client.Action) string {
	reason := a.Decision.Reason
	if reason == "" {
		reason = a.Reason
	}
	return mcp.Refusal(a.Tool, a.ID, a.Status, reason)
}

// errText is an error as the model reads it: Airlock's message when the
// server answered, else what went wrong reaching it.
func errText(err error) string {
	var ae *client.Error
	if errors.As(err, &ae) {
		if ae.Code == "internal" || ae.Status >= 500 {
			return "Airlock answered with a server error"
		}
		return ae.Message
	}
	return "Airlock could not be reached (" + err.Error() + ")"
}
