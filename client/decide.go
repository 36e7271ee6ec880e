package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
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

// AbandonedError is Decide's error when it stopped waiting while the
// action was pending: ctx ended (the caller gave up on the call, or ran
// out of time), or waiting for the decision failed.
type AbandonedError struct {
	ActionID string
	// Err is why: ctx's error (context.Canceled or
	// context.DeadlineExceeded), or the error waiting for the decision.
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
// so that no reviewer approves a call that will not run. So is it when
// waiting for the decision fails: at once on an answer that is not one
// (4xx, a body that does not decode), after pollRetries tries on a
// failure that may pass (no answer, 502, 503, 504: a restart, a proxy's
// read timeout). The error is then an *AbandonedError.
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
	failures := 0 // polls failed in a row
	for n := 0; a.Pending(); n++ {
		if ctx.Err() != nil {
			return nil, c.withdraw(ctx, a.ID, ctx.Err())
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
			a, failures = next, 0
		case ctx.Err() != nil:
			return nil, c.withdraw(ctx, a.ID, ctx.Err())
		case errors.Is(err, context.DeadlineExceeded):
			// Still pending at the end of a bounded poll: wait again.
		case mayPass(err) && failures < pollRetries:
			failures++
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(failures) * pollBackoff):
			}
			n-- // the same poll again
		default:
			return nil, c.withdraw(ctx, a.ID, err)
		}
	}
	return a, nil
}

// pollRetries is how many times in a row Decide tries a long poll again
// after a failure that may pass, pollBackoff×n apart.
const (
	pollRetries = 4
	pollBackoff = 500 * time.Millisecond
)

// mayPass reports whether a failed poll may succeed if tried again: no
// answer at all, or a gateway's or an unavailable server's.
func mayPass(err error) bool {
	if _, ok := errors.AsType[*url.Error](err); ok {
		return true // the request did not get an answer
	}
	e, ok := errors.AsType[*Error](err)
	return ok && (e.Status == http.StatusBadGateway || e.Status == http.StatusServiceUnavailable || e.Status == http.StatusGatewayTimeout)
}

// withdraw cancels the pending action id, given up on because of why.
func (c *Client) withdraw(ctx context.Context, id string, why error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), submitGrace)
	defer cancel()
	_, err := c.Cancel(cctx, id)
	return &AbandonedError{ActionID: id, Err: why, CancelErr: err}
}
