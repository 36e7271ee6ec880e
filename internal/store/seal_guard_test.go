package store_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

// logBuffer is a slog destination a test reads back.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// unsealedCount counts the events no seal names.
func unsealedCount(t *testing.T, tr *trail) int {
	t.Helper()
	var n int
	require.NoError(t, tr.pool.QueryRow(ctxT(t), `SELECT count(*) FROM audit_events e
		WHERE NOT EXISTS (SELECT FROM audit_seals s WHERE s.id = e.id AND s.at = e.at)`).Scan(&n))
	return n
}

// TestSealerRefusesAStoredWatermarkItCannotTrust: the sealer goes on from
// the newest stored watermark, and whoever may insert a seal may have
// stored it. One above the last event id (2^63-1: the owner, past the
// trigger), or one with unsealed events below it (the server's role can
// store that: a correct seal of the newest event, its watermark the last
// id), is refused, logged, and the events it would have left out are
// sealed. Before, the sealer went by it: it never sealed again, or never
// sealed the events below it.
func TestSealerRefusesAStoredWatermarkItCannotTrust(t *testing.T) {
	t.Parallel()
	t.Run("above the last event id", func(t *testing.T) {
		t.Parallel()
		tr := newTrail(t)
		var logs logBuffer
		running := audit.NewSealer(tr.store, tr.key, audit.SealerConfig{CheckpointEvery: time.Hour, CheckpointQuiet: time.Hour, Logger: logs.logger()})
		tr.append(2)
		require.NoError(t, running.Checkpoint(ctxT(t)))
		tr.append(1)
		su := tr.superuser()
		tr.exec(su, fmt.Sprintf(sealAtHeadSQL, "id", "9223372036854775807"))
		tr.append(2)

		// A sealer running before, and one starting now (no watermark of
		// its own: it goes by the newest stored one it can).
		_, err := running.Seal(ctxT(t))
		require.NoError(t, err)
		assert.Zero(t, unsealedCount(t, tr))
		assert.Contains(t, logs.String(), "refusing the stored sealing watermark")
		assert.Contains(t, logs.String(), "above the last event id handed out")
		assert.Equal(t, 1, running.Stats().WatermarksRefused)

		tr.append(1)
		tr.exec(su, fmt.Sprintf(sealAtHeadSQL, "id", "9223372036854775806"))
		tr.append(2)
		fresh := audit.NewSealer(tr.store, tr.key, audit.SealerConfig{CheckpointEvery: time.Hour, CheckpointQuiet: time.Hour, Logger: logs.logger()})
		require.NoError(t, fresh.Checkpoint(ctxT(t)))
		assert.Zero(t, unsealedCount(t, tr))
		assert.Equal(t, 1, fresh.Stats().WatermarksRefused)
		assert.True(t, tr.verify().OK)
	})
	t.Run("unsealed events below it", func(t *testing.T) {
		t.Parallel()
		url := testdb.URL(t)
		app := appPool(t, url)
		s := store.New(app, nil)
		ctx := ctxT(t)
		key := store.NewTestKey(t)
		var logs logBuffer
		sealer := audit.NewSealer(s, key, audit.SealerConfig{Logger: logs.logger()})
		require.NoError(t, s.AppendEvents(ctx, audit.Event{Kind: audit.KindLogin, Actor: "alice"}))
		require.NoError(t, sealer.Checkpoint(ctx))
		// As the server's role: two events, and a seal of the second whose
		// watermark passes over the first.
		require.NoError(t, s.AppendEvents(ctx, audit.Event{Kind: audit.KindLogin, Actor: "skipped"}))
		require.NoError(t, s.AppendEvents(ctx, audit.Event{Kind: audit.KindLogin, Actor: "sealed"}))
		_, err := app.Exec(ctx, fmt.Sprintf(sealAtHeadSQL, "id DESC", "(SELECT last_value FROM audit_events_id_seq)"))
		require.NoError(t, err, "the trigger lets a watermark up to the last id through")

		for _, sl := range []*audit.Sealer{sealer, audit.NewSealer(s, key, audit.SealerConfig{Logger: logs.logger()})} {
			require.NoError(t, s.AppendEvents(ctx, audit.Event{Kind: audit.KindLogin, Actor: "later"}))
			require.NoError(t, sl.Checkpoint(ctx))
			var unsealed int
			require.NoError(t, app.QueryRow(ctx, `SELECT count(*) FROM audit_events e
				WHERE NOT EXISTS (SELECT FROM audit_seals s WHERE s.id = e.id AND s.at = e.at)`).Scan(&unsealed))
			assert.Zero(t, unsealed)
		}
		assert.Contains(t, logs.String(), "1 events at or below it are not sealed")
		r, err := audit.Verify(ctx, s, audit.VerifyOptions{Keys: []ed25519.PublicKey{key.Public()}})
		require.NoError(t, err)
		assert.True(t, r.OK, "%+v", r)
		assert.EqualValues(t, 5, r.Checked)
	})
}

