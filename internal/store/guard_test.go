package store_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync"
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

// appPool connects to url as the server does: assuming the role airlock_app.
func appPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	return appPoolSize(t, url, 0)
}

// appPoolSize is appPool with at most conns connections (0: pgxpool's
// default).
func appPoolSize(t *testing.T, url string, conns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	if conns > 0 {
		cfg.MaxConns = conns
	}
	cfg.ConnConfig.RuntimeParams["role"] = store.AppRole
	pool, err := pgxpool.NewWithConfig(ctxT(t), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// TestAuditGuards shows what the database itself refuses: the application
// role may insert events and their seals, nothing else; the tables'
// owner is stopped by the triggers (but could drop them: that is what
// verification is for, TestVerifyDetectsTampering).
func TestAuditGuards(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	app := appPool(t, url)
	s := store.New(app, nil)
	ctx := ctxT(t)
	require.NoError(t, s.AppendEvents(ctx,
		audit.Event{Kind: audit.KindLogin, Actor: "alice"},
		audit.Event{Kind: audit.KindLogin, Actor: "bob"},
		audit.Event{Kind: audit.KindLogin, Actor: "carol"}))
	sealer := audit.NewSealer(s, store.NewTestKey(t), audit.SealerConfig{})
	require.NoError(t, sealer.Checkpoint(ctx), "the application role seals and checkpoints")
	require.NoError(t, s.AppendEvents(ctx, audit.Event{Kind: audit.KindLogin, Actor: "dave"}))

	var who string
	require.NoError(t, app.QueryRow(ctx, `SELECT current_user`).Scan(&who))
	require.Equal(t, store.AppRole, who)
	var part string
	require.NoError(t, app.QueryRow(ctx, `SELECT tableoid::regclass::text FROM audit_events LIMIT 1`).Scan(&part))

	owner, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer owner.Close(context.Background())

	refused := []struct {
		stmt         string
		app, owner   string // the error each gets ("" = allowed)
		ownerSkipped bool
	}{
		{stmt: `UPDATE audit_events SET actor = 'mallory' WHERE actor = 'alice'`, app: "permission denied", owner: "append-only"},
		{stmt: `UPDATE audit_events SET actor = actor WHERE actor = 'alice'`, app: "permission denied", owner: "append-only"},
		{stmt: `DELETE FROM audit_events WHERE actor = 'bob'`, app: "permission denied", owner: "append-only"},
		{stmt: `TRUNCATE audit_events`, app: "permission denied", owner: "append-only"},
		{stmt: `TRUNCATE ` + part, app: "permission denied", owner: "append-only"},
		{stmt: `DELETE FROM ` + part, app: "permission denied", owner: "append-only"},
		{stmt: `UPDATE audit_seals SET hash = hash WHERE seq = 1`, app: "permission denied", owner: "append-only"},
		{stmt: `UPDATE audit_seals SET seq = 99 WHERE seq = 1`, app: "permission denied", owner: "append-only"},
		{stmt: `DELETE FROM audit_seals WHERE seq = 3`, app: "permission denied", owner: "append-only"},
		{stmt: `TRUNCATE audit_seals`, app: "permission denied", owner: "append-only"},
		// A second seal of a sealed event, or a second event at a seq.
		{stmt: `INSERT INTO audit_seals (seq, id, at, prev_hash, hash) SELECT 100, id, at, hash, hash FROM audit_seals WHERE seq = 3`,
			app: "audit_seals_event", owner: "audit_seals_event"},
		{stmt: `INSERT INTO audit_seals (seq, id, at, prev_hash, hash) SELECT 3, -id, at, hash, hash FROM audit_seals WHERE seq = 3`,
			app: "audit_seals_pkey", owner: "audit_seals_pkey"},
		// A seal past the head (the append trigger, TestAuditAppendGuards).
		{stmt: `INSERT INTO audit_seals (seq, id, at, prev_hash, hash) SELECT 100, -id, at, hash, hash FROM audit_seals WHERE seq = 3`,
			app: "does not follow the head", owner: "does not follow the head"},
		{stmt: `ALTER TABLE audit_seals DISABLE TRIGGER audit_seals_update`, app: "must be owner", ownerSkipped: true},
		{stmt: `INSERT INTO audit_events (kind, actor, at) VALUES ('x', 'y', now() - interval '1 day')`, app: "permission denied", owner: ""},
		{stmt: `UPDATE audit_checkpoints SET seq = 2`, app: "permission denied", owner: "append-only"},
		{stmt: `DELETE FROM audit_checkpoints`, app: "permission denied", owner: "append-only"},
		{stmt: `TRUNCATE audit_checkpoints`, app: "permission denied", owner: "append-only"},
		{stmt: `ALTER TABLE audit_events DISABLE TRIGGER audit_events_update`, app: "must be owner", ownerSkipped: true},
		{stmt: `ALTER TABLE audit_events DETACH PARTITION ` + part, app: "must be owner", ownerSkipped: true},
		// Not the audit's, but the database's too: agents are never
		// deleted (actions have no foreign key to them, migration 00031).
		{stmt: `DELETE FROM agents WHERE false`, app: "permission denied", owner: ""},
		{stmt: `RESET ROLE`, app: "", ownerSkipped: true}, // last: the pool's role is a session setting (see README)
	}
	for _, c := range refused {
		conn, err := app.Acquire(ctx)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, c.stmt)
		conn.Release()
		if c.app == "" {
			assert.NoError(t, err, "app: %s", c.stmt)
		} else {
			assert.ErrorContains(t, err, c.app, "app: %s", c.stmt)
		}
		if c.ownerSkipped {
			continue
		}
		_, err = owner.Exec(ctx, c.stmt)
		if c.owner == "" {
			assert.NoError(t, err, "owner: %s", c.stmt)
		} else {
			assert.ErrorContains(t, err, c.owner, "owner: %s", c.stmt)
		}
	}
	// The events table refuses every update, even one that changes nothing
	// of a row nobody sealed yet (the old layout's one exception).
	_, err = owner.Exec(ctx, `UPDATE audit_events SET kind = kind WHERE actor = 'dave'`)
	assert.ErrorContains(t, err, "append-only")
	var cols int
	require.NoError(t, owner.QueryRow(ctx, `SELECT count(*) FROM pg_attribute WHERE attrelid = 'audit_events'::regclass
		AND attname IN ('seq', 'prev_hash', 'hash') AND NOT attisdropped`).Scan(&cols))
	assert.Zero(t, cols, "the seal columns are gone from audit_events")
}

// TestConcurrentWritersOneChain: 32 writers append while three sealers (as
// three server instances would) seal; the chain ends with every event once,
// seq 1..n without gap or repeat, and verifies.
func TestConcurrentWritersOneChain(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	const writers, each = 32, 25
	ctx := ctxT(t)
	var sealers []*audit.Sealer
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	key := store.NewTestKey(t)
	for range 3 {
		s := store.New(appPool(t, url), nil)
		sealer := audit.NewSealer(s, key, audit.SealerConfig{Every: 3 * time.Millisecond, Batch: 7, CheckpointEvery: 20 * time.Millisecond})
		sealers = append(sealers, sealer)
		wg.Add(1)
		go func() { defer wg.Done(); sealer.Run(runCtx) }()
	}
	s := store.New(appPool(t, url), nil)
	var wwg sync.WaitGroup
	for w := range writers {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for i := range each {
				evs := []audit.Event{{Kind: audit.KindActionSubmitted, Actor: fmt.Sprintf("agent:w%d", w), AgentID: fmt.Sprintf("w%d", w),
					Args: map[string]any{"i": i}}}
				if i%5 == 0 { // some transactions hold two events
					evs = append(evs, audit.Event{Kind: audit.KindActionResult, Actor: "system", Data: map[string]any{"i": i}})
				}
				assert.NoError(t, s.AppendEvents(ctx, evs...))
			}
		}()
	}
	// Verifications while the chain grows and checkpoints are written see
	// a whole chain every time.
	verified := make(chan struct{})
	go func() {
		defer close(verified)
		for runCtx.Err() == nil {
			r, err := audit.Verify(ctx, s, audit.VerifyOptions{Keys: []ed25519.PublicKey{key.Public()}, PageSize: 50})
			if !assert.NoError(t, err) || !assert.True(t, r.OK, "%+v", r) {
				return
			}
		}
	}()
	wwg.Wait()
	stop()
	wg.Wait()
	<-verified
	// A sealer stopped mid-batch had its connection closed; until the server
	// notices, that backend may still hold the sealing lock. Checkpoint
	// seals everything once it gets the lock.
	var sealErr error
	require.Eventually(t, func() bool {
		sealErr = sealers[0].Checkpoint(ctx)
		return !errors.Is(sealErr, audit.ErrSealLockHeld)
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, sealErr)

	var total, sealed, distinct, maxSeq int64
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_events), count(*), count(DISTINCT id), coalesce(max(seq), 0)
		FROM audit_seals s WHERE EXISTS (SELECT FROM audit_events e WHERE e.id = s.id AND e.at = s.at)`).
		Scan(&total, &sealed, &distinct, &maxSeq))
	assert.EqualValues(t, writers*each+writers*each/5, total)
	assert.Equal(t, total, sealed, "every event sealed")
	assert.Equal(t, total, distinct, "no event twice")
	assert.Equal(t, total, maxSeq, "no gap")
	var checkpoints int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_checkpoints`).Scan(&checkpoints))
	assert.Greater(t, checkpoints, 0)

	r, err := audit.Verify(ctx, s, audit.VerifyOptions{Keys: []ed25519.PublicKey{key.Public()}})
	require.NoError(t, err)
	assert.True(t, r.OK, r.Reason)
	assert.Equal(t, total, r.Checked)
}

