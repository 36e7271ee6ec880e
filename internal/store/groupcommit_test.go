package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/testdb"
)

// queueUp holds g's only batch slot with a slow statement, runs insert(k)
// for every k in keys from its own goroutine once all of them wait in the
// queue, and returns each key's error once the slot is free again.
func queueUp(t *testing.T, g *groupCommit, keys []int) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	release := make(chan struct{})
	blocker := make(chan error, 1)
	go func() {
		var one int
		blocker <- g.queryRow(ctx, `SELECT 1 FROM pg_sleep(0.2)`, nil, &one)
		close(release)
	}()
	require.Eventually(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.leaders == 1 }, 10*time.Second, time.Millisecond)

	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got int
			errs[i] = g.queryRow(ctx, `INSERT INTO gc_probe (k) VALUES ($1) RETURNING k`, []any{k}, &got)
			if errs[i] == nil && got != k {
				errs[i] = errors.New("scanned the wrong row")
			}
		}()
	}
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		select {
		case <-release:
			return true // too late to check the queue: the test fails below
		default:
			return len(g.queue) == len(keys)
		}
	}, 10*time.Second, time.Millisecond)
	select {
	case <-release:
		t.Fatal("the slow statement finished before every insert was queued")
	default:
	}
	wg.Wait()
	require.NoError(t, <-blocker)
	return errs
}

// probeDB is a fresh database with the table gc_probe (k int PRIMARY KEY).
func probeDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := testdb.New(t)
	_, err := pool.Exec(context.Background(), `CREATE TABLE gc_probe (k int PRIMARY KEY)`)
	require.NoError(t, err)
	return pool
}

// TestGroupCommitSharesOneCommit shows the batching: statements queued
// behind a busy slot go out together and commit in one transaction.
func TestGroupCommitSharesOneCommit(t *testing.T) {
	t.Parallel()
	pool := probeDB(t)
	ctx := context.Background()
	g := newGroupCommit(pool, 64, 1)

	keys := make([]int, 20)
	for i := range keys {
		keys[i] = i + 1
	}
	for i, err := range queueUp(t, g, keys) {
		require.NoError(t, err, "key %d", keys[i])
	}
	var rows, txs int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT xmin::text) FROM gc_probe`).Scan(&rows, &txs))
	assert.Equal(t, 20, rows)
	assert.Equal(t, 1, txs, "the 20 queued inserts committed as one transaction")
	assert.Zero(t, g.leaders, "the slot was given back")
	assert.Empty(t, g.queue)
}

// TestGroupCommitIsolatesAFailure: one statement that fails must not fail
// the others it was batched with, nor leave any of them half written.
func TestGroupCommitIsolatesAFailure(t *testing.T) {
	t.Parallel()
	pool := probeDB(t)
	ctx := context.Background()
	g := newGroupCommit(pool, 64, 1)

	keys := []int{1, 2, 3, 4, 5, 5, 6, 7, 8, 9} // 5 twice: one of them must fail
	errs := queueUp(t, g, keys)
	failed := 0
	for i, err := range errs {
		if keys[i] != 5 {
			require.NoError(t, err, "key %d", keys[i])
			continue
		}
		if err != nil {
			failed++
			var pe *pgconn.PgError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, uniqueViolation, pe.Code)
		}
	}
	assert.Equal(t, 1, failed, "exactly one of the two inserts of key 5 fails")
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM gc_probe`).Scan(&rows))
	assert.Equal(t, 9, rows)
}

// TestGroupCommitUnderLoad hammers the committer from many goroutines with
// several slots: every statement is written exactly once and answered with
// its own row.
func TestGroupCommitUnderLoad(t *testing.T) {
	t.Parallel()
	pool := probeDB(t)
	ctx := context.Background()
	g := newGroupCommit(pool, 8, 2)

	const workers, each = 40, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				k := w*each + i
				var got int
				if err := g.queryRow(ctx, `INSERT INTO gc_probe (k) VALUES ($1) RETURNING k`, []any{k}, &got); err != nil {
					errs <- err
				} else if got != k {
					errs <- errors.New("scanned another statement's row")
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var rows, txs int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT xmin::text) FROM gc_probe`).Scan(&rows, &txs))
	assert.Equal(t, workers*each, rows)
	assert.Less(t, txs, rows, "some statements shared a commit")
	t.Logf("%d statements in %d transactions", rows, txs)
	assert.Zero(t, g.leaders)
}

// panicScanner panics when a row is scanned into it.
type panicScanner struct{}

func (panicScanner) Scan(any) error { panic("scanner bug") }

// TestGroupCommitSurvivesAPanic: a batch whose leader panics still answers
// everyone batched with it and frees its slot.
func TestGroupCommitSurvivesAPanic(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	g := newGroupCommit(pool, 64, 1)
	queued := func(n int) func() bool {
		return func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.queue) == n }
	}

	release := make(chan struct{})
	go func() {
		var one int
		_ = g.queryRow(ctx, `SELECT 1 FROM pg_sleep(0.3)`, nil, &one)
		close(release)
	}()
	require.Eventually(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.leaders == 1 }, 10*time.Second, time.Millisecond)

	panicked := make(chan any, 1)
	go func() { // queued first: it will lead the next batch
		defer func() { panicked <- recover() }()
		_ = g.queryRow(ctx, `SELECT 1`, nil, panicScanner{})
	}()
	require.Eventually(t, queued(1), 10*time.Second, time.Millisecond)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			var one int
			errs <- g.queryRow(ctx, `SELECT 1`, nil, &one)
		}()
	}
	require.Eventually(t, queued(5), 10*time.Second, time.Millisecond)
	select {
	case <-release:
		t.Fatal("the slow statement finished before the batch was queued")
	default:
	}

	assert.Equal(t, "scanner bug", <-panicked)
	for range 4 {
		assert.ErrorIs(t, <-errs, errBatchPanicked)
	}
	var one int
	require.NoError(t, g.queryRow(ctx, `SELECT 1`, nil, &one), "the slot was freed")
	assert.Equal(t, 1, one)
	g.mu.Lock()
	defer g.mu.Unlock()
	assert.Zero(t, g.leaders)
}