// TestSealerGoesPastCheckpointsItCannotVerify: the server's role may
// insert a checkpoint (the trigger holds it to a seal and its hash, above
// the newest); what signs it, it cannot be made to check. One whose
// signature does not verify (under any key, the audit key's included), or
// one signed by a key of its own over the chain's hash, is passed over,
// counted and logged: sealing and signing go on, on every instance.
// Before, the first stopped sealing for good ("refusing to seal"), and
// the second stopped the signing on every instance.
func TestSealerGoesPastCheckpointsItCannotVerify(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (*trail, *audit.Sealer, *logBuffer) {
		tr := newTrail(t)
		var logs logBuffer
		sealer := audit.NewSealer(tr.store, tr.key, audit.SealerConfig{CheckpointEvery: time.Hour, CheckpointQuiet: time.Hour, Logger: logs.logger()})
		tr.append(3)
		require.NoError(t, sealer.Checkpoint(ctxT(t)))
		tr.append(2)
		_, err := sealer.Seal(ctxT(t))
		require.NoError(t, err)
		return tr, sealer, &logs
	}
	junk := map[string]string{
		"not verifying, another key":   `SELECT seq, hash, now(), sha256('k'), sha512('s') FROM audit_seals ORDER BY seq DESC LIMIT 1`,
		"not verifying, the audit key": `SELECT seq, hash, now(), $1::bytea, sha512('s') FROM audit_seals ORDER BY seq DESC LIMIT 1`,
	}
	for name, sql := range junk {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr, sealer, logs := setup(t)
			app := appPool(t, testdb.Cluster(t).URL(tr.pool.Config().ConnConfig.Database))
			var args []any
			if strings.Contains(sql, "$1") {
				args = append(args, []byte(tr.key.Public()))
			}
			_, err := app.Exec(ctxT(t), `INSERT INTO audit_checkpoints (seq, hash, at, public_key, signature) `+sql, args...)
			require.NoError(t, err)
			tr.append(2)
			require.NoError(t, sealer.Checkpoint(ctxT(t)))
			assert.Zero(t, unsealedCount(t, tr))
			cp := tr.latestCheckpoint()
			assert.EqualValues(t, 7, cp.Seq)
			assert.True(t, cp.PublicKey.Equal(tr.key.Public()))
			assert.Contains(t, logs.String(), "passing over a stored checkpoint")
			assert.Equal(t, 1, sealer.Stats().CheckpointsSkipped)
			// A sealer starting now goes past it as well.
			tr.append(1)
			require.NoError(t, audit.NewSealer(tr.store, tr.key, audit.SealerConfig{}).Checkpoint(ctxT(t)))
			assert.EqualValues(t, 8, tr.latestCheckpoint().Seq)
		})
	}
	t.Run("signed by a key of its own, over the chain's hash", func(t *testing.T) {
		t.Parallel()
		tr, _, logs := setup(t)
		ctx := ctxT(t)
		sealer := audit.NewSealer(tr.store, tr.key, audit.SealerConfig{CheckpointEvery: time.Nanosecond, CheckpointQuiet: time.Nanosecond, Logger: logs.logger()})
		// As the server's role: the head's hash (it may read the seals),
		// signed with a key it made.
		app := appPool(t, testdb.Cluster(t).URL(tr.pool.Config().ConnConfig.Database))
		var hash []byte
		require.NoError(t, app.QueryRow(ctx, `SELECT hash FROM audit_seals WHERE seq = 5`).Scan(&hash))
		cp := store.NewTestKey(t).Sign(5, hash, time.Now())
		_, err := app.Exec(ctx, `INSERT INTO audit_checkpoints VALUES ($1, $2, $3, $4, $5)`, cp.Seq, hash, cp.At, []byte(cp.PublicKey), cp.Signature)
		require.NoError(t, err)

		tr.append(2)
		n, err := sealer.Seal(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		assert.Zero(t, unsealedCount(t, tr))
		signed := tr.latestCheckpoint()
		assert.EqualValues(t, 7, signed.Seq, "signed after the other key's")
		assert.True(t, signed.PublicKey.Equal(tr.key.Public()))
		assert.Contains(t, logs.String(), "passing over a stored checkpoint")
		assert.Contains(t, logs.String(), "neither this server's audit key nor one it replaced")
		assert.Equal(t, 1, sealer.Stats().CheckpointsSkipped)

		// Another instance (its own sealer, the same key) and one starting
		// now sign after it as well, each after the other's.
		other := audit.NewSealer(tr.store, tr.key, audit.SealerConfig{CheckpointEvery: time.Hour, CheckpointQuiet: time.Hour, Logger: logs.logger()})
		for i, sl := range []*audit.Sealer{other, sealer, other} {
			tr.append(1)
			require.NoError(t, sl.Checkpoint(ctx))
			assert.EqualValues(t, 8+i, tr.latestCheckpoint().Seq)
		}
		assert.Equal(t, 1, sealer.Stats().CheckpointsSkipped, "counted once")

		// Verification reports it, and walks on past it.
		r := tr.verify()
		assert.False(t, r.OK)
		assert.EqualValues(t, 5, r.FirstBadSeq)
		assert.Contains(t, r.Reason, "checkpoint mismatch: the stored checkpoint at seq 5 is not signed by the audit key")
	})
}

