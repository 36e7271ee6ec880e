package store_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

// trail is a test database with a store, a sealer and the key it signs with.
type trail struct {
	t      *testing.T
	pool   *pgxpool.Pool
	store  *store.Store
	key    *audit.SigningKey
	sealer *audit.Sealer
}

func newTrail(t *testing.T) *trail {
	t.Helper()
	pool := testdb.New(t)
	s := store.New(pool, nil)
	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	key, err := audit.NewSigningKey(seed)
	require.NoError(t, err)
	// Checkpoints only when a test asks (Checkpoint).
	sealer := audit.NewSealer(s, key, audit.SealerConfig{CheckpointEvery: time.Hour, CheckpointQuiet: time.Hour})
	return &trail{t: t, pool: pool, store: s, key: key, sealer: sealer}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// append writes n events of varied shapes.
func (tr *trail) append(n int) {
	tr.t.Helper()
	ctx := ctxT(tr.t)
	for i := range n {
		ev := audit.Event{Kind: audit.KindActionSubmitted, Actor: fmt.Sprintf("agent:a%d", i%3), AgentID: fmt.Sprintf("a%d", i%3),
			CorrelationID: fmt.Sprintf("corr-%d", i/2), Tool: "payments.send",
			Args:     map[string]any{"amount": 100.5 + float64(i), "to": "acme ✓ \"quoted\"\n", "nested": map[string]any{"z": []any{1, "two", nil, true}, "a": 1e21}},
			Risk:     []byte(`{"level": "low", "score": 5, "reasons": []}`),
			Decision: []byte(`{"effect": "allow", "rule_id": "spend", "policy_version": 3}`)}
		if i%2 == 0 {
			ev.ActionID = uuid.NewString()
			ev.Data = map[string]any{"i": i}
		}
		require.NoError(tr.t, tr.store.AppendEvents(ctx, ev))
	}
}

// checkpoint seals everything and stores a checkpoint of the head.
func (tr *trail) checkpoint() {
	tr.t.Helper()
	require.NoError(tr.t, tr.sealer.Checkpoint(ctxT(tr.t)))
}

// verify verifies the chain both ways the store serves a verification:
// ranges read at once and checked as they are read (audit.ChainChecker),
// and pages one after the other, hashed by the walk. Both must say the
// same.
func (tr *trail) verify(external ...audit.Checkpoint) audit.Report {
	tr.t.Helper()
	return tr.verifyFrom(nil, external...)
}

// verifyFrom is verify starting from the checkpoint from (nil: seq 1).
func (tr *trail) verifyFrom(from *audit.Checkpoint, external ...audit.Checkpoint) audit.Report {
	tr.t.Helper()
	opts := audit.VerifyOptions{Keys: []ed25519.PublicKey{tr.key.Public()}, External: external, PageSize: 3, From: from}
	r, err := audit.Verify(ctxT(tr.t), tr.store, opts)
	require.NoError(tr.t, err)
	opts.Readers = 1
	paged, err := audit.Verify(ctxT(tr.t), tr.store, opts)
	require.NoError(tr.t, err)
	require.Equal(tr.t, paged, r, "a verification by checked ranges and one page by page")
	return r
}

// superuser returns a connection to the test database as a superuser with
// the triggers switched off: what someone with full control of the
// database can do.
func (tr *trail) superuser() *pgx.Conn {
	tr.t.Helper()
	ctx := ctxT(tr.t)
	conn, err := pgx.Connect(ctx, testdb.Cluster(tr.t).URL(tr.pool.Config().ConnConfig.Database))
	require.NoError(tr.t, err)
	tr.t.Cleanup(func() { conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, `SET session_replication_role = replica`)
	require.NoError(tr.t, err)
	return conn
}

func (tr *trail) exec(conn *pgx.Conn, sql string, args ...any) {
	tr.t.Helper()
	_, err := conn.Exec(ctxT(tr.t), sql, args...)
	require.NoError(tr.t, err, sql)
}

func (tr *trail) latestCheckpoint() audit.Checkpoint {
	tr.t.Helper()
	cps, err := tr.store.CheckpointPage(ctxT(tr.t), 0, 1000)
	require.NoError(tr.t, err)
	require.NotEmpty(tr.t, cps)
	return cps[len(cps)-1]
}

func TestSealAndVerify(t *testing.T) {
	t.Parallel()
	tr := newTrail(t)
	r := tr.verify()
	assert.True(t, r.OK)
	assert.Zero(t, r.Checked)

	tr.append(7)
	n, err := tr.sealer.Seal(ctxT(t))
	require.NoError(t, err)
	assert.Equal(t, 7, n)
	tr.append(3)
	tr.checkpoint()
	r = tr.verify()
	assert.True(t, r.OK, r.Reason)
	assert.EqualValues(t, 10, r.Checked)
	assert.EqualValues(t, 10, r.Head.Seq)
	assert.Len(t, r.Head.Hash, 32)

	// The first seal wrote a checkpoint (there was none), the forced one
	// another: both sign the chain as it is.
	cps, err := tr.store.CheckpointPage(ctxT(t), 0, 10)
	require.NoError(t, err)
	require.Len(t, cps, 2)
	assert.EqualValues(t, []int64{7, 10}, []int64{cps[0].Seq, cps[1].Seq})
	assert.Equal(t, []byte(r.Head.Hash), []byte(cps[1].Hash))
	for _, cp := range cps {
		require.NoError(t, cp.Verify())
	}

	// Each record's hash is recomputable from the record alone.
	var recs []audit.Record
	require.NoError(t, tr.store.ExportEvents(ctxT(t), audit.Filter{}, true, func(r *audit.Record) error {
		recs = append(recs, *r)
		return nil
	}))
	require.Len(t, recs, 10)
	var h audit.Hasher
	for i, rec := range recs {
		assert.EqualValues(t, i+1, rec.Seq)
		sum, err := h.Hash(rec.PrevHash, &rec)
		require.NoError(t, err)
		assert.Equal(t, []byte(rec.Hash), sum)
	}
	assert.Equal(t, audit.Genesis, []byte(recs[0].PrevHash))

	// Nothing left: sealing again seals nothing and writes no checkpoint.
	n, err = tr.sealer.Seal(ctxT(t))
	require.NoError(t, err)
	assert.Zero(t, n)
}

// TestVerifyDetectsTampering changes the sealed trail directly in SQL as a
// superuser with the triggers off, and checks that verification names the
// first bad sequence number each time.
// TestWriterDigests: the digest a writer stores with an event (format 2)
// is the one verification works out from what the database kept, however
// the JSON was spelled (jsonb respells it); an event the writer could not
// digest (a repeated key) is stored without one and sealed from its
// content; and a wrong stored digest is sealed as given and caught by
// verification, which never trusts it.
func TestWriterDigests(t *testing.T) {
	t.Parallel()
	tr := newTrail(t)
	ctx := ctxT(t)
	spellings := []string{
		`{"score": 1E2, "level" : "l\u00e9vel", "reasons":[ ] , "x": -0.0, "y": 1.50, "z": 12345678901234567890.000}`,
		`{"b":{"d":[1,2.0,{"f":"\ud83d\ude00"}],"c":null},"a":"\/\"<>&\u2028","aa":true}`,
		`{"big": 1e40, "tiny": 0.000001e-3, "neg": -12.50e+1}`,
		`{"to":"a","to":"b"}`, // jsonb keeps the last; the canonical form refuses it: no digest
	}
	for i, sp := range spellings {
		ev := audit.Event{Kind: audit.KindActionSubmitted, Actor: "agent:a", AgentID: "a", CorrelationID: fmt.Sprintf("c%d", i),
			ActionID: strings.ToUpper(uuid.NewString()), Tool: "payments.send", Args: map[string]any{"i": i, "s": "é\n\u0001"},
			Risk: []byte(sp), Decision: []byte(`{"effect": "allow"}`)}
		require.NoError(t, tr.store.AppendEvents(ctx, ev))
	}
	var withDigest, without int
	require.NoError(t, tr.pool.QueryRow(ctx, `SELECT count(digest), count(*) - count(digest) FROM audit_events`).Scan(&withDigest, &without))
	assert.Equal(t, len(spellings)-1, withDigest)
	assert.Equal(t, 1, without, "the repeated key")
	tr.checkpoint()
	r := tr.verify()
	require.True(t, r.OK, r.Reason)
	assert.EqualValues(t, len(spellings), r.Checked)
	// jsonb keeps a number's trailing zeros (1.50, 2.0, -12.50e+1 as
	// -125.0), which the canonical form drops, and so does verification's
	// quick path: every event takes it (the first three took the full path
	// before it dropped them).
	var quick []bool
	var h audit.Hasher
	recs, err := tr.store.ChainPage(ctx, 0, 100)
	require.NoError(t, err)
	for i := range recs {
		quick = append(quick, h.QuickMatches(recs[i].PrevHash, &recs[i]))
	}
	assert.Equal(t, []bool{true, true, true, true}, quick)
	var formats []int16
	require.NoError(t, tr.pool.QueryRow(ctx, `SELECT array_agg(DISTINCT format) FROM audit_seals`).Scan(&formats))
	assert.Equal(t, []int16{2}, formats)

	// A writer that stored the wrong digest: sealed as given, and
	// verification reports it at its seq.
	su := tr.superuser()
	tr.exec(su, `INSERT INTO audit_events (kind, actor, digest) VALUES ('auth.login', 'bob', $1)`, make([]byte, 32))
	tr.append(2)
	tr.checkpoint()
	r = tr.verify()
	assert.False(t, r.OK)
	assert.EqualValues(t, len(spellings)+1, r.FirstBadSeq)
	assert.Contains(t, r.Reason, "hash mismatch")
}

func TestVerifyDetectsTampering(t *testing.T) {
	t.Parallel()
	// Twelve events; checkpoints at seq 6 and seq 12.
	setup := func(t *testing.T) *trail {
		tr := newTrail(t)
		tr.append(6)
		tr.checkpoint()
		tr.append(6)
		tr.checkpoint()
		require.True(t, tr.verify().OK)
		return tr
	}
	cases := []struct {
		name    string
		tamper  func(tr *trail, su *pgx.Conn)
		badSeq  int64
		reason  string
		extOnly bool // detected only through the checkpoint kept elsewhere
	}{
		{name: "change one field", badSeq: 5, reason: "hash mismatch", tamper: func(tr *trail, su *pgx.Conn) {
			tr.exec(su, `UPDATE audit_events SET actor = 'mallory' WHERE id = (SELECT id FROM audit_seals WHERE seq = 5)`)
		}},
		{name: "change one number in args", badSeq: 8, reason: "hash mismatch", tamper: func(tr *trail, su *pgx.Conn) {
			tr.exec(su, `UPDATE audit_events SET args = jsonb_set(args::jsonb, '{amount}', '1') WHERE id = (SELECT id FROM audit_seals WHERE seq = 8)`)
		}},
		{name: "delete a middle row", badSeq: 4, reason: "missing: event", tamper: func(tr *trail, su *pgx.Conn) {
			tr.exec(su, `DELETE FROM audit_events WHERE id = (SELECT id FROM audit_seals WHERE seq = 4)`)
		}},
		{name: "delete a middle row and its seal", badSeq: 4, reason: "gap", tamper: func(tr *trail, su *pgx.Conn) {
			tr.exec(su, `DELETE FROM audit_events WHERE id = (SELECT id FROM audit_seals WHERE seq = 4)`)
			tr.exec(su, `DELETE FROM audit_seals WHERE seq = 4`)
		}},
		{name: "change a seal's format", badSeq: 6, reason: "hash mismatch", tamper: func(tr *trail, su *pgx.Conn) {
			tr.exec(su, `UPDATE audit_seals SET format = 1 WHERE seq = 6`)
		}},
		{name: "unseal a row", badSeq: 3, reason: "gap", tamper: func(tr *trail, su *pgx.Conn) {
			tr.exec(su, `DELETE FROM audit_seals WHERE seq = 3`)
		}},
		{name: "swap two rows' places", badSeq: 7, reason: "broken link", tamper: func(tr *trail, su *pgx.Conn) {
			tr.exec(su, `UPDATE audit_seals SET seq = seq + 1000 WHERE seq IN (7, 9)`)
			tr.exec(su, `UPDATE audit_seals SET seq = CASE seq WHEN 1007 THEN 9 ELSE 7 END WHERE seq IN (1007, 1009)`)
		}},
		{name: "swap two seals' events", badSeq: 7, reason: "hash mismatch", tamper: func(tr *trail, su *pgx.Conn) {
			tr.exec(su, `UPDATE audit_seals SET id = -id WHERE seq IN (7, 9)`)
			tr.exec(su, `
				WITH a AS (SELECT id, at FROM audit_seals WHERE seq = 7), b AS (SELECT id, at FROM audit_seals WHERE seq = 9)
				UPDATE audit_seals s SET id = -CASE WHEN s.seq = 7 THEN b.id ELSE a.id END, at = CASE WHEN s.seq = 7 THEN b.at ELSE a.at END
				FROM a, b WHERE s.seq IN (7, 9)`)
		}},
		{name: "swap two rows' contents", badSeq: 2, reason: "hash mismatch", tamper: func(tr *trail, su *pgx.Conn) {
			tr.exec(su, `
				WITH x AS (SELECT id FROM audit_seals WHERE seq = 2), y AS (SELECT id FROM audit_seals WHERE seq = 3),
					a AS (SELECT e.* FROM audit_events e, x WHERE e.id = x.id), b AS (SELECT e.* FROM audit_events e, y WHERE e.id = y.id)
				UPDATE audit_events e SET actor = CASE WHEN e.id = a.id THEN b.actor ELSE a.actor END,
					args = CASE WHEN e.id = a.id THEN b.args ELSE a.args END
				FROM a, b WHERE e.id IN (a.id, b.id)`)
		}},
		{name: "seal one event twice", badSeq: 11, reason: "hash mismatch", tamper: func(tr *trail, su *pgx.Conn) {
			tr.exec(su, `ALTER TABLE audit_seals DROP CONSTRAINT audit_seals_event`)
			tr.exec(su, `UPDATE audit_seals SET id = s.id, at = s.at FROM audit_seals s WHERE s.seq = 10 AND audit_seals.seq = 11`)
		}},
		{name: "truncate the tail", badSeq: 10, reason: "truncated", tamper: func(tr *trail, su *pgx.Conn) {
			tr.exec(su, `DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_seals WHERE seq >= 10)`)
			tr.exec(su, `DELETE FROM audit_seals WHERE seq >= 10`)
		}},
		{name: "truncate the tail's seals", badSeq: 10, reason: "truncated", tamper: func(tr *trail, su *pgx.Conn) {
			tr.exec(su, `DELETE FROM audit_seals WHERE seq >= 10`)
		}},
		{name: "truncate the tail's events", badSeq: 10, reason: "missing: event", tamper: func(tr *trail, su *pgx.Conn) {
			tr.exec(su, `DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_seals WHERE seq >= 10)`)
		}},
		{name: "truncate the tail and its checkpoints", badSeq: 10, reason: "truncated", extOnly: true, tamper: func(tr *trail, su *pgx.Conn) {
			tr.exec(su, `DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_seals WHERE seq >= 10)`)
			tr.exec(su, `DELETE FROM audit_seals WHERE seq >= 10`)
			tr.exec(su, `DELETE FROM audit_checkpoints WHERE seq >= 10`)
		}},
		{name: "rewrite the chain consistently", badSeq: 12, reason: "checkpoint mismatch", tamper: func(tr *trail, su *pgx.Conn) {
			tr.rewrite(su, 8)
		}},
		{name: "rewrite the chain consistently from an older seq", badSeq: 6, reason: "checkpoint mismatch", tamper: func(tr *trail, su *pgx.Conn) {
			tr.rewrite(su, 2)
		}},
		{name: "rewrite the chain and forge its checkpoints", badSeq: 6, reason: "not signed by the audit key", tamper: func(tr *trail, su *pgx.Conn) {
			tr.rewrite(su, 2)
			tr.exec(su, `DELETE FROM audit_checkpoints`)
			forger := store.NewTestKey(t)
			for _, seq := range []int64{6, 12} {
				var hash []byte
				require.NoError(t, su.QueryRow(ctxT(t), `SELECT hash FROM audit_seals WHERE seq = $1`, seq).Scan(&hash))
				cp := forger.Sign(seq, hash, time.Now())
				tr.exec(su, `INSERT INTO audit_checkpoints VALUES ($1, $2, $3, $4, $5)`, cp.Seq, hash, cp.At, []byte(cp.PublicKey), cp.Signature)
			}
		}},
		{name: "rewrite the chain and drop its checkpoints", badSeq: 12, reason: "checkpoint mismatch", extOnly: true, tamper: func(tr *trail, su *pgx.Conn) {
			tr.rewrite(su, 2)
			tr.exec(su, `DELETE FROM audit_checkpoints`)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tr := setup(t)
			kept := tr.latestCheckpoint() // exported and kept elsewhere before the tampering
			c.tamper(tr, tr.superuser())

			r := tr.verify()
			if c.extOnly {
				assert.True(t, r.OK, "without the kept checkpoint this is undetectable: %+v", r)
				r = tr.verify(kept)
				assert.Contains(t, r.Reason, "external")
			}
			assert.False(t, r.OK)
			assert.Equal(t, c.badSeq, r.FirstBadSeq, r.Reason)
			assert.Contains(t, r.Reason, c.reason)
			assert.Less(t, r.Checked, int64(12))
			t.Logf("%s: first_bad_seq %d: %s", c.name, r.FirstBadSeq, r.Reason)
		})
	}
}

// rewrite changes the event at seq from and recomputes every hash after it,
// as someone who knows the (public) algorithm would: the chain stays
// internally consistent.
func (tr *trail) rewrite(su *pgx.Conn, from int64) {
	tr.t.Helper()
	ctx := ctxT(tr.t)
	tr.exec(su, `UPDATE audit_events SET tool = 'payments.refund' WHERE id = (SELECT id FROM audit_seals WHERE seq = $1)`, from)
	var recs []audit.Record
	require.NoError(tr.t, tr.store.ExportEvents(ctx, audit.Filter{}, true, func(r *audit.Record) error {
		if r.Seq >= from-1 {
			recs = append(recs, *r)
		}
		return nil
	}))
	var h audit.Hasher
	prev := []byte(recs[0].Hash)
	for _, r := range recs[1:] {
		sum, err := h.Hash(prev, &r)
		require.NoError(tr.t, err)
		tr.exec(su, `UPDATE audit_seals SET prev_hash = $2, hash = $3 WHERE seq = $1`, r.Seq, prev, sum)
		prev = sum
	}
}

// TestSealerRefusesToSignATamperedChain: once the chain no longer holds the
// newest checkpoint, or a checkpoint this sealer signed has gone, sealing
// stops instead of vouching for the change; new events wait unsealed.
func TestSealerRefusesToSignATamperedChain(t *testing.T) {
	t.Parallel()
	t.Run("rewritten", func(t *testing.T) {
		t.Parallel()
		tr := newTrail(t)
		tr.append(4)
		tr.checkpoint()
		tr.rewrite(tr.superuser(), 2)
		tr.append(1)
		err := tr.sealer.Checkpoint(ctxT(t))
		require.ErrorIs(t, err, audit.ErrTampered)
		assert.ErrorContains(t, err, "no longer matches the checkpoint at seq 4")
		var unsealed int
		require.NoError(t, tr.pool.QueryRow(ctxT(t), `SELECT count(*) FROM audit_events e WHERE NOT EXISTS (SELECT FROM audit_seals s WHERE s.id = e.id)`).Scan(&unsealed))
		assert.Equal(t, 1, unsealed)
	})
	t.Run("checkpoints deleted", func(t *testing.T) {
		t.Parallel()
		tr := newTrail(t)
		tr.append(3)
		tr.checkpoint()
		tr.exec(tr.superuser(), `DELETE FROM audit_checkpoints`)
		tr.append(1)
		err := tr.sealer.Checkpoint(ctxT(t))
		require.ErrorIs(t, err, audit.ErrTampered)
		assert.ErrorContains(t, err, "seq 3 is gone")
	})
	t.Run("checkpoints deleted after the sealer read them", func(t *testing.T) {
		t.Parallel()
		// The sealer keeps the newest checkpoint it goes by: it reads it
		// again each batch, so that one gone is seen.
		tr := newTrail(t)
		tr.append(3)
		tr.checkpoint()
		tr.append(1)
		_, err := tr.sealer.Seal(ctxT(t))
		require.NoError(t, err)
		tr.exec(tr.superuser(), `DELETE FROM audit_checkpoints`)
		tr.append(1)
		err = tr.sealer.Checkpoint(ctxT(t))
		require.ErrorIs(t, err, audit.ErrTampered)
		assert.ErrorContains(t, err, "seq 3 is gone")
	})
}

// lostCommit is a store whose sealing transactions roll back after the
// batch ran while lose is set: a batch cut short (a server stopping, a
// connection lost) after it signed its checkpoint.
type lostCommit struct {
	*store.Store
	lose bool
}

func (l *lostCommit) WithSealLock(ctx context.Context, fn func(audit.SealTx) error) (bool, error) {
	return l.Store.WithSealLock(ctx, func(tx audit.SealTx) error {
		if err := fn(tx); err != nil || !l.lose {
			return err
		}
		return errors.New("the commit was lost")
	})
}

// TestSealerForgetsACheckpointRolledBack: a checkpoint signed in a batch
// whose transaction never committed was never stored; the sealer must not
// take its absence later for tampering (it did: "the checkpoint this
// server signed at seq 3 is gone", seen in TestConcurrentWritersOneChain
// when a sealer was stopped mid-batch).
func TestSealerForgetsACheckpointRolledBack(t *testing.T) {
	t.Parallel()
	tr := newTrail(t)
	ctx := ctxT(t)
	tr.append(3)
	s := &lostCommit{Store: tr.store, lose: true}
	sealer := audit.NewSealer(s, tr.key, audit.SealerConfig{CheckpointEvery: time.Hour, CheckpointQuiet: time.Hour})
	require.ErrorContains(t, sealer.Checkpoint(ctx), "the commit was lost")
	cps, err := tr.store.CheckpointPage(ctx, 0, 10)
	require.NoError(t, err)
	require.Empty(t, cps, "nothing of the lost batch is stored")

	s.lose = false
	require.NoError(t, sealer.Checkpoint(ctx))
	tr.append(2)
	require.NoError(t, sealer.Checkpoint(ctx))
	assert.Equal(t, int64(5), tr.latestCheckpoint().Seq)
	assert.True(t, tr.verify().OK)
}
