package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/hitl"
)

// InsertBatch implements hitl.BatchStore.
func (s *Store) InsertBatch(ctx context.Context, b *hitl.Batch, ev audit.Event) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO batches (id, created_by, tool, action_ids, phrase, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			b.ID, b.CreatedBy, b.Tool, b.IDs, b.ConfirmationPhrase, b.CreatedAt)
		if err != nil {
			return fmt.Errorf("store: inserting batch: %w", err)
		}
		return insertEvents(ctx, tx, ev)
	})
}

// Batch implements hitl.BatchStore.
func (s *Store) Batch(ctx context.Context, id string) (*hitl.Batch, error) {
	b := &hitl.Batch{}
	var ids []string
	err := s.pool.QueryRow(ctx, `SELECT id::text, created_by, tool, action_ids::text[], phrase, created_at, approved_at FROM batches WHERE id = $1`, id).
		Scan(&b.ID, &b.CreatedBy, &b.Tool, &ids, &b.ConfirmationPhrase, &b.CreatedAt, &b.ApprovedAt)
	if err != nil {
		return nil, fmt.Errorf("store: reading batch: %w", notFound(err, "no batch %s", id))
	}
	b.IDs = ids
	b.CreatedAt = b.CreatedAt.UTC()
	if b.ApprovedAt != nil {
		t := b.ApprovedAt.UTC()
		b.ApprovedAt = &t
	}
	return b, nil
}

// UseBatch implements hitl.BatchStore.
func (s *Store) UseBatch(ctx context.Context, id string, at time.Time, ev audit.Event) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE batches SET approved_at = $2 WHERE id = $1 AND approved_at IS NULL`, id, at)
		if err != nil {
			return fmt.Errorf("store: using batch: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return apperr.Conflict("batch %s was approved already; select the actions again", id)
		}
		return insertEvents(ctx, tx, ev)
	})
}
