package store_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

// insertEvent writes one event in tx as the server's writers do (the id
// comes from the sequence) and returns its id.
func insertEvent(t *testing.T, ctx context.Context, tx pgx.Tx, actor string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, tx.QueryRow(ctx, `INSERT INTO audit_events (kind, actor) VALUES ('auth.login', $1) RETURNING id`, actor).Scan(&id))
	return id
}

// sealOf returns the seq event id was sealed at (0: not sealed) and how many
// seals name it.
func sealOf(t *testing.T, pool *pgxpool.Pool, id int64) (seq int64, seals int) {
	t.Helper()
	require.NoError(t, pool.QueryRow(ctxT(t), `SELECT coalesce(max(seq), 0), count(*) FROM audit_seals WHERE id = $1`, id).Scan(&seq, &seals))
	return seq, seals
}

// TestSealerSealsLateCommits: an event whose id was handed out before
// others but whose transaction commits after they were sealed is sealed
// too, once, at a later seq. The highest sealed id is no watermark: a
// sealer that looked only above it would skip this event for ever.
func TestSealerSealsLateCommits(t *testing.T) {
	t.Parallel()
	tr := newTrail(t)
	ctx := ctxT(t)

	late, err := tr.pool.Begin(ctx)
	require.NoError(t, err)
	defer late.Rollback(context.Background())
	lateID := insertEvent(t, ctx, late, "late")

	early, err := tr.pool.Begin(ctx)
	require.NoError(t, err)
	earlyID := insertEvent(t, ctx, early, "early")
	require.NoError(t, early.Commit(ctx))
	require.Greater(t, earlyID, lateID)

	// Several rounds while the late transaction stays open, with more
	// events after it: they are sealed, it is not (it is not committed).
	for i := range 3 {
		tr.append(2)
		n, err := tr.sealer.Seal(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2+boolInt(i == 0), n, "round %d", i)
	}
	seq, _ := sealOf(t, tr.pool, earlyID)
	assert.EqualValues(t, 1, seq)
	seq, _ = sealOf(t, tr.pool, lateID)
	assert.Zero(t, seq, "not committed: not sealed")

	require.NoError(t, late.Commit(ctx))
	n, err := tr.sealer.Seal(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	seq, seals := sealOf(t, tr.pool, lateID)
	assert.EqualValues(t, 8, seq, "sealed after the seven sealed before it committed")
	assert.Equal(t, 1, seals)

	// A fresh sealer (another instance, or this one restarted) starts from
	// the stored watermark and seals nothing twice.
	other := audit.NewSealer(tr.store, tr.key, audit.SealerConfig{CheckpointEvery: time.Hour, CheckpointQuiet: time.Hour})
	n, err = other.Seal(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	tr.checkpoint()
	r := tr.verify()
	assert.True(t, r.OK, r.Reason)
	assert.EqualValues(t, 8, r.Checked)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestSealerWatermarkWaitsForWriters: the watermark moves only past ids
// whose writers have all ended, so that an event committed late below it
// is still found; and once they ended it moves (sealing does not rescan
// the whole trail for ever).
func TestSealerWatermarkWaitsForWriters(t *testing.T) {
	t.Parallel()
	tr := newTrail(t)
	ctx := ctxT(t)
	watermark := func() int64 {
		var w int64
		require.NoError(t, tr.pool.QueryRow(ctx, `SELECT coalesce(max(watermark), 0) FROM audit_seals`).Scan(&w))
		return w
	}

	for range 3 {
		tr.append(1)
		_, err := tr.sealer.Seal(ctx)
		require.NoError(t, err)
	}
	require.Positive(t, watermark(), "with no writer in flight the watermark follows the sealed events")

	open, err := tr.pool.Begin(ctx)
	require.NoError(t, err)
	defer open.Rollback(context.Background())
	openID := insertEvent(t, ctx, open, "open")
	for range 4 {
		tr.append(1)
		_, err := tr.sealer.Seal(ctx)
		require.NoError(t, err)
	}
	assert.Less(t, watermark(), openID, "an id in flight stays above the watermark")

	require.NoError(t, open.Rollback(ctx)) // the id is never used
	// The frontier read while the writer was open is passed now.
	for range 2 {
		tr.append(1)
		_, err := tr.sealer.Seal(ctx)
		require.NoError(t, err)
	}
	assert.Greater(t, watermark(), openID, "once its writer ended the watermark moves past it")
	seq, _ := sealOf(t, tr.pool, openID)
	assert.Zero(t, seq)

	// A reader and a (auto)vacuum-like lock on the trail are no writers:
	// they do not hold the watermark back.
	other, err := tr.pool.Begin(ctx)
	require.NoError(t, err)
	defer other.Rollback(context.Background())
	var part string
	require.NoError(t, other.QueryRow(ctx, `SELECT tableoid::regclass::text FROM audit_events LIMIT 1`).Scan(&part))
	_, err = other.Exec(ctx, `LOCK TABLE `+part+` IN SHARE UPDATE EXCLUSIVE MODE`)
	require.NoError(t, err)
	var last int64
	for range 3 {
		tr.append(1)
		_, err := tr.sealer.Seal(ctx)
		require.NoError(t, err)
		require.NoError(t, tr.pool.QueryRow(ctx, `SELECT max(id) FROM audit_events`).Scan(&last))
	}
	assert.GreaterOrEqual(t, watermark(), last-1, "the watermark follows the sealed events")
}

// TestConcurrentLateCommitsOneSealEach: writers commit in another order
// than they took their ids (some hold their transaction open until an
// event written after theirs is sealed, some roll back), while two sealers
// (two server instances) seal with small batches. In the end every
// committed event has exactly one seal, none was skipped, the chain is
// 1..n without gap, and it verifies.
func TestConcurrentLateCommitsOneSealEach(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	ctx := ctxT(t)
	key := store.NewTestKey(t)
	runCtx, stop := context.WithCancel(ctx)
	var swg sync.WaitGroup
	var sealers []*audit.Sealer
	for range 2 {
		sealer := audit.NewSealer(store.New(appPool(t, url), nil), key, audit.SealerConfig{Every: 2 * time.Millisecond, Batch: 5,
			CheckpointEvery: 20 * time.Millisecond})
		sealers = append(sealers, sealer)
		swg.Add(1)
		go func() { defer swg.Done(); sealer.Run(runCtx) }()
	}
	const fast, slow, each = 8, 4, 10
	pool := appPoolSize(t, url, fast+3*slow) // a slow writer holds two transactions and polls
	s := store.New(pool, nil)

	var committed atomic.Int64
	var mu sync.Mutex
	var lateIDs []int64 // events sealed after an event with a higher id
	var wg sync.WaitGroup
	for w := range fast {
		wg.Go(func() {
			for i := range each {
				tx, err := pool.Begin(ctx)
				if !assert.NoError(t, err) {
					return
				}
				insertEvent(t, ctx, tx, fmt.Sprintf("fast-%d-%d", w, i))
				if i%4 == 3 {
					assert.NoError(t, tx.Rollback(ctx))
					continue
				}
				assert.NoError(t, tx.Commit(ctx))
				committed.Add(1)
			}
		})
	}
	for w := range slow {
		wg.Go(func() {
			for i := range each {
				tx, err := pool.Begin(ctx)
				if !assert.NoError(t, err) {
					return
				}
				held := insertEvent(t, ctx, tx, fmt.Sprintf("slow-%d-%d", w, i))
				// A later event, committed and sealed while this one waits.
				after, err := pool.Begin(ctx)
				if !assert.NoError(t, err) {
					return
				}
				afterID := insertEvent(t, ctx, after, fmt.Sprintf("after-%d-%d", w, i))
				assert.NoError(t, after.Commit(ctx))
				committed.Add(2)
				for ctx.Err() == nil {
					seq, _ := sealOf(t, pool, afterID)
					if seq > 0 {
						break
					}
					time.Sleep(time.Millisecond)
				}
				assert.NoError(t, tx.Commit(ctx))
				mu.Lock()
				lateIDs = append(lateIDs, held)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.NoError(t, ctx.Err())
	stop()
	swg.Wait()
	var sealErr error
	require.Eventually(t, func() bool {
		sealErr = sealers[0].Checkpoint(ctx)
		return !errors.Is(sealErr, audit.ErrSealLockHeld)
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, sealErr)

	var events, sealedEvents, seals, distinct, maxSeq int64
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_events),
		(SELECT count(*) FROM audit_events e WHERE EXISTS (SELECT FROM audit_seals s WHERE s.id = e.id AND s.at = e.at)),
		count(*), count(DISTINCT id), coalesce(max(seq), 0) FROM audit_seals`).Scan(&events, &sealedEvents, &seals, &distinct, &maxSeq))
	assert.Equal(t, committed.Load(), events)
	assert.Equal(t, events, sealedEvents, "every event sealed")
	assert.Equal(t, events, seals, "one seal per event")
	assert.Equal(t, events, distinct, "no event sealed twice")
	assert.Equal(t, events, maxSeq, "seq 1..n without gap")
	for _, id := range lateIDs {
		seq, n := sealOf(t, pool, id)
		var laterSeq int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(min(seq), 0) FROM audit_seals WHERE id > $1`, id).Scan(&laterSeq))
		assert.Equal(t, 1, n, "event %d", id)
		assert.Greater(t, seq, laterSeq, "event %d committed after a later id was sealed", id)
	}

	for i, sl := range sealers {
		assert.Zero(t, sl.Stats().WatermarksRefused, "sealer %d refused the other's watermark", i)
	}

	r, err := audit.Verify(ctx, s, audit.VerifyOptions{Keys: []ed25519.PublicKey{key.Public()}, PageSize: 7})
	require.NoError(t, err)
	assert.True(t, r.OK, r.Reason)
	assert.Equal(t, events, r.Checked)
}

// TestSealerSealsLateCommitsPastManyGaps: with more unused ids between the
// watermark and the sealed events above it than the sealer looks up one by
// one (a writer that rolled back a large batch), a late commit below them
// is still found, once.
func TestSealerSealsLateCommitsPastManyGaps(t *testing.T) {
	t.Parallel()
	tr := newTrail(t)
	ctx := ctxT(t)
	late, err := tr.pool.Begin(ctx)
	require.NoError(t, err)
	defer late.Rollback(context.Background())
	lateID := insertEvent(t, ctx, late, "late")
	tr.append(1)
	_, err = tr.sealer.Seal(ctx)
	require.NoError(t, err)

	_, err = tr.pool.Exec(ctx, `BEGIN; INSERT INTO audit_events (kind, actor) SELECT 'auth.login', 'burnt' FROM generate_series(1, 700); ROLLBACK`)
	require.NoError(t, err)
	tr.append(2)
	n, err := tr.sealer.Seal(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n)

	require.NoError(t, late.Commit(ctx))
	tr.append(1)
	n, err = tr.sealer.Seal(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the late event and the new one")
	seq, seals := sealOf(t, tr.pool, lateID)
	assert.EqualValues(t, 4, seq)
	assert.Equal(t, 1, seals)
	n, err = tr.sealer.Seal(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	tr.checkpoint()
	r := tr.verify()
	assert.True(t, r.OK, r.Reason)
	assert.EqualValues(t, 5, r.Checked)
}
