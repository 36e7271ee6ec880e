package store_test

import (
	"crypto/ed25519"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/migrations"
)

// TestMigrationMovesSeals: a trail sealed in the old layout (seal columns
// on audit_events, filled by UPDATE), with events left unsealed, keeps its
// chain through migration 00029: the seals are copied into audit_seals,
// the chain and its checkpoint verify, the seal columns are gone, and the
// sealer goes on from the migrated watermark, sealing the rest once.
func TestMigrationMovesSeals(t *testing.T) {
	t.Parallel()
	tr := newTrail(t)
	ctx := ctxT(t)
	up, err := migrations.FS.ReadFile("00029_audit_seals.sql")
	require.NoError(t, err)
	upSQL, downSQL, ok := strings.Cut(strings.TrimPrefix(string(up), "-- +goose Up"), "-- +goose Down")
	require.True(t, ok)
	_, err = tr.pool.Exec(ctx, downSQL) // back to the old layout
	require.NoError(t, err)

	for i := range 9 {
		require.NoError(t, tr.store.AppendEvents(ctx, audit.Event{Kind: audit.KindLogin, Actor: fmt.Sprintf("u%d", i)}))
	}
	// The old sealer's work on the first six, as it did it.
	rows, err := tr.pool.Query(ctx, `SELECT id, at, kind, actor FROM audit_events ORDER BY id LIMIT 6`)
	require.NoError(t, err)
	var recs []audit.Record
	for rows.Next() {
		var r audit.Record
		require.NoError(t, rows.Scan(&r.ID, &r.At, &r.Kind, &r.Actor))
		r.At = r.At.UTC()
		recs = append(recs, r)
	}
	require.NoError(t, rows.Err())
	var h audit.Hasher
	prev := audit.Genesis
	for i, r := range recs {
		sum, err := h.Hash(prev, &r)
		require.NoError(t, err)
		_, err = tr.pool.Exec(ctx, `UPDATE audit_events SET seq = $2, prev_hash = $3, hash = $4 WHERE id = $1`, r.ID, i+1, prev, sum)
		require.NoError(t, err)
		prev = sum
	}
	cp := tr.key.Sign(6, prev, time.Now())
	_, err = tr.pool.Exec(ctx, `INSERT INTO audit_checkpoints (seq, hash, at, public_key, signature) VALUES ($1, $2, $3, $4, $5)`,
		cp.Seq, []byte(cp.Hash), cp.At, []byte(cp.PublicKey), cp.Signature)
	require.NoError(t, err)

	_, err = tr.pool.Exec(ctx, upSQL)
	require.NoError(t, err)

	var seals, watermark int64
	require.NoError(t, tr.pool.QueryRow(ctx, `SELECT count(*), coalesce(max(watermark), 0) FROM audit_seals`).Scan(&seals, &watermark))
	assert.EqualValues(t, 6, seals)
	assert.Equal(t, recs[5].ID, watermark, "below the first unsealed event")
	r := tr.verify()
	assert.True(t, r.OK, r.Reason)
	assert.EqualValues(t, 6, r.Checked)
	var cols int
	require.NoError(t, tr.pool.QueryRow(ctx, `SELECT count(*) FROM pg_attribute WHERE attrelid = 'audit_events'::regclass
		AND attname IN ('seq', 'prev_hash', 'hash') AND NOT attisdropped`).Scan(&cols))
	assert.Zero(t, cols)

	n, err := tr.sealer.Seal(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	tr.checkpoint()
	r, err = audit.Verify(ctx, tr.store, audit.VerifyOptions{Keys: []ed25519.PublicKey{tr.key.Public()}, External: []audit.Checkpoint{cp}})
	require.NoError(t, err)
	assert.True(t, r.OK, r.Reason)
	assert.EqualValues(t, 9, r.Checked)
}
