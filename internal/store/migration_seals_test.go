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
// chain through migrations 00029 and 00030: the seals are copied into
// audit_seals (format 1), the chain and its checkpoint verify, the seal
// columns are gone, and the sealer goes on from the migrated watermark,
// sealing the rest once, in format 2 (their events have no stored digest:
// it reads them whole), and the chain of both formats verifies.
func TestMigrationMovesSeals(t *testing.T) {
	t.Parallel()
	tr := newTrail(t)
	ctx := ctxT(t)
	up29, down29 := migrationSQL(t, "00029_audit_seals.sql")
	up30, down30 := migrationSQL(t, "00030_audit_digest.sql")
	_, down32 := migrationSQL(t, "00032_audit_json.sql") // jsonb again: the old layout's update trigger compares the values
	up36, down36 := migrationSQL(t, "00036_audit_append_guards.sql")
	for _, q := range []string{down36, down32, down30, down29} { // back to the old layout
		_, err := tr.pool.Exec(ctx, q)
		require.NoError(t, err)
	}

	for i := range 9 { // as the code of the old layout wrote them
		_, err := tr.pool.Exec(ctx, `INSERT INTO audit_events (kind, actor) VALUES ($1, $2)`, audit.KindLogin, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
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

	for _, q := range []string{up29, up30, up36} {
		_, err = tr.pool.Exec(ctx, q)
		require.NoError(t, err)
	}

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
	var formats []int16
	require.NoError(t, tr.pool.QueryRow(ctx, `SELECT array_agg(format ORDER BY seq) FROM audit_seals`).Scan(&formats))
	assert.Equal(t, []int16{1, 1, 1, 1, 1, 1, 2, 2, 2}, formats)

	// Back down past 00030 is refused once a format-2 seal exists: the code
	// before it could not verify them.
	_, err = tr.pool.Exec(ctx, down30)
	require.ErrorContains(t, err, "format-2 seals")
}

// migrationSQL returns the Up and Down sections of a migration file.
func migrationSQL(t *testing.T, name string) (up, down string) {
	t.Helper()
	b, err := migrations.FS.ReadFile(name)
	require.NoError(t, err)
	up, down, ok := strings.Cut(strings.TrimPrefix(string(b), "-- +goose Up"), "-- +goose Down")
	require.True(t, ok)
	return up, down
}
