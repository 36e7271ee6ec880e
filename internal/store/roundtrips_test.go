package store_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
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

// queueJob stores an exec action of agent in status st with a queued job
// of kind for "workspace:w", and returns the job's id and the action's.
func queueJob(t *testing.T, s *store.Store, agent string, st hitl.Status, kind string) (job, action string) {
	t.Helper()
	a := newAction(agent, st, "", "")
	a.Tool = hitl.ToolExec
	require.NoError(t, insert(t, s, a, hitl.Guard{}))
	job = uuid.Must(uuid.NewV7()).String()
	_, err := s.Pool().Exec(ctxT(t), `INSERT INTO jobs (id, action_id, kind, target) VALUES ($1, $2, $3, 'workspace:w')`, job, a.ID, kind)
	require.NoError(t, err)
	return job, a.ID
}

// TestWorkerCallRoundTrips: a worker waits on its lease and its
// completion, and on this project's machine each round trip to PostgreSQL
// after a run's idle time costs ~0.45 ms (issue 14). Leasing a run and
// completing it take two each: the job and its action's move with BEGIN,
// the audit event with COMMIT. A preview's lease and completion take three
// (what they do to its action depends on what they find).
func TestWorkerCallRoundTrips(t *testing.T) {
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

	w := workerFor(t, s, hitl.ToolExec, hitl.JobPreview)
	_, err = s.CreateAgent(ctx, store.Agent{ID: "bot", Name: "bot", CreatedBy: "admin"})
	require.NoError(t, err)
	queued := func(st hitl.Status, kind string) string {
		job, _ := queueJob(t, s, "bot", st, kind)
		return job
	}
	lease := func(job string) (*hitl.Lease, int64) {
		before := trips.n.Load()
		l, err := s.LeaseJob(ctx, w, time.Minute)
		require.NoError(t, err)
		require.NotNil(t, l)
		require.Equal(t, job, l.ID)
		return l, trips.n.Load() - before
	}
	// leased stores an action in status st with a job of kind leased by w.
	leased := func(st hitl.Status, kind string) (job string) {
		job = queued(st, kind)
		lease(job)
		return job
	}
	complete := func(job string, m hitl.Move) (*hitl.Action, int64) {
		before := trips.n.Load()
		a, err := s.CompleteJob(ctx, job, 1, w, m, json.RawMessage(`{"exit_code":0}`), json.RawMessage(`{"diff":""}`))
		require.NoError(t, err)
		return a, trips.n.Load() - before
	}

	complete(leased(hitl.StatusApproved, hitl.ToolExec), hitl.MoveSucceed) // prepares the statements
	l, n := lease(queued(hitl.StatusApproved, hitl.ToolExec))
	assert.Equal(t, int64(2), n, "a run's lease: BEGIN, the job and the action; the event and COMMIT")
	a, err := s.Action(ctx, l.ActionID)
	require.NoError(t, err)
	assert.Equal(t, hitl.StatusRunning, a.Status)
	a, n = complete(l.ID, hitl.MoveSucceed)
	assert.Equal(t, hitl.StatusSucceeded, a.Status)
	assert.Equal(t, int64(2), n, "a run's completion: BEGIN, the job and the action; the event and COMMIT")

	complete(leased(hitl.StatusPending, hitl.JobPreview), hitl.MoveSucceed)
	l, n = lease(queued(hitl.StatusPending, hitl.JobPreview))
	assert.Equal(t, int64(3), n, "a preview's lease: its action's read in between")
	a, n = complete(l.ID, hitl.MoveSucceed)
	assert.Equal(t, hitl.StatusPending, a.Status)
	assert.JSONEq(t, `{"diff":""}`, string(a.Preview), "the preview is recorded")
	assert.Equal(t, int64(3), n, "a preview's completion: its action's update in between")
}

// TestConcurrentLeasesMoveTheirOwnActions hammers LeaseJob from many
// goroutines: each job is leased once, and each lease moves its own job's
// action, and no other, to running with one audit event (leaseRunSQL
// finds the job through its transaction's leasedJobSetting).
func TestConcurrentLeasesMoveTheirOwnActions(t *testing.T) {
	t.Parallel()
	s := store.New(testdb.New(t), nil)
	ctx := ctxT(t)
	pool := s.Pool()
	w := workerFor(t, s, hitl.ToolExec)
	_, err := s.CreateAgent(ctx, store.Agent{ID: "bot", Name: "bot", CreatedBy: "admin"})
	require.NoError(t, err)
	const jobs = 60
	actionOf := map[string]string{} // job -> action
	for range jobs {
		job, action := queueJob(t, s, "bot", hitl.StatusApproved, hitl.ToolExec)
		actionOf[job] = action
	}

	leases := make(chan *hitl.Lease, jobs)
	var wg sync.WaitGroup
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				l, err := s.LeaseJob(ctx, w, time.Minute)
				if !assert.NoError(t, err) || l == nil {
					return
				}
				leases <- l
			}
		}()
	}
	wg.Wait()
	close(leases)
	seen := map[string]bool{}
	for l := range leases {
		assert.False(t, seen[l.ID], "job %s leased twice", l.ID)
		seen[l.ID] = true
		assert.Equal(t, actionOf[l.ID], l.ActionID, "the lease names its job's action")
	}
	assert.Len(t, seen, jobs, "every job leased")
	var running, events, eventActions int
	require.NoError(t, pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM actions WHERE status = 'running'),
		(SELECT count(*) FROM audit_events WHERE kind = $1),
		(SELECT count(DISTINCT e.action_id) FROM audit_events e JOIN jobs j ON j.action_id = e.action_id
			WHERE e.kind = $1 AND e.data->>'job' = j.id::text)`, audit.KindActionRunning).Scan(&running, &events, &eventActions))
	assert.Equal(t, jobs, running, "every action running")
	assert.Equal(t, jobs, events, "one audit event per lease")
	assert.Equal(t, jobs, eventActions, "each event names its own job's action")
}
