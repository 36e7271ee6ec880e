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
}
