package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ServedTargets returns every target ("workspace:NAME", "repo:NAME") that
// at least one active (unrevoked, unexpired) worker token serves.
func (s *Store) ServedTargets(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT unnest(targets) FROM tokens
		WHERE kind = 'worker' AND revoked_at IS NULL AND expires_at > now() AND targets IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("store: served targets: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: served targets: %w", err)
	}
	return out, nil
}

// ServesTarget reports whether an active worker token serves target.
func (s *Store) ServesTarget(ctx context.Context, target string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tokens
		WHERE kind = 'worker' AND revoked_at IS NULL AND expires_at > now() AND $1 = ANY (targets))`, target).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("store: serves target: %w", err)
	}
	return ok, nil
}

// WorkerTokenInfo is what the embedded worker needs to know to reuse a
// token it kept: whether it still works and what it serves.
type WorkerTokenInfo struct {
	Subject   string
	Targets   []string
	ExpiresAt time.Time
	Active    bool // unrevoked and unexpired
}

// WorkerToken returns the worker token id; ok is false when there is no
// worker token of that id.
func (s *Store) WorkerToken(ctx context.Context, id string) (info WorkerTokenInfo, ok bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT subject, coalesce(targets, '{}'), expires_at, revoked_at IS NULL AND expires_at > now()
		FROM tokens WHERE id = $1 AND kind = 'worker'`, id).Scan(&info.Subject, &info.Targets, &info.ExpiresAt, &info.Active)
	if errors.Is(err, pgx.ErrNoRows) {
		return info, false, nil
	}
	if err != nil {
		return info, false, fmt.Errorf("store: worker token: %w", err)
	}
	return info, true, nil
}
