package client

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// submitGrace is how long a submit already sent is still waited for after
// the caller's context ends, and how long withdrawing the action may take.
const submitGrace = 5 * time.Second

// DecideOptions tunes Decide. The zero value waits in plain long polls.
type DecideOptions struct {
	// Every, when positive, bounds each long poll; OnPending is called
	// before each one with its number (0, 1, …) and the action as last
	// seen, for a caller that reports progress while a reviewer decides.
	Every     time.Duration
	OnPending func(n int, a *Action)
}

// AbandonedError is Decide's error when ctx ended while the action was
// pending: the caller gave up on the call, or ran out of time.
type AbandonedError struct {
	ActionID string
	// Err is ctx's error (context.Canceled or context.DeadlineExceeded).
	Err error
	// CancelErr is why withdrawing the action failed; nil when it was
	// cancelled.
	CancelErr error
}

func (e *AbandonedError) Error() string {
	if e.CancelErr != nil {
		return fmt.Sprintf("airlock: gave up on pending action %s (%v); cancelling it failed: %v", e.ActionID, e.Err, e.CancelErr)
	}
	return fmt.Sprintf("airlock: gave up on pending action %s (%v); it was cancelled", e.ActionID, e.Err)
}

func (e *AbandonedError) Unwrap() error { return e.Err }

// Decide is what a gate in front of a tool does with one call: it submits
// req and, while the action is pending, waits for its decision, returning
// the action once decided (or allowed, or denied, by policy).
//
// A submit once sent is seen through even if ctx ends meanwhile (for up
// to five seconds more), so that the action it created is always known;
// and when ctx ends while the action is pending, the action is cancelled,
// so that no reviewer approves a call that will not run. The error is then
// an *AbandonedError.
func (c *Client) Decide(ctx context.Context, req SubmitRequest, opt DecideOptions) (*Action, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // nothing sent
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(submitGrace, cancel) })
	a, err := c.Submit(sctx, req)
	stop()
	if err != nil {
		return nil, err
	}
	for n := 0; a.Pending(); n++ {
		if ctx.Err() != nil {
			return nil, c.withdraw(ctx, a.ID)
		}
		wctx, done := ctx, context.CancelFunc(func() {})
		if opt.Every > 0 {
			if opt.OnPending != nil {
				opt.OnPending(n, a)
			}
			wctx, done = context.WithTimeout(ctx, opt.Every)
		}
		next, err := c.Wait(wctx, a.ID)
		done()
		switch {
		case err == nil:
			a = next
		case ctx.Err() != nil:
			return nil, c.withdraw(ctx, a.ID)
		case !errors.Is(err, context.DeadlineExceeded):
			return nil, err
		}
		// Still pending at the end of a bounded poll: wait again.
	}
	return a, nil
}

// withdraw cancels the pending action id after ctx ended.
func (c *Client) withdraw(ctx context.Context, id string) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), submitGrace)
	defer cancel()
	_, err := c.Cancel(cctx, id)
	return &AbandonedError{ActionID: id, Err: ctx.Err(), CancelErr: err}
}
