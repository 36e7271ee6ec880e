package store_test

import (
	"crypto/ed25519"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

// TestVerifyReportsASecondRowOfASealedEvent: the owner inserts (no trigger
// stops an INSERT) a row with a sealed event's id and another time (the
// primary key is (id, at)): a forged approval under the real event's id.
// Verification reports it at that event's seq, whether its time falls in
// the seals' time span or another month; the export shows it unsealed,
// the chain export leaves it out. Before, both ways of verifying said ok
// (events were matched to seals by id, the first row read kept), and the
// export showed the forged row with the real event's seq and hash.
func TestVerifyReportsASecondRowOfASealedEvent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		seq   int64 // the event's: with PageSize 3, seq 3 ends a page (its time is the page's last), seq 5 is inside one
		later string
	}{{3, "1 microsecond"}, {5, "1 microsecond"}, {3, "35 days"}, {5, "-20 days"}} {
		t.Run(fmt.Sprintf("seq %d, %s later", c.seq, c.later), func(t *testing.T) {
			t.Parallel()
			tr := newTrail(t)
			tr.append(8)
			tr.checkpoint()
			require.True(t, tr.verify().OK)
			var id int64
			require.NoError(t, tr.pool.QueryRow(ctxT(t), `SELECT id FROM audit_seals WHERE seq = $1`, c.seq).Scan(&id))
			tr.exec(tr.superuser(), `INSERT INTO audit_events (id, at, kind, actor, correlation_id, data)
				SELECT id, at + $2::interval, 'action.approved', 'reviewer:forged', correlation_id, '{"note": "forged"}'
				FROM audit_events WHERE id = $1`, id, c.later)

			r := tr.verify()
			assert.False(t, r.OK)
			assert.Equal(t, c.seq, r.FirstBadSeq, r.Reason)
			assert.Contains(t, r.Reason, fmt.Sprintf("duplicate: event %d has a second row", id))

			var rows []audit.Record
			require.NoError(t, tr.store.ExportEvents(ctxT(t), audit.Filter{}, false, func(r *audit.Record) error {
				if r.ID == id {
					rows = append(rows, *r)
				}
				return nil
			}))
			require.Len(t, rows, 2)
			for _, r := range rows {
				if r.Actor == "reviewer:forged" {
					assert.Zero(t, r.Seq, "the forged row has no seal")
				} else {
					assert.Equal(t, c.seq, r.Seq)
				}
			}
			require.NoError(t, tr.store.ExportEvents(ctxT(t), audit.Filter{}, true, func(r *audit.Record) error {
				assert.NotEqual(t, "reviewer:forged", r.Actor, "the chain export holds sealed events only")
				return nil
			}))
		})
	}
}

// TestVerifyReportsUnsealedEvents: an event with no seal, once older than
// the sealer needs to reach it, is a fault wherever it is: among the ids
// of a page (an owner's backdated event under an id a rolled-back writer
// left unused), between two pages', dated ahead, and after the last seal
// (the sealer stopped: its lock held, or its watermark above everything).
// Before, verification walked the seals only: an event with no seal was
// never looked at, and the report said ok.
func TestVerifyReportsUnsealedEvents(t *testing.T) {
	t.Parallel()
	// Eight events, a thousand unused ids, eight more; one id left unused
	// by a rolled-back writer in each run of eight.
	setup := func(t *testing.T) (tr *trail, su *pgx.Conn, unused [2]int64) {
		tr = newTrail(t)
		su = tr.superuser()
		for i := range 2 {
			tr.append(4)
			require.NoError(t, su.QueryRow(ctxT(t), `SELECT nextval('audit_events_id_seq')`).Scan(&unused[i]))
			tr.append(4)
			if i == 0 {
				tr.exec(su, `SELECT setval('audit_events_id_seq', nextval('audit_events_id_seq') + 1000)`)
			}
		}
		tr.checkpoint()
		require.True(t, tr.verify().OK)
		return tr, su, unused
	}
	backdated := func(tr *trail, su *pgx.Conn, id int64, at string) {
		tr.exec(su, `INSERT INTO audit_events (id, at, kind, actor) VALUES ($1, `+at+`, 'action.approved', 'reviewer:backdated')`, id)
	}
	for _, c := range []struct {
		name   string
		insert func(tr *trail, su *pgx.Conn, unused [2]int64) int64 // returns the id inserted
	}{
		{"an unused id among a page's", func(tr *trail, su *pgx.Conn, unused [2]int64) int64 {
			backdated(tr, su, unused[1], `now() - interval '1 hour'`)
			return unused[1]
		}},
		{"an unused id among the first page's", func(tr *trail, su *pgx.Conn, unused [2]int64) int64 {
			backdated(tr, su, unused[0], `now() - interval '1 hour'`)
			return unused[0]
		}},
		{"an id between two pages'", func(tr *trail, su *pgx.Conn, unused [2]int64) int64 {
			backdated(tr, su, unused[0]+500, `now() - interval '1 hour'`)
			return unused[0] + 500
		}},
		{"an id below every sealed one", func(tr *trail, su *pgx.Conn, unused [2]int64) int64 {
			backdated(tr, su, -7, `now() - interval '1 hour'`)
			return -7
		}},
		{"dated ahead", func(tr *trail, su *pgx.Conn, unused [2]int64) int64 {
			backdated(tr, su, unused[1], `now() + interval '1 hour'`)
			return unused[1]
		}},
		{"after the last seal", func(tr *trail, su *pgx.Conn, unused [2]int64) int64 {
			var id int64
			require.NoError(t, su.QueryRow(ctxT(t), `INSERT INTO audit_events (at, kind, actor) VALUES (now() - interval '1 minute', 'auth.login', 'x'),
				(now() - interval '1 minute', 'auth.login', 'y') RETURNING id`).Scan(&id))
			return id
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tr, su, unused := setup(t)
			id := c.insert(tr, su, unused)
			r := tr.verify()
			assert.False(t, r.OK, "%+v", r)
			assert.Zero(t, r.FirstBadSeq)
			assert.Contains(t, r.Reason, "unsealed: ")
			assert.Contains(t, r.Reason, "older than 5s are not sealed")
			assert.Contains(t, r.Reason, fmt.Sprintf("(the first: event %d, at ", id))
			assert.EqualValues(t, 16, r.Checked, "the chain itself is whole")
			want := int64(1)
			if c.name == "after the last seal" {
				want = 2
			}
			assert.Equal(t, want, r.Unsealed)
		})
	}
}

