package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/audit"
)

// PhraseFailures implements hitl.Store.
func (s *Store) PhraseFailures(ctx context.Context, actionID, reviewer string) (int, time.Time, error) {
	if !isUUID(actionID) {
		return 0, time.Time{}, nil
	}
	var n int
	var last time.Time
	err := s.pool.QueryRow(ctx, `SELECT failures, last_at FROM phrase_failures WHERE action_id = $1 AND reviewer = $2`,
		actionID, reviewer).Scan(&n, &last)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, time.Time{}, nil
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("store: reading phrase failures: %w", err)
	}
	return n, last.UTC(), nil
}

// RecordPhraseFailure implements hitl.Store.
func (s *Store) RecordPhraseFailure(ctx context.Context, actionID, reviewer string, at time.Time, ev func(int) audit.Event) (int, error) {
	var n int
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
			INSERT INTO phrase_failures (action_id, reviewer, failures, last_at) VALUES ($1, $2, 1, $3)
			ON CONFLICT (action_id, reviewer) DO UPDATE SET failures = phrase_failures.failures + 1, last_at = excluded.last_at
			RETURNING failures`, actionID, reviewer, at).Scan(&n)
		if err != nil {
			return fmt.Errorf("store: counting a wrong phrase: %w", err)
		}
		return insertEvents(ctx, tx, ev(n))
	})
	return n, err
}
