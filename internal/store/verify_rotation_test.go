package store_test

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/store"
)

// A rotated audit key: the checkpoints the old key signed keep verifying
// when it is listed as a previous key, and a checkpoint the old key signs
// after its successor (a leaked retired key, or an instance still holding
// it: it goes past the new key's checkpoints as past any other key's) is
// refused.
func TestVerifyAcrossAKeyRotation(t *testing.T) {
	t.Parallel()
	// Four events and a checkpoint (seq 4) under the old key, four more
	// and one (seq 8) under the new key, which replaced it.
	setup := func(t *testing.T) (tr *trail, old *audit.SigningKey, rotated *audit.Sealer, keys []ed25519.PublicKey) {
		tr = newTrail(t)
		old = tr.key
		tr.append(4)
		tr.checkpoint()
		tr.key = store.NewTestKey(t)
		rotated = audit.NewSealer(tr.store, tr.key, audit.SealerConfig{CheckpointEvery: time.Hour, CheckpointQuiet: time.Hour,
			PreviousKeys: []ed25519.PublicKey{old.Public()}})
		tr.sealer = rotated
		tr.append(4)
		tr.checkpoint()
		require.EqualValues(t, 8, tr.latestCheckpoint().Seq)
		return tr, old, rotated, []ed25519.PublicKey{old.Public(), tr.key.Public()}
	}
	verify := func(t *testing.T, tr *trail, keys []ed25519.PublicKey, from *audit.Checkpoint) audit.Report {
		t.Helper()
		r, err := audit.Verify(ctxT(t), tr.store, audit.VerifyOptions{Keys: keys, PageSize: 3, From: from})
		require.NoError(t, err)
		return r
	}

	t.Run("the old key's checkpoints verify when it is listed before the new one", func(t *testing.T) {
		t.Parallel()
		tr, old, _, keys := setup(t)
		r := verify(t, tr, keys, nil)
		require.True(t, r.OK, "%+v", r)
		require.EqualValues(t, 8, r.Checked)

		r = verify(t, tr, keys[1:], nil)
		require.False(t, r.OK, "without the previous key its checkpoints are nobody's")
		require.EqualValues(t, 4, r.FirstBadSeq)
		require.Contains(t, r.Reason, "not signed by the audit key")

		// A walk may start from a checkpoint the old key signed.
		first, err := tr.store.CheckpointPage(ctxT(t), 0, 1)
		require.NoError(t, err)
		require.True(t, first[0].PublicKey.Equal(old.Public()))
		r = verify(t, tr, keys, &first[0])
		require.True(t, r.OK, "%+v", r)
		require.EqualValues(t, 4, r.Checked)
	})

	t.Run("an instance still holding the old key signs after the new one, and that is reported", func(t *testing.T) {
		t.Parallel()
		// A rolling restart across a rotation: the new key's checkpoint is
		// one the old instance cannot tell from a forgery (a key the
		// server's role made), so it goes past it and signs with the
		// retired key, after its successor. Rotate with every instance
		// stopped.
		tr, old, rotated, keys := setup(t)
		var logs logBuffer
		stale := audit.NewSealer(tr.store, old, audit.SealerConfig{CheckpointEvery: time.Hour, CheckpointQuiet: time.Hour, Logger: logs.logger()})
		tr.append(2)
		require.NoError(t, stale.Checkpoint(ctxT(t)))
		require.EqualValues(t, 10, tr.latestCheckpoint().Seq)
		require.True(t, tr.latestCheckpoint().PublicKey.Equal(old.Public()))
		require.Contains(t, logs.String(), "passing over a stored checkpoint")
		require.Equal(t, 1, stale.Stats().CheckpointsSkipped)

		r := verify(t, tr, keys, nil)
		require.False(t, r.OK)
		require.EqualValues(t, 10, r.FirstBadSeq)
		require.Contains(t, r.Reason, "signed by a retired audit key, after its successor signed the one at seq 8")
		tr.append(1)
		err := rotated.Checkpoint(ctxT(t))
		require.ErrorIs(t, err, audit.ErrTampered)
		require.ErrorContains(t, err, "signed by a retired audit key, after this server signed the one at seq 8")
	})

	t.Run("the retired key signing after its successor is refused", func(t *testing.T) {
		t.Parallel()
		tr, old, rotated, keys := setup(t)
		tr.append(2)
		_, err := rotated.Seal(ctxT(t))
		require.NoError(t, err)
		var hash []byte
		su := tr.superuser()
		require.NoError(t, su.QueryRow(ctxT(t), `SELECT hash FROM audit_seals WHERE seq = 10`).Scan(&hash))
		cp := old.Sign(10, hash, time.Now()) // the chain's true hash, signed by a key that leaked
		tr.exec(su, `INSERT INTO audit_checkpoints VALUES ($1, $2, $3, $4, $5)`, cp.Seq, hash, cp.At, []byte(cp.PublicKey), cp.Signature)

		r := verify(t, tr, keys, nil)
		require.False(t, r.OK)
		require.EqualValues(t, 10, r.FirstBadSeq)
		require.Contains(t, r.Reason, "signed by a retired audit key, after its successor signed the one at seq 8")
		// … also from the new key's checkpoint.
		anchor, ok, err := tr.store.CheckpointAt(ctxT(t), 8)
		require.NoError(t, err)
		require.True(t, ok)
		r = verify(t, tr, keys, &anchor)
		require.False(t, r.OK)
		require.Contains(t, r.Reason, "signed by a retired audit key, after its successor signed the one at seq 8")

		// Nor is a walk started from the retired key's checkpoint.
		r = verify(t, tr, keys, &cp)
		require.False(t, r.OK)
		require.EqualValues(t, 10, r.FirstBadSeq)
		require.Contains(t, r.Reason, "which verification starts from, is signed by a retired audit key, after its successor signed the one at seq 8")

		// The sealer that signed at seq 8 will not sign after it.
		tr.append(1)
		err = rotated.Checkpoint(ctxT(t))
		require.ErrorIs(t, err, audit.ErrTampered)
		require.ErrorContains(t, err, "signed by a retired audit key, after this server signed the one at seq 8")
	})
}
