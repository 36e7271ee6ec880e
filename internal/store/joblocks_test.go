package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

// TestWorkerCallsRacingAStop: a worker's lease, completion or expired
// lease and a stop of the job's action (here the agent's suspension, whose
// statement moves the action and then retires its job) never deadlock.
// Replayed: the test holds the action's row; the stop starts and waits
// for it; the worker call starts; the test lets go. Before, the worker
// calls locked the job first and then waited for the action, which the
// stop held while it waited for the job. Now they lock the action first
// (or skip the job while its action is locked), as the stop does.
func TestWorkerCallsRacingAStop(t *testing.T) {
	t.Parallel()
	result := json.RawMessage(`{"exit_code":0}`)
	for _, tc := range []struct {
		name   string
		leased bool
		call   func(ctx context.Context, s *store.Store, w hitl.Worker, job string) error
	}{
		{"lease", false, func(ctx context.Context, s *store.Store, w hitl.Worker, _ string) error {
			l, err := s.LeaseJob(ctx, w, time.Minute)
			if err == nil && l != nil {
				return errors.New("leased the job of an action being stopped")
			}
			return err
		}},
		{"complete", true, func(ctx context.Context, s *store.Store, w hitl.Worker, job string) error {
			_, err := s.CompleteJob(ctx, job, 1, w, hitl.MoveSucceed, result, nil)
			if apperr.CodeOf(err) == apperr.CodeConflict {
				return nil // the stop retired the job first: the lease is lost
			}
			return err
		}},
		{"expired lease", true, func(ctx context.Context, s *store.Store, _ hitl.Worker, job string) error {
			if _, err := s.Pool().Exec(ctx, `UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, job); err != nil {
				return err
			}
			_, err := s.ExpireLeases(ctx, 10)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := store.New(testdb.New(t), nil)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			w := workerFor(t, s, hitl.ToolExec)
			_, err := s.CreateAgent(ctx, store.Agent{ID: "bot", Name: "bot", CreatedBy: "admin"})
			require.NoError(t, err)
			job, action := queueJob(t, s, "bot", hitl.StatusApproved, hitl.ToolExec)
			if tc.leased {
				l, err := s.LeaseJob(ctx, w, time.Minute)
				require.NoError(t, err)
				require.NotNil(t, l)
			}

			watch := store.OwnConn(t, s)
			hold, err := store.OwnConn(t, s).Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = hold.Rollback(context.Background()) }()
			_, err = hold.Exec(ctx, `SELECT FROM actions WHERE id = $1 FOR UPDATE`, action)
			require.NoError(t, err)
			stopped := make(chan error, 1)
			go func() {
				_, err := s.SuspendAgent(ctx, "bot", "admin", "race")
				stopped <- err
			}()
			require.Eventually(t, func() bool { return store.RowLockWaiters(t, watch) == 1 }, 30*time.Second, time.Millisecond,
				"the stop waits for the action")
			called := make(chan error, 1)
			go func() { called <- tc.call(ctx, s, w, job) }()
			var callErr error
			returned := false
			require.Eventually(t, func() bool {
				select {
				case callErr = <-called:
					returned = true
					return true
				default:
					return store.RowLockWaiters(t, watch) == 2
				}
			}, 30*time.Second, time.Millisecond, "the worker call returns or waits")
			require.NoError(t, hold.Rollback(ctx))
			if !returned {
				callErr = <-called
			}
			stopErr := <-stopped
			var pgErr *pgconn.PgError
			for _, err := range []error{stopErr, callErr} {
				if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
					t.Fatalf("deadlock: stop %v, worker call %v", stopErr, callErr)
				}
			}
			require.NoError(t, stopErr, "the stop commits")
			require.NoError(t, callErr, "the worker call")
			a, err := s.Action(ctx, action)
			require.NoError(t, err)
			assert.Equal(t, hitl.StatusCancelled, a.Status, "stopped")
			var state string
			require.NoError(t, s.Pool().QueryRow(ctx, `SELECT state FROM jobs WHERE id = $1`, job).Scan(&state))
			assert.Equal(t, "done", state, "its job retired")
		})
	}
}
