package httpapi_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apptest"
)

func TestPendingActionSurvivesRestart(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{ExpiryEvery: time.Hour}) // only the start-up sweep expires
	agent := env.Agent("durable", map[string]any{"rules": []map[string]any{
		{"id": "slow", "tool": "email.send", "effect": "approve", "timeout": "1h"},
		{"id": "fast", "tool": "sms.send", "effect": "approve", "timeout": "1s"},
	}})
	alice := env.Reviewer("alice")
	ctx := env.Ctx()

	long := submit(t, agent, "email.send", map[string]any{"to": "x@example.com"})
	short := submit(t, agent, "sms.send", map[string]any{"to": "+100"})
	full, err := alice.Get(ctx, long.ID)
	require.NoError(t, err)

	env.Stop()
	time.Sleep(time.Until(*short.ExpiresAt) + 100*time.Millisecond) // expires while the server is down
	env.Restart()

	// Sessions issued before the restart still work (same key, same
	// database); the new server listens on a new port.
	reviewer := env.Anon.WithToken(alice.Token())
	got, err := reviewer.Get(ctx, long.ID)
	require.NoError(t, err)
	assert.Equal(t, "pending", got.Status)
	assert.Equal(t, full.ConfirmationPhrase, got.ConfirmationPhrase)

	approved, err := reviewer.Approve(ctx, long.ID, full.ConfirmationPhrase, "")
	require.NoError(t, err)
	assert.Equal(t, "approved", approved.Status)

	expired, err := reviewer.Get(ctx, short.ID)
	require.NoError(t, err)
	assert.Equal(t, "expired", expired.Status, "expired at start, before any sweep interval")

	page, err := env.Admin.Audit(ctx, url.Values{"action_id": {short.ID}, "kind": {"action.expired"}})
	require.NoError(t, err)
	assert.Len(t, page.Events, 1)
}