// sealAtHeadSQL appends, as SQL can, a correct format-2 seal at the head
// of the chain for the lowest unsealed event (ORDER BY id; the newest with
// ORDER BY id DESC), from its stored digest: the statement an injection
// would run. The %s are the order and the watermark's value.
const sealAtHeadSQL = `
WITH h AS (SELECT seq, hash FROM audit_seals ORDER BY seq DESC LIMIT 1),
     e AS (SELECT id, at, digest FROM audit_events WHERE id > (SELECT max(id) FROM audit_seals) AND digest IS NOT NULL ORDER BY %s LIMIT 1)
INSERT INTO audit_seals (seq, id, at, prev_hash, hash, format, watermark)
SELECT h.seq + 1, e.id, e.at, h.hash,
       sha256(h.hash || int4send(22) || convert_to('airlock.audit.event.v2', 'UTF8')
              || int4send(length(e.id::text)) || convert_to(e.id::text, 'UTF8')
              || int4send(27) || convert_to(to_char(e.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'UTF8')
              || int4send(32) || e.digest),
       2, %s
FROM h, e`

// TestAuditAppendGuards: what the application role may append to the
// chain and its checkpoints (migration 00036). A seal must continue the
// head (seq + 1, its hash as prev_hash) and carry no watermark above the
// last event id; a checkpoint must name a seal and its hash. Before, one
// seal with watermark 2^63-1 stopped the sealer for good, as did one
// checkpoint at max(seq) + 1 (issue: the server's role could silently stop
// sealing). A temporary table of the caller's does not fool the checks.
func TestAuditAppendGuards(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	app := appPool(t, url)
	s := store.New(app, nil)
	ctx := ctxT(t)
	require.NoError(t, s.AppendEvents(ctx, audit.Event{Kind: audit.KindLogin, Actor: "alice"}, audit.Event{Kind: audit.KindLogin, Actor: "bob"}))
	sealer := audit.NewSealer(s, store.NewTestKey(t), audit.SealerConfig{})
	require.NoError(t, sealer.Checkpoint(ctx))
	require.NoError(t, s.AppendEvents(ctx, audit.Event{Kind: audit.KindLogin, Actor: "harmless"}))

	refused := []struct{ name, stmt, err string }{
		{"a watermark of 2^63-1", fmt.Sprintf(sealAtHeadSQL, "id", "9223372036854775807"), "above the last event id"},
		{"a watermark one above the last id", fmt.Sprintf(sealAtHeadSQL, "id", "(SELECT last_value + 1 FROM audit_events_id_seq)"), "above the last event id"},
		{"a seal past the head", `INSERT INTO audit_seals (seq, id, at, prev_hash, hash, format)
			SELECT seq + 2, -1, at, hash, hash, 2 FROM audit_seals ORDER BY seq DESC LIMIT 1`, "does not follow the head"},
		{"a seal not linked to the head", `INSERT INTO audit_seals (seq, id, at, prev_hash, hash, format)
			SELECT seq + 1, -1, at, prev_hash, hash, 2 FROM audit_seals ORDER BY seq DESC LIMIT 1`, "prev_hash of seq 3 is not the hash of seq 2"},
		{"a batch whose second seal is not linked to the first", `INSERT INTO audit_seals (seq, id, at, prev_hash, hash, format)
			SELECT seq + 1, -1, at, hash, sha256('a'), 2 FROM audit_seals WHERE seq = 2
			UNION ALL SELECT seq + 2, -2, at, sha256('b'), sha256('c'), 2 FROM audit_seals WHERE seq = 2`, "prev_hash of seq 4 is not the hash of seq 3"},
		{"a batch out of order", `INSERT INTO audit_seals (seq, id, at, prev_hash, hash, format)
			SELECT seq + 2, -2, at, sha256('a'), sha256('b'), 2 FROM audit_seals WHERE seq = 2
			UNION ALL SELECT seq + 1, -1, at, hash, sha256('a'), 2 FROM audit_seals WHERE seq = 2`, "seq 4 does not follow seq 2"},
		{"a checkpoint past the head", `INSERT INTO audit_checkpoints (seq, hash, at, public_key, signature)
			SELECT max(seq) + 1, sha256('x'), now(), sha256('k'), sha512('s') FROM audit_seals`, "no seal at seq 3"},
		{"a checkpoint far past the head", `INSERT INTO audit_checkpoints (seq, hash, at, public_key, signature)
			VALUES (9223372036854775807, sha256('x'), now(), sha256('k'), sha512('s'))`, "no seal at seq"},
		{"a checkpoint with another hash", `INSERT INTO audit_checkpoints (seq, hash, at, public_key, signature)
			VALUES (1, sha256('x'), now(), sha256('k'), sha512('s'))`, "no seal at seq 1 with the checkpoint's hash"},
		{"a checkpoint below the newest", `INSERT INTO audit_checkpoints (seq, hash, at, public_key, signature)
			SELECT seq, hash, now(), sha256('k'), sha512('s') FROM audit_seals WHERE seq = 1`, "seq 1 is not above the newest checkpoint's (seq 2)"},
	}
	for _, c := range refused {
		_, err := app.Exec(ctx, c.stmt)
		assert.ErrorContains(t, err, c.err, c.name)
	}

	// The caller's temporary audit_seals (searched before the schema's)
	// changes nothing: the trigger reads the schema's table.
	conn, err := app.Acquire(ctx)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `CREATE TEMP TABLE audit_seals (seq bigint, hash bytea)`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO pg_temp.audit_seals VALUES (9223372036854775806, sha256('x'))`)
	require.NoError(t, err)
	var schema string
	require.NoError(t, conn.QueryRow(ctx, `SELECT nspname FROM pg_namespace n JOIN pg_class c ON c.relnamespace = n.oid
		WHERE c.relname = 'audit_events_id_seq'`).Scan(&schema))
	_, err = conn.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.audit_seals (seq, id, at, prev_hash, hash, format)
		VALUES (9223372036854775807, -1, now(), sha256('x'), sha256('y'), 2)`, pgx.Identifier{schema}.Sanitize()))
	assert.ErrorContains(t, err, "does not follow the head of the chain (seq 2)")
	_, err = conn.Exec(ctx, `DROP TABLE pg_temp.audit_seals`)
	require.NoError(t, err)
	conn.Release()

	// What continues the chain goes in: the seal without a watermark (a
	// correct one, which the sealer would have written), and a checkpoint
	// of a seal, whatever signs it (the sealer skips one it cannot verify).
	_, err = app.Exec(ctx, fmt.Sprintf(sealAtHeadSQL, "id", "NULL"))
	require.NoError(t, err)
	_, err = app.Exec(ctx, `INSERT INTO audit_checkpoints (seq, hash, at, public_key, signature)
		SELECT seq, hash, now(), sha256('k'), sha512('s') FROM audit_seals WHERE seq = 3`)
	require.NoError(t, err)
}
