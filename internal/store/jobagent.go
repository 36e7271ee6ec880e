package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/apperr"
)

// JobAgent implements hitl.Store: the agent whose action job id runs.
func (s *Store) JobAgent(ctx context.Context, id string) (string, error) {
	if !isUUID(id) {
		return "", apperr.NotFound("no job %q", id)
	}
	var agentID string
	err := s.pool.QueryRow(ctx, `SELECT a.agent_id FROM jobs j JOIN actions a ON a.id = j.action_id WHERE j.id = $1`, id).Scan(&agentID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", apperr.NotFound("no job %q", id)
	}
	if err != nil {
		return "", fmt.Errorf("store: the agent of job %s: %w", id, err)
	}
	return agentID, nil
}
