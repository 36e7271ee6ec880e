package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

var decidePolicy = map[string]any{"rules": []map[string]any{
	{"id": "read", "tool": "files.read", "effect": "allow"},
	{"id": "send", "tool": "email.send", "effect": "approve"},
}}

// TestDecide drives client.Decide against a real server: an allowed call,
// a pending one approved while progress is reported, and the calls given
// up on: each pending action is withdrawn (cancelled), also when the
// caller gives up while its submit is on the wire.
func TestDecide(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("coder", decidePolicy)
	reviewer := env.Reviewer("rita")
	ctx := env.Ctx()

	t.Run("allowed by policy", func(t *testing.T) {
		a, err := agent.Decide(ctx, client.SubmitRequest{Tool: "files.read", Args: map[string]any{"path": "/a"}}, client.DecideOptions{})
		require.NoError(t, err)
		assert.Equal(t, "approved", a.Status)
		assert.Equal(t, "policy", a.Decision.By)
	})

	t.Run("pending, progress reported, approved", func(t *testing.T) {
		type poll struct {
			n int
			a *client.Action
		}
		polls := make(chan poll, 100)
		done := make(chan error, 1)
		var got *client.Action
		go func() {
			var err error
			got, err = agent.Decide(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x"}},
				client.DecideOptions{Every: 50 * time.Millisecond, OnPending: func(n int, a *client.Action) { polls <- poll{n, a} }})
			done <- err
		}()
		first, second := <-polls, <-polls
		assert.Equal(t, []int{0, 1}, []int{first.n, second.n}, "polls are numbered from 0")
		assert.Equal(t, first.a.ID, second.a.ID)
		assert.Equal(t, "pending", second.a.Status)
		p, err := reviewer.Get(ctx, first.a.ID)
		require.NoError(t, err)
		_, err = reviewer.Approve(ctx, p.ID, p.ConfirmationPhrase, "")
		require.NoError(t, err)
		require.NoError(t, <-done)
		assert.Equal(t, "approved", got.Status)
		assert.Equal(t, "rita", got.Decision.By)
	})

	t.Run("given up before it starts: nothing submitted", func(t *testing.T) {
		dctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := agent.Decide(dctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "early"}}, client.DecideOptions{})
		require.ErrorIs(t, err, context.Canceled)
		_, isAbandoned := errors.AsType[*client.AbandonedError](err)
		assert.False(t, isAbandoned, "no action was created")
		page, err := reviewer.ListActions(ctx, url.Values{"tool": {"email.send"}})
		require.NoError(t, err)
		for _, a := range page.Actions {
			assert.NotEqual(t, "early", a.Args["to"], "a call given up on before it started reached Airlock")
		}
	})

	t.Run("out of time: the pending action withdrawn", func(t *testing.T) {
		dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := agent.Decide(dctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "y"}}, client.DecideOptions{})
		abandoned, ok := errors.AsType[*client.AbandonedError](err)
		require.True(t, ok, "%v", err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NoError(t, abandoned.CancelErr)
		a, err := reviewer.Get(ctx, abandoned.ActionID)
		require.NoError(t, err)
		assert.Equal(t, "cancelled", a.Status)
	})

	t.Run("given up while the submit is on the wire: the action still found and withdrawn", func(t *testing.T) {
		// A proxy holds the server's answer to the submit until the caller
		// has given up: a caller that abandoned its request then would
		// never learn the pending action it created.
		upstream, err := url.Parse(env.URL)
		require.NoError(t, err)
		landed, release := make(chan struct{}), make(chan struct{})
		var submits atomic.Int32
		rp := httputil.NewSingleHostReverseProxy(upstream)
		rp.ModifyResponse = func(r *http.Response) error {
			if r.Request.Method == http.MethodPost && r.Request.URL.Path == "/api/v1/actions" && submits.Add(1) == 1 {
				close(landed)
				select {
				case <-release:
				case <-r.Request.Context().Done():
				}
			}
			return nil
		}
		proxy := httptest.NewServer(rp)
		defer proxy.Close()
		viaProxy := client.New(proxy.URL, agent.Token())

		dctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := viaProxy.Decide(dctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "z"}}, client.DecideOptions{})
			done <- err
		}()
		<-landed // the action exists, pending; its id has not reached the caller
		cancel()
		select {
		case err = <-done: // a caller that dropped its submit returns at once
		case <-time.After(200 * time.Millisecond):
		}
		close(release)
		if err == nil {
			err = <-done
		}
		abandoned, ok := errors.AsType[*client.AbandonedError](err)
		require.True(t, ok, "the caller must learn the action it created: %v", err)
		assert.ErrorIs(t, err, context.Canceled)
		assert.NoError(t, abandoned.CancelErr)
		a, err := reviewer.Get(ctx, abandoned.ActionID)
		require.NoError(t, err)
		assert.Equal(t, "cancelled", a.Status, "no reviewer may approve a call nobody waits for")
		page, err := reviewer.ListActions(ctx, url.Values{"status": {"pending"}})
		require.NoError(t, err)
		assert.Empty(t, page.Actions, "nothing left pending")
	})
	// A proxy in front of the server answers the long polls (GET with
	// wait=) with what poll says, or passes them on.
	viaPollProxy := func(t *testing.T, poll func(n int32, w http.ResponseWriter) bool) *client.Client {
		upstream, err := url.Parse(env.URL)
		require.NoError(t, err)
		rp := httputil.NewSingleHostReverseProxy(upstream)
		var polls atomic.Int32
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && r.URL.Query().Has("wait") && poll(polls.Add(1), w) {
				return
			}
			rp.ServeHTTP(w, r)
		}))
		t.Cleanup(proxy.Close)
		return client.New(proxy.URL, agent.Token())
	}
	withdrawn := func(t *testing.T, err error) *client.AbandonedError {
		t.Helper()
		abandoned, ok := errors.AsType[*client.AbandonedError](err)
		require.True(t, ok, "the caller must learn the action it gave up on: %v", err)
		assert.NoError(t, abandoned.CancelErr)
		a, err := reviewer.Get(ctx, abandoned.ActionID)
		require.NoError(t, err)
		assert.Equal(t, "cancelled", a.Status, "no reviewer may approve a call nobody waits for")
		return abandoned
	}

	// Before, a poll that failed left the action pending: the agent was
	// told no while a reviewer could still approve (found by a review).
	t.Run("a poll answered with what is no answer: withdrawn at once", func(t *testing.T) {
		cl := viaPollProxy(t, func(_ int32, w http.ResponseWriter) bool {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"id":"x","status":"appr`))
			return true
		})
		_, err := cl.Decide(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "truncated"}}, client.DecideOptions{})
		withdrawn(t, err)
	})

	t.Run("a gateway that keeps failing: withdrawn after a few tries", func(t *testing.T) {
		var tries atomic.Int32
		cl := viaPollProxy(t, func(n int32, w http.ResponseWriter) bool {
			tries.Store(n)
			w.WriteHeader(http.StatusBadGateway)
			return true
		})
		_, err := cl.Decide(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "gateway"}}, client.DecideOptions{})
		abandoned := withdrawn(t, err)
		assert.Equal(t, http.StatusBadGateway, client.StatusOf(abandoned.Err))
		assert.Equal(t, int32(5), tries.Load(), "the poll and four tries again")
	})

	t.Run("a gateway that fails twice: still waited for, then approved", func(t *testing.T) {
		started := make(chan struct{})
		cl := viaPollProxy(t, func(n int32, w http.ResponseWriter) bool {
			if n > 2 {
				if n == 3 {
					close(started)
				}
				return false
			}
			w.WriteHeader(http.StatusGatewayTimeout)
			return true
		})
		done := make(chan error, 1)
		var got *client.Action
		go func() {
			var err error
			got, err = cl.Decide(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "flaky"}}, client.DecideOptions{})
			done <- err
		}()
		select {
		case <-started:
		case err := <-done:
			require.FailNow(t, "gave up on a gateway that failed twice", "%v", err)
		}
		page, err := reviewer.ListActions(ctx, url.Values{"status": {"pending"}, "tool": {"email.send"}})
		require.NoError(t, err)
		require.Len(t, page.Actions, 1)
		_, err = reviewer.Approve(ctx, page.Actions[0].ID, page.Actions[0].ConfirmationPhrase, "")
		require.NoError(t, err)
		require.NoError(t, <-done)
		assert.Equal(t, "approved", got.Status)
	})
}