// verifyWithGrace is trail.verify with unsealed events reported once
// older than grace, from the checkpoint from (nil: seq 1).
func (tr *trail) verifyWithGrace(grace time.Duration, from *audit.Checkpoint) audit.Report {
	tr.t.Helper()
	opts := audit.VerifyOptions{Keys: []ed25519.PublicKey{tr.key.Public()}, PageSize: 3, From: from, UnsealedGrace: grace}
	r, err := audit.Verify(ctxT(tr.t), tr.store, opts)
	require.NoError(tr.t, err)
	opts.Readers = 1
	paged, err := audit.Verify(ctxT(tr.t), tr.store, opts)
	require.NoError(tr.t, err)
	require.Equal(tr.t, paged, r, "a verification by checked ranges and one page by page")
	return r
}

// TestVerifyReportsEventsTheSealerDidNotReach: a session holding the
// sealer's lock stops sealing (the server's role can take it). The events
// written meanwhile are reported once older than the grace (here a
// microsecond: no test waits), from the chain's start and from the newest
// checkpoint alike (nothing sealed after it), and no longer once sealed.
func TestVerifyReportsEventsTheSealerDidNotReach(t *testing.T) {
	t.Parallel()
	tr := newTrail(t)
	ctx := ctxT(t)
	tr.append(4)
	tr.checkpoint()
	holder, err := tr.pool.Acquire(ctx)
	require.NoError(t, err)
	defer holder.Release()
	_, err = holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, store.SealLockKey)
	require.NoError(t, err)
	tr.append(3)
	n, err := tr.sealer.Seal(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "the lock is held")

	assert.True(t, tr.verify().OK, "young: the sealer may not have reached them yet")
	cp := tr.latestCheckpoint()
	for _, from := range []*audit.Checkpoint{nil, &cp} {
		r := tr.verifyWithGrace(time.Microsecond, from)
		assert.False(t, r.OK)
		assert.EqualValues(t, 3, r.Unsealed)
		assert.Contains(t, r.Reason, "unsealed: 3 events older than 1µs are not sealed")
	}

	_, err = holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, store.SealLockKey)
	require.NoError(t, err)
	tr.checkpoint()
	r := tr.verifyWithGrace(time.Microsecond, nil)
	assert.True(t, r.OK, "%+v", r)
	assert.EqualValues(t, 7, r.Checked)
}

// TestVerifyLooksPastACheckpointNoKeySigned: the server's role can store a
// checkpoint signed by a key of its own over the chain's hash (PostgreSQL
// cannot check the signature). Verification reports it, and goes on
// checking the chain after it: a change the owner makes later is reported
// first, with it. Before, the walk stopped at that checkpoint, and every
// later change hid behind it.
func TestVerifyLooksPastACheckpointNoKeySigned(t *testing.T) {
	t.Parallel()
	tr := newTrail(t)
	tr.append(9)
	tr.checkpoint()
	var hash []byte
	require.NoError(t, tr.pool.QueryRow(ctxT(t), `SELECT hash FROM audit_seals WHERE seq = 4`).Scan(&hash))
	tr.exec(tr.superuser(), `DELETE FROM audit_checkpoints`) // the one at seq 9, so that seq 4 may follow the newest
	cp := store.NewTestKey(t).Sign(4, hash, time.Now())
	app := appPool(t, testdb.Cluster(t).URL(tr.pool.Config().ConnConfig.Database))
	_, err := app.Exec(ctxT(t), `INSERT INTO audit_checkpoints VALUES ($1, $2, $3, $4, $5)`, cp.Seq, hash, cp.At, []byte(cp.PublicKey), cp.Signature)
	require.NoError(t, err)

	r := tr.verify()
	assert.False(t, r.OK)
	assert.EqualValues(t, 4, r.FirstBadSeq)
	assert.Contains(t, r.Reason, "checkpoint mismatch: the stored checkpoint at seq 4 is not signed by the audit key")
	assert.EqualValues(t, 3, r.Checked)

	tr.exec(tr.superuser(), `UPDATE audit_events SET actor = 'mallory' WHERE id = (SELECT id FROM audit_seals WHERE seq = 7)`)
	r = tr.verify()
	assert.False(t, r.OK)
	assert.EqualValues(t, 7, r.FirstBadSeq)
	assert.True(t, strings.HasPrefix(r.Reason, "hash mismatch: "), r.Reason)
	assert.Contains(t, r.Reason, "; and checkpoint mismatch: the stored checkpoint at seq 4 is not signed by the audit key")
}
