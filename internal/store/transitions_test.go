package store_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

// workerFor records a worker token for the target "workspace:w" and
// returns the worker "host" that calls with it, asking for kinds.
func workerFor(t *testing.T, s *store.Store, kinds ...string) hitl.Worker {
	t.Helper()
	tok := auth.Token{ID: auth.NewTokenID(), Kind: auth.KindWorker, Subject: "host", ExpiresAt: time.Now().Add(time.Hour),
		Targets: []string{"workspace:w"}}
	require.NoError(t, s.RecordToken(ctxT(t), tok, "admin", audit.Event{Kind: audit.KindTokenIssued, Actor: "admin"}))
	return hitl.Worker{Name: "host", TokenID: tok.ID, Kinds: kinds, Targets: []string{"workspace:w"}}
}

// TestStoreTransitionsFollowTheTable walks every status against every
// status change the store makes in SQL (lease, complete, requeue,
// interrupt, expiry, stop): an action in status `from` moves to the
// Move's To exactly when the transitions table (through the Move) allows
// from → To, and is left as it was otherwise.
func TestStoreTransitionsFollowTheTable(t *testing.T) {
	t.Parallel()
	s := store.New(testdb.New(t), nil)
	ctx := ctxT(t)
	pool := s.Pool()
	w := workerFor(t, s, hitl.ToolExec)

	// actionIn stores an action of a new agent in status from and returns
	// its id and the agent's.
	actionIn := func(from hitl.Status) (string, string) {
		agent := "bot-" + string(from) + "-" + uuid.NewString()[:8]
		_, err := s.CreateAgent(ctx, store.Agent{ID: agent, Name: agent, CreatedBy: "admin"})
		require.NoError(t, err)
		a := newAction(agent, hitl.StatusApproved, "", "")
		a.Tool = hitl.ToolExec
		require.NoError(t, insert(t, s, a, hitl.Guard{}))
		_, err = pool.Exec(ctx, `UPDATE actions SET status = $2, expires_at = now() - interval '1 second' WHERE id = $1`, a.ID, from)
		require.NoError(t, err)
		return a.ID, agent
	}
	job := func(actionID, state string, maxAttempts int, leaseLeft time.Duration) string {
		id := uuid.Must(uuid.NewV7()).String()
		_, err := pool.Exec(ctx, `INSERT INTO jobs (id, action_id, kind, target, state, max_attempts, attempts, fence, worker, token_id, lease_expires_at)
			VALUES ($1, $2, 'exec', 'workspace:w', $3, $4, 1, 1, CASE WHEN $3 = 'leased' THEN 'host' END, CASE WHEN $3 = 'leased' THEN $5 END,
				CASE WHEN $3 = 'leased' THEN now() + $6 * interval '1 millisecond' END)`,
			id, actionID, state, maxAttempts, w.TokenID, leaseLeft.Milliseconds())
		require.NoError(t, err)
		return id
	}
	statusOf := func(id string) hitl.Status {
		a, err := s.Action(ctx, id)
		require.NoError(t, err)
		return a.Status
	}
	// retire ends whatever a case left queued or leased, so that cases
	// never see each other's jobs.
	retire := func() {
		_, err := pool.Exec(ctx, `UPDATE jobs SET state = 'done' WHERE state <> 'done'`)
		require.NoError(t, err)
	}

	ops := []struct {
		name string
		move hitl.Move
		run  func(t *testing.T, ctx context.Context, actionID, agent string)
	}{
		{"lease", hitl.MoveLease, func(t *testing.T, ctx context.Context, id, _ string) {
			job(id, "queued", 1, 0)
			_, err := s.LeaseJob(ctx, w, time.Minute)
			require.NoError(t, err)
		}},
		{"complete succeeded", hitl.MoveSucceed, func(t *testing.T, ctx context.Context, id, _ string) {
			j := job(id, "leased", 1, time.Minute)
			_, _ = s.CompleteJob(ctx, j, 1, w, hitl.MoveSucceed, json.RawMessage(`{"exit_code":0}`), nil)
		}},
		{"complete failed", hitl.MoveFail, func(t *testing.T, ctx context.Context, id, _ string) {
			j := job(id, "leased", 1, time.Minute)
			_, _ = s.CompleteJob(ctx, j, 1, w, hitl.MoveFail, json.RawMessage(`{"exit_code":1}`), nil)
		}},
		{"requeue", hitl.MoveRequeue, func(t *testing.T, ctx context.Context, id, _ string) {
			job(id, "leased", 3, -time.Second)
			_, err := s.ExpireLeases(ctx, 100)
			require.NoError(t, err, "a lease of an action that is not running is retired, never an error that blocks the sweep")
		}},
		{"interrupt", hitl.MoveInterrupt, func(t *testing.T, ctx context.Context, id, _ string) {
			job(id, "leased", 1, -time.Second)
			_, err := s.ExpireLeases(ctx, 100)
			require.NoError(t, err)
		}},
		{"expire", hitl.MoveExpire, func(t *testing.T, ctx context.Context, _, _ string) {
			_, err := s.ExpireDue(ctx, 100)
			require.NoError(t, err)
		}},
		{"stop", hitl.MoveStop, func(t *testing.T, ctx context.Context, _, agent string) {
			_, err := s.SuspendAgent(ctx, agent, "admin", "walk")
			require.NoError(t, err)
		}},
	}
	for _, op := range ops {
		for _, from := range hitl.Statuses() {
			id, agent := actionIn(from)
			op.run(t, ctx, id, agent)
			retire()
			want := from
			if slices.Contains(op.move.From, from) {
				want = op.move.To
				assert.True(t, hitl.CanTransition(from, want), "%s: %s -> %s moved but the table does not allow it", op.name, from, want)
			}
			assert.Equal(t, want, statusOf(id), "%s from %s", op.name, from)
		}
	}
}