// TestSealerGoesPastManyCheckpointsItCannotVerify: the server's role can
// store a checkpoint at every seal above the newest. 300 of them, each
// signed by a key of its own over the chain's hash: the sealer reads and
// verifies each once, counts each once, and signs after them; so does a
// sealer starting now. Before, it read the newest 256 only and, finding
// none among them it goes by, stopped signing.
func TestSealerGoesPastManyCheckpointsItCannotVerify(t *testing.T) {
	t.Parallel()
	tr := newTrail(t)
	ctx := ctxT(t)
	var logs logBuffer
	sealer := audit.NewSealer(tr.store, tr.key, audit.SealerConfig{CheckpointEvery: time.Hour, CheckpointQuiet: time.Hour, Logger: logs.logger()})
	tr.append(1)
	require.NoError(t, sealer.Checkpoint(ctx))

	// As the server's role: 300 events, sealed, and a checkpoint of its
	// own at each seal.
	const n = 300
	app := appPool(t, testdb.Cluster(t).URL(tr.pool.Config().ConnConfig.Database))
	s := store.New(app, nil)
	events := make([]audit.Event, n)
	for i := range events {
		events[i] = audit.Event{Kind: audit.KindLogin, Actor: fmt.Sprintf("u%d", i)}
	}
	require.NoError(t, s.AppendEvents(ctx, events...))
	sealed, err := sealer.Seal(ctx)
	require.NoError(t, err)
	require.Equal(t, n, sealed)
	rows, err := app.Query(ctx, `SELECT seq, hash FROM audit_seals WHERE seq > 1 ORDER BY seq`)
	require.NoError(t, err)
	type link struct {
		seq  int64
		hash []byte
	}
	links, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (link, error) {
		var l link
		return l, r.Scan(&l.seq, &l.hash)
	})
	require.NoError(t, err)
	require.Len(t, links, n)
	own := store.NewTestKey(t)
	var b pgx.Batch
	for _, l := range links {
		cp := own.Sign(l.seq, l.hash, time.Now())
		b.Queue(`INSERT INTO audit_checkpoints VALUES ($1, $2, $3, $4, $5)`, cp.Seq, l.hash, cp.At, []byte(cp.PublicKey), cp.Signature)
	}
	require.NoError(t, app.SendBatch(ctx, &b).Close())

	for range 2 {
		require.NoError(t, s.AppendEvents(ctx, audit.Event{Kind: audit.KindLogin, Actor: "later"}))
		require.NoError(t, sealer.Checkpoint(ctx))
	}
	cp := tr.latestCheckpoint()
	assert.EqualValues(t, n+3, cp.Seq)
	assert.True(t, cp.PublicKey.Equal(tr.key.Public()))
	assert.Equal(t, n, sealer.Stats().CheckpointsSkipped, "each counted once")
	assert.Equal(t, n, strings.Count(logs.String(), "passing over a stored checkpoint"), "each logged once")

	fresh := audit.NewSealer(tr.store, tr.key, audit.SealerConfig{CheckpointEvery: time.Hour, CheckpointQuiet: time.Hour})
	require.NoError(t, s.AppendEvents(ctx, audit.Event{Kind: audit.KindLogin, Actor: "later"}))
	require.NoError(t, fresh.Checkpoint(ctx))
	assert.EqualValues(t, n+4, tr.latestCheckpoint().Seq)
}

