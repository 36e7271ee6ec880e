package store_test

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
)

// An archived prefix (its events gone from the trail, as when a month's
// partition is detached) leaves the chain verifiable from a stored
// checkpoint at its end, and nothing after that checkpoint is taken on
// trust.
func TestVerifyFromACheckpoint(t *testing.T) {
	t.Parallel()
	// Twelve events, checkpoints at seq 6 and 12; the events up to seq 6
	// archived.
	setup := func(t *testing.T) (*trail, *pgx.Conn, audit.Checkpoint) {
		tr := newTrail(t)
		tr.append(6)
		tr.checkpoint()
		anchor := tr.latestCheckpoint()
		require.EqualValues(t, 6, anchor.Seq)
		tr.append(6)
		tr.checkpoint()
		su := tr.superuser()
		tr.exec(su, `DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_seals WHERE seq <= 6)`)
		return tr, su, anchor
	}

	t.Run("the archived prefix fails a walk from the start and passes one from its checkpoint", func(t *testing.T) {
		t.Parallel()
		tr, _, anchor := setup(t)
		whole := tr.verify()
		require.False(t, whole.OK)
		require.EqualValues(t, 1, whole.FirstBadSeq)
		require.Contains(t, whole.Reason, "missing: event")

		r := tr.verifyFrom(&anchor)
		require.True(t, r.OK, "%+v", r)
		require.EqualValues(t, 6, r.Checked, "the events after the checkpoint, and only those")
		require.EqualValues(t, 6, r.From)
		require.EqualValues(t, 12, r.Head.Seq)
		// A checkpoint kept elsewhere, beyond the one started from, is
		// still held against the chain; one at the same seq must agree.
		require.True(t, tr.verifyFrom(&anchor, tr.latestCheckpoint(), anchor).OK)
	})

	t.Run("a change after the checkpoint is found", func(t *testing.T) {
		t.Parallel()
		tr, su, anchor := setup(t)
		tr.exec(su, `UPDATE audit_events SET actor = 'mallory' WHERE id = (SELECT id FROM audit_seals WHERE seq = 8)`)
		r := tr.verifyFrom(&anchor)
		require.False(t, r.OK)
		require.EqualValues(t, 8, r.FirstBadSeq)
		require.Contains(t, r.Reason, "hash mismatch")
		require.EqualValues(t, 1, r.Checked)
	})

	t.Run("the chain after the checkpoint must follow from its hash", func(t *testing.T) {
		t.Parallel()
		tr, _, anchor := setup(t)
		// Signed by the audit key, at the right seq, another hash: a
		// rewritten prefix the key was made to sign.
		other := make([]byte, audit.HashSize)
		_, _ = rand.Read(other)
		forged := tr.key.Sign(anchor.Seq, other, time.Now())
		r := tr.verifyFrom(&forged)
		require.False(t, r.OK)
		require.EqualValues(t, 7, r.FirstBadSeq)
		require.Contains(t, r.Reason, "broken link")
		// … and disagrees with the checkpoint kept elsewhere at its seq.
		r = tr.verifyFrom(&forged, anchor)
		require.False(t, r.OK)
		require.EqualValues(t, 6, r.FirstBadSeq)
		require.Contains(t, r.Reason, "checkpoint mismatch")
	})

	t.Run("a checkpoint not signed by the audit key is not started from", func(t *testing.T) {
		t.Parallel()
		tr, _, anchor := setup(t)
		seed := make([]byte, 32)
		_, _ = rand.Read(seed)
		mallory, err := audit.NewSigningKey(seed)
		require.NoError(t, err)
		theirs := mallory.Sign(anchor.Seq, anchor.Hash, anchor.At)
		r := tr.verifyFrom(&theirs)
		require.False(t, r.OK)
		require.EqualValues(t, 6, r.FirstBadSeq)
		require.Contains(t, r.Reason, "not signed by the audit key")
		require.Zero(t, r.Checked)

		bad := anchor
		bad.Signature = append([]byte(nil), anchor.Signature...)
		bad.Signature[0] ^= 1
		r = tr.verifyFrom(&bad)
		require.False(t, r.OK)
		require.Contains(t, r.Reason, "does not verify")
	})

	t.Run("a chain truncated at or below the checkpoint", func(t *testing.T) {
		t.Parallel()
		tr, su, anchor := setup(t)
		tr.exec(su, `DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_seals WHERE seq >= 7)`)
		tr.exec(su, `DELETE FROM audit_seals WHERE seq >= 7`)
		r := tr.verifyFrom(&anchor)
		require.False(t, r.OK, "the checkpoint at seq 12 still covers what is gone")
		require.EqualValues(t, 7, r.FirstBadSeq)
		require.Contains(t, r.Reason, "truncated")

		tr.exec(su, `DELETE FROM audit_checkpoints WHERE seq > 6`)
		r = tr.verifyFrom(&anchor)
		require.True(t, r.OK, "nothing after the checkpoint, and nothing claims more: %+v", r)
		require.Zero(t, r.Checked)

		tr.exec(su, `DELETE FROM audit_seals WHERE seq >= 5`)
		r = tr.verifyFrom(&anchor)
		require.False(t, r.OK)
		require.EqualValues(t, 5, r.FirstBadSeq)
		require.Contains(t, r.Reason, "truncated: the chain ends at seq 4")
	})
}
