package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/hitl"
)

// CommandSetApproval implements hitl.Store: the approval of repo's command
// set hash, or nil.
func (s *Store) CommandSetApproval(ctx context.Context, repo, hash string) (*hitl.CommandSetApproval, error) {
	var c hitl.CommandSetApproval
	err := s.pool.QueryRow(ctx, `SELECT repo, hash, content, approved_by, action_id::text, approved_at
		FROM command_set_approvals WHERE repo = $1 AND hash = $2`, repo, hash).
		Scan(&c.Repo, &c.Hash, &c.Content, &c.ApprovedBy, &c.ActionID, &c.ApprovedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: reading command set approval: %w", err)
	}
	c.ApprovedAt = c.ApprovedAt.UTC()
	return &c, nil
}

// insertCommandSet records a command set approval in the approving
// transaction; a second approval of the same set replaces the first.
func insertCommandSet(ctx context.Context, tx pgx.Tx, c *hitl.CommandSetApproval) error {
	_, err := tx.Exec(ctx, `INSERT INTO command_set_approvals (repo, hash, content, approved_by, action_id, approved_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (repo, hash) DO UPDATE SET content = EXCLUDED.content, approved_by = EXCLUDED.approved_by,
			action_id = EXCLUDED.action_id, approved_at = EXCLUDED.approved_at`,
		c.Repo, c.Hash, c.Content, c.ApprovedBy, c.ActionID, c.ApprovedAt)
	if err != nil {
		return fmt.Errorf("store: recording command set approval: %w", err)
	}
	return nil
}