// TestSealerReportsTheLockHeldElsewhere: a session holding the sealer's
// advisory lock (any role can take it) pauses sealing; the sealer says
// so: the rounds it missed and how long ago it last left nothing unsealed
// (its Stats, the server's metrics), and a warning every 40 rounds.
// Before, a round without the lock was silent.
func TestSealerReportsTheLockHeldElsewhere(t *testing.T) {
	t.Parallel()
	tr := newTrail(t)
	ctx := ctxT(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var logs logBuffer
	sealer := audit.NewSealer(tr.store, tr.key, audit.SealerConfig{Logger: logs.logger(), Now: func() time.Time { return now }})
	tr.append(2)
	_, err := sealer.Seal(ctx)
	require.NoError(t, err)
	assert.Equal(t, audit.SealerStats{}, sealer.Stats())

	holder, err := tr.pool.Acquire(ctx)
	require.NoError(t, err)
	defer holder.Release()
	_, err = holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, store.SealLockKey)
	require.NoError(t, err)
	tr.append(1)
	now = now.Add(time.Minute)
	for range 40 {
		n, err := sealer.Seal(ctx)
		require.NoError(t, err)
		assert.Zero(t, n)
	}
	st := sealer.Stats()
	assert.Equal(t, 40, st.LockMissed)
	assert.Equal(t, time.Minute, st.Lag)
	assert.Contains(t, logs.String(), "sealing lock not obtained for 40 rounds")

	_, err = holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, store.SealLockKey)
	require.NoError(t, err)
	n, err := sealer.Seal(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, audit.SealerStats{}, sealer.Stats())
	assert.Contains(t, logs.String(), "sealing lock obtained again")
}

