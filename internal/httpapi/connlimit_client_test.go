package httpapi_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestClientWaitRetriesWhenOverTheCap: the Go client's Wait, refused
// because its agent holds every long poll it may, waits Retry-After and
// polls again, and returns the decision once a slot was free, instead of
// failing the agent's call.
func TestClientWaitRetriesWhenOverTheCap(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{MaxLongPolls: 1})
	ctx := env.Ctx()
	agent := env.Agent("waiter", designPolicy)
	rita := env.Reviewer("rita")
	first := submit(t, agent, "email.send", map[string]any{"n": 1})
	second := submit(t, agent, "email.send", map[string]any{"n": 2})
	held := longPoll(ctx, agent, first.ID)
	waitHeld(t, env, "long_poll", 1)

	type waited struct {
		a   *client.Action
		err error
	}
	done := make(chan waited, 1)
	go func() {
		a, err := agent.Wait(ctx, second.ID)
		done <- waited{a, err}
	}()
	// Wait was refused at least once...
	for heldMetric(t, env, "airlock_held_requests_refused_total", "long_poll") == 0 {
		select {
		case w := <-done:
			t.Fatalf("Wait returned while the slot was taken: %v %v", w.a, w.err)
		case <-ctx.Done():
			t.Fatal("Wait was never refused")
		case <-time.After(5 * time.Millisecond):
		}
	}
	// ...and takes the slot once the first poll returns.
	_, err := rita.Deny(ctx, first.ID, "no")
	require.NoError(t, err)
	require.NoError(t, answered(t, ctx, held).err)
	waitHeld(t, env, "long_poll", 1)
	full, err := rita.Get(ctx, second.ID)
	require.NoError(t, err)
	_, err = rita.Approve(ctx, second.ID, full.ConfirmationPhrase, "")
	require.NoError(t, err)
	select {
	case w := <-done:
		require.NoError(t, w.err)
		assert.Equal(t, "approved", w.a.Status)
	case <-ctx.Done():
		t.Fatal("Wait never returned")
	}
}
