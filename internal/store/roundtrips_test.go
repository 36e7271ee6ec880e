package store_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

// roundTrips counts what a connection sends PostgreSQL and waits for: a
// query, or a batch (pipelined statements). A statement's first prepare is
// not counted: the figures are of prepared statements, as a running
// server's are.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestCompletionRoundTrips: a worker waits on its completion, and on this
// project's machine each round trip to PostgreSQL after a run's idle time
// costs ~0.45 ms (issue 14). Completing a run takes two: the job and its
// action's move with BEGIN, the audit event with COMMIT. A preview's
// completion takes three (its action's update depends on what it finds).
func TestCompletionRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	cfg, err := pgxpool.ParseConfig(testdb.URL(t))
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["role"] = store.AppRole
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := store.New(pool, nil)

	tok := auth.Token{ID: auth.NewTokenID(), Kind: auth.KindWorker, Subject: "host", ExpiresAt: time.Now().Add(time.Hour),
		Targets: []string{"workspace:w"}}
	require.NoError(t, s.RecordToken(ctx, tok, "admin", audit.Event{Kind: audit.KindTokenIssued, Actor: "admin"}))
	w := hitl.Worker{Name: "host", TokenID: tok.ID, Kinds: []string{hitl.ToolExec, hitl.JobPreview}, Targets: []string{"workspace:w"}}
	_, err = s.CreateAgent(ctx, store.Agent{ID: "bot", Name: "bot", CreatedBy: "admin"})
	require.NoError(t, err)
	// leased stores an action in status st with a job of kind leased by w.
	leased := func(st hitl.Status, kind string) (job string) {
		a := newAction("bot", st, "", "")
		a.Tool = hitl.ToolExec
		require.NoError(t, insert(t, s, a, hitl.Guard{}))
		job = uuid.Must(uuid.NewV7()).String()
		_, err := pool.Exec(ctx, `INSERT INTO jobs (id, action_id, kind, target, state, max_attempts, attempts, fence, worker, token_id, lease_expires_at)
			VALUES ($1, $2, $3, 'workspace:w', 'leased', 1, 1, 1, 'host', $4, now() + interval '1 minute')`, job, a.ID, kind, tok.ID)
		require.NoError(t, err)
		return job
	}
	complete := func(job string, m hitl.Move) (*hitl.Action, int64) {
		before := trips.n.Load()
		a, err := s.CompleteJob(ctx, job, 1, w, m, json.RawMessage(`{"exit_code":0}`), json.RawMessage(`{"diff":""}`))
		require.NoError(t, err)
		return a, trips.n.Load() - before
	}

	complete(leased(hitl.StatusRunning, hitl.ToolExec), hitl.MoveSucceed) // prepares the statements
	a, n := complete(leased(hitl.StatusRunning, hitl.ToolExec), hitl.MoveSucceed)
	assert.Equal(t, hitl.StatusSucceeded, a.Status)
	assert.Equal(t, int64(2), n, "a run's completion: BEGIN, the job and the action; the event and COMMIT")

	complete(leased(hitl.StatusPending, hitl.JobPreview), hitl.MoveSucceed)
	a, n = complete(leased(hitl.StatusPending, hitl.JobPreview), hitl.MoveSucceed)
	assert.Equal(t, hitl.StatusPending, a.Status)
	assert.JSONEq(t, `{"diff":""}`, string(a.Preview), "the preview is recorded")
	assert.Equal(t, int64(3), n, "a preview's completion: its action's update in between")
}