// TestSealerWaitsForWritersBeforeGoingByAStoredWatermark: the server's
// role can store a correct seal of the newest event with its watermark at
// the last id handed out while an honest writer's event below it is not
// committed yet. The sealer sees no visible unsealed event below it then;
// it goes by it only once every writer that was in flight when it first
// saw it has ended, and here refuses it (the event committed below it) and
// seals that event. Before, it went by it at once: the event was never
// sealed, and a walk from a later checkpoint (what `checkpoints -append`
// runs) said ok.
func TestSealerWaitsForWritersBeforeGoingByAStoredWatermark(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	app := appPool(t, url)
	owner := ownerPool(t, url)
	s := store.New(app, nil)
	ctx := ctxT(t)
	key := store.NewTestKey(t)
	var logs logBuffer
	sealer := audit.NewSealer(s, key, audit.SealerConfig{CheckpointEvery: time.Hour, CheckpointQuiet: time.Hour, Logger: logs.logger()})
	require.NoError(t, s.AppendEvents(ctx, audit.Event{Kind: audit.KindLogin, Actor: "first"}))
	require.NoError(t, sealer.Checkpoint(ctx))

	writer, err := app.Begin(ctx)
	require.NoError(t, err)
	defer writer.Rollback(context.Background())
	honest := insertEvent(t, ctx, writer, "honest, in flight")

	// As the server's role: an event, and a correct seal of it whose
	// watermark is the last id handed out (the trigger lets it through).
	require.NoError(t, s.AppendEvents(ctx, audit.Event{Kind: audit.KindLogin, Actor: "attacker"}))
	_, err = app.Exec(ctx, fmt.Sprintf(sealAtHeadSQL, "id DESC", "(SELECT last_value FROM audit_events_id_seq)"))
	require.NoError(t, err)
	var stored int64
	require.NoError(t, owner.QueryRow(ctx, `SELECT watermark FROM audit_seals ORDER BY seq DESC LIMIT 1`).Scan(&stored))
	require.Greater(t, stored, honest, "the stored watermark is over the writer in flight")

	n, err := sealer.Seal(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing visible to seal")
	require.NoError(t, writer.Commit(ctx))
	for range 3 {
		require.NoError(t, s.AppendEvents(ctx, audit.Event{Kind: audit.KindLogin, Actor: "later"}))
		_, err = sealer.Seal(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, sealer.Checkpoint(ctx))

	seq, seals := sealOf(t, owner, honest)
	assert.Positive(t, seq, "the event committed below the stored watermark is sealed")
	assert.Equal(t, 1, seals)
	var unsealed int
	require.NoError(t, owner.QueryRow(ctx, `SELECT count(*) FROM audit_events e
		WHERE NOT EXISTS (SELECT FROM audit_seals s WHERE s.id = e.id AND s.at = e.at)`).Scan(&unsealed))
	assert.Zero(t, unsealed)
	assert.Equal(t, 1, sealer.Stats().WatermarksRefused, "the watermark was refused")
	assert.Contains(t, logs.String(), "1 events at or below it are not sealed")

	// Both walks say ok: from the start, and from the newest checkpoint
	// with an event after it.
	opts := audit.VerifyOptions{Keys: []ed25519.PublicKey{key.Public()}, UnsealedGrace: time.Microsecond}
	r, err := audit.Verify(ctx, s, opts)
	require.NoError(t, err)
	assert.True(t, r.OK, "%+v", r)
	assert.Zero(t, r.Unsealed)
	cps, err := s.CheckpointPage(ctx, 0, 100)
	require.NoError(t, err)
	require.Len(t, cps, 2)
	require.NoError(t, s.AppendEvents(ctx, audit.Event{Kind: audit.KindLogin, Actor: "after"}))
	_, err = sealer.Seal(ctx)
	require.NoError(t, err)
	opts.From = &cps[1]
	r, err = audit.Verify(ctx, s, opts)
	require.NoError(t, err)
	assert.True(t, r.OK, "%+v", r)
	assert.Zero(t, r.Unsealed)
	r, err = audit.Verify(ctx, s, audit.VerifyOptions{Keys: opts.Keys, UnsealedGrace: time.Microsecond})
	require.NoError(t, err)
	assert.True(t, r.OK, "%+v", r)
}

// TestSealerInstancesGoByEachOthersWatermarks: with the sealing lock moving
// between two instances while a writer is in flight, each goes by the
// watermark the other stored once the writers it waits on have ended, and
// refuses none: every event is sealed once, and the chain verifies.
func TestSealerInstancesGoByEachOthersWatermarks(t *testing.T) {
	t.Parallel()
	tr := newTrail(t)
	ctx := ctxT(t)
	a := tr.sealer
	b := audit.NewSealer(tr.store, tr.key, audit.SealerConfig{CheckpointEvery: time.Hour, CheckpointQuiet: time.Hour})
	tr.append(2)
	_, err := b.Seal(ctx)
	require.NoError(t, err)
	for range 3 {
		tr.append(2)
		_, err = a.Seal(ctx)
		require.NoError(t, err)
	}

	writer, err := tr.pool.Begin(ctx)
	require.NoError(t, err)
	defer writer.Rollback(context.Background())
	held := insertEvent(t, ctx, writer, "held")
	for _, sl := range []*audit.Sealer{a, b, a, b, b} {
		tr.append(1)
		_, err = sl.Seal(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, writer.Commit(ctx))
	for _, sl := range []*audit.Sealer{a, b, b, a, a, b} {
		tr.append(1)
		_, err = sl.Seal(ctx)
		require.NoError(t, err)
	}
	seq, seals := sealOf(t, tr.pool, held)
	assert.Positive(t, seq)
	assert.Equal(t, 1, seals)
	assert.Zero(t, unsealedCount(t, tr))
	assert.Zero(t, a.Stats().WatermarksRefused)
	assert.Zero(t, b.Stats().WatermarksRefused)
	tr.checkpoint()
	r := tr.verify()
	assert.True(t, r.OK, r.Reason)
	assert.EqualValues(t, 2+6+1+5+6, r.Checked)
}
