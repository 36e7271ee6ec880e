package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/mcp"
)

// gate decides on one gated request (a tools/call, resources/read or
// prompts/get) in the background (other messages keep flowing while it
// waits for a reviewer): approved, line goes upstream and its answer is
// reported; otherwise the client gets an isError result (mcp.Refused: a
// JSON-RPC error for the methods other than tools/call).
func (p *proxy) gate(ctx context.Context, id json.RawMessage, call mcp.Call, line []byte) {
	key := mcp.Compact(id)
	cid := mcp.NewID(id)
	gctx, stop := context.WithCancel(ctx)
	p.mu.Lock()
	_, fwd := p.forwardedLocked(cid)
	busy := fwd != nil || p.heldLocked(cid) != nil
	for _, r := range p.pending {
		busy = busy || r.id.Same(cid)
	}
	if busy {
		// The answer to the other request would be taken for this call's.
		p.mu.Unlock()
		stop()
		p.writeRPCError(id, -32600, "a request with this id is still in progress")
		return
	}
	p.held[key] = &heldCall{id: cid, stop: stop}
	p.mu.Unlock()
	p.gates.Go(func() {
		defer stop()
		if err := p.checkTool(gctx, call); err != nil {
			// Its name shares an Airlock name with another tool of the
			// server, or the list to tell could not be read: not run,
			// not submitted (tools.go).
			p.mu.Lock()
			delete(p.held, key)
			cancelled := gctx.Err() != nil && ctx.Err() == nil
			p.mu.Unlock()
			p.log.Warn("mcp proxy: tool call refused", "server", p.c.Server, "tool", call.Name, "err", err)
			if !cancelled {
				p.writeJSON(mcp.Refused(call.Method, id, mcp.CheckCallText(err)))
			}
			return
		}
		a, err := p.decide(gctx, id, call)
		p.mu.Lock()
		delete(p.held, key)
		// Read under p.mu: cancelHeld stops a held call under it.
		cancelled := gctx.Err() != nil && ctx.Err() == nil
		approved := err == nil && a.Status == "approved"
		if approved && !cancelled {
			p.forwarded[key] = &fwdCall{id: cid, method: call.Method, action: a}
		}
		p.mu.Unlock()
		switch {
		case cancelled && approved:
			// Approved as the client cancelled: never sent, so neither
			// awaited (its id free again, an upstream's answer with it
			// not taken for the result) nor left approved without a
			// result: the audit says it did not run.
			p.log.Info("mcp proxy: an approved call the client cancelled was not sent", "action", a.ID)
			p.reports.Go(func() { p.fail(a, mcp.NotSentAfterCancel) })
		case cancelled:
			// The client cancelled the request: it expects no answer.
		case err != nil:
			p.log.Warn("mcp proxy: tool call not forwarded", "server", p.c.Server, "tool", call.Name, "err", err)
			p.writeJSON(mcp.Refused(call.Method, id, mcp.Undecided(call.Method, errText(err))))
		case a.Status != "approved":
			p.writeJSON(mcp.Refused(call.Method, id, refusal(a)))
		default:
			if err := p.up.send(ctx, line); err != nil {
				// Never reached the server: it did not run.
				p.log.Warn("mcp proxy: sending to the MCP server", "err", err)
				p.mu.Lock()
				delete(p.forwarded, key)
				p.mu.Unlock()
				p.reports.Go(func() { p.fail(a, "the MCP server could not be sent the call") })
				p.writeJSON(mcp.Refused(call.Method, id, "Airlock approved this call but the MCP server could not be reached; it was not run."))
			}
		}
	})
}

// decide submits the call and waits while it is pending (client.Decide:
// when the wait ends without a decision, the client cancelled or the
// proxy stops, the pending action is cancelled, so no reviewer approves
// what will not run). A client that asked for progress hears from it
// every ProgressEvery.
func (p *proxy) decide(ctx context.Context, id json.RawMessage, call mcp.Call) (*client.Action, error) {
	req := client.SubmitRequest{Tool: mcp.ToolName(p.c.Server, call.Name), Args: call.Arguments,
		ConversationID: p.c.Conversation}
	if len(call.CorrelationID) <= 128 {
		req.CorrelationID = call.CorrelationID
	}
	var opt client.DecideOptions
	if call.ProgressToken != nil {
		opt = client.DecideOptions{Every: p.c.ProgressEvery, OnPending: func(n int, a *client.Action) {
			p.writeJSON(mcp.Progress(call.ProgressToken, n, mcp.Waiting(a.Tool, a.ID)))
		}}
	}
	a, err := p.c.Client.Decide(ctx, req, opt)
	if abandoned, ok := errors.AsType[*client.AbandonedError](err); ok && abandoned.CancelErr != nil {
		p.log.Warn("mcp proxy: cancelling a call nobody waits for", "action", abandoned.ActionID, "err", abandoned.CancelErr)
		if errors.Is(abandoned.Err, context.Canceled) {
			p.failIfApproved(abandoned.ActionID)
		}
	}
	return a, err
}

// failIfApproved reports action id failed (mcp.NotSentAfterCancel) when
// it is approved: withdrawing a call its client cancelled failed because
// a reviewer approved it meanwhile, and it will not be sent.
func (p *proxy) failIfApproved(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := p.c.Client.Get(ctx, id)
	if err != nil {
		p.log.Warn("mcp proxy: reading an action given up on", "action", id, "err", err)
		return
	}
	if a.Status == "approved" {
		p.fail(a, mcp.NotSentAfterCancel)
	}
}

// reported reports the upstream's answer m (raw as received) to the
// forwarded call f and returns what the client gets (mcp.Relay:
// truncated, withheld on a redact verdict or a report that failed when a
// verdict was needed, answered before the report when nothing could be
// withheld; with the client's id as it spelled it).
func (p *proxy) reported(f *fwdCall, m mcp.Message, raw []byte) []byte {
	return p.relay(f).Answer(f.id.Raw, m, raw)
}

// relay is the mcp.Relay that reports f's result.
func (p *proxy) relay(f *fwdCall) mcp.Relay {
	a := f.action
	report := func(r mcp.ResultReport) (json.RawMessage, error) {
		res := client.Result{Outcome: r.Outcome, Error: r.Error}
		if r.Output != nil {
			res.Output = r.Output
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done, err := p.c.Client.ReportResult(ctx, a.ID, res)
		if err != nil {
			p.log.Warn("mcp proxy: reporting a tool result", "action", a.ID, "err", err)
			return nil, err
		}
		return done.Result, nil
	}
	return mcp.Relay{Method: f.method, MaxBytes: p.c.MaxResultBytes, Report: report, Later: p.reports.Go}
}

// refusal is the text the model reads for an action that will not run.
func refusal(a *client.Action) string {
	return mcp.Refusal(a.Tool, a.ID, a.Status, a.Decision.Reason, a.Reason)
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
