package store

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
)

// TestPipedTxCommitsAllOrNothing: a transaction whose BEGIN rides with its
// first statement and whose COMMIT rides with its audit events commits
// everything when all goes well, and nothing (and leaves no connection in
// a transaction) when the first statement, the middle, a statement whose
// error the middle swallowed, or an audit insert fails.
func TestPipedTxCommitsAllOrNothing(t *testing.T) {
	t.Parallel()
	pool := probeDB(t)
	s := New(pool, nil)
	ctx := context.Background()
	event := func(tool string) audit.Event {
		return audit.Event{Kind: "test.piped", Actor: "test", Tool: tool}
	}
	run := func(k int, rest func(c execer) ([]audit.Event, error)) error {
		return s.inPipedTx(ctx, []pipedQuery{{sql: `INSERT INTO gc_probe (k) VALUES ($1) RETURNING k`, args: []any{k},
			scan: func(row pgx.Row) error {
				var got int
				if err := row.Scan(&got); err != nil {
					return err
				}
				if got != k {
					return errors.New("scanned the wrong row")
				}
				return nil
			}}}, rest)
	}
	written := func(k int) (rows, events int) {
		t.Helper()
		require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM gc_probe WHERE k IN ($1, $1 + 1)),
			(SELECT count(*) FROM audit_events WHERE kind = 'test.piped' AND tool = 'k' || $1)`, k).Scan(&rows, &events))
		return rows, events
	}
	idleInTx := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&n))
		return n
	}
	second := func(k int) func(c execer) ([]audit.Event, error) {
		return func(c execer) ([]audit.Event, error) {
			_, err := c.Exec(ctx, `INSERT INTO gc_probe (k) VALUES ($1)`, k+1)
			return []audit.Event{event("k" + strconv.Itoa(k))}, err
		}
	}

	require.NoError(t, run(10, second(10)))
	rows, events := written(10)
	assert.Equal(t, 2, rows, "both statements committed")
	assert.Equal(t, 1, events, "with the audit event")

	err := run(20, func(c execer) ([]audit.Event, error) {
		_, _ = second(20)(c)
		return nil, errors.New("refused in the middle")
	})
	require.ErrorContains(t, err, "refused in the middle")
	rows, events = written(20)
	assert.Zero(t, rows+events, "nothing of a transaction whose middle failed")

	err = run(30, func(c execer) ([]audit.Event, error) {
		_, _ = second(30)(c)
		var x int
		_ = c.QueryRow(ctx, `SELECT 1 / 0`).Scan(&x) // the error is dropped; the transaction is aborted all the same
		return []audit.Event{event("k30")}, nil
	})
	require.Error(t, err, "a statement that failed unreported still fails the commit")
	rows, events = written(30)
	assert.Zero(t, rows+events)

	err = run(10, second(40)) // k = 10 is taken: the first statement fails
	require.Error(t, err)
	rows, events = written(40)
	assert.Zero(t, rows+events)

	err = run(50, func(c execer) ([]audit.Event, error) {
		evs, err := second(50)(c)
		return append(evs, event("k50\x00")), err // PostgreSQL refuses a NUL in text
	})
	require.ErrorContains(t, err, "audit events")
	rows, events = written(50)
	assert.Zero(t, rows+events, "an audit insert that fails takes the whole transaction with it")

	assert.Zero(t, idleInTx(), "every connection went back out of its transaction")
	require.NoError(t, run(60, second(60)), "the pool still works")
}
