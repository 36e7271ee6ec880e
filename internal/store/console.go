package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/hitl"
)

// ActionsByID loads the actions with the given IDs in one query, keyed by
// ID; IDs that are malformed or unknown are left out. The console's stream
// loads each batch of change notifications with it.
func (s *Store) ActionsByID(ctx context.Context, ids []string) (map[string]*hitl.Action, error) {
	valid := make([]string, 0, len(ids))
	for _, id := range ids {
		if isUUID(id) {
			valid = append(valid, id)
		}
	}
	out := make(map[string]*hitl.Action, len(valid))
	if len(valid) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+actionColumns+` FROM actions WHERE id = ANY($1::uuid[])`, valid)
	if err != nil {
		return nil, fmt.Errorf("store: loading actions: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*hitl.Action, error) { return scanAction(r) })
	if err != nil {
		return nil, fmt.Errorf("store: loading actions: %w", err)
	}
	for _, a := range list {
		out[a.ID] = a
	}
	return out, nil
}

// AgentTokens lists the tokens issued to an agent, newest first.
func (s *Store) AgentTokens(ctx context.Context, agentID string) ([]TokenInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, kind, subject, issued_by, issued_at, expires_at, revoked_at
		FROM tokens WHERE kind = 'agent' AND subject = $1 ORDER BY issued_at DESC, id`, agentID)
	if err != nil {
		return nil, fmt.Errorf("store: listing tokens: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (TokenInfo, error) {
		var t TokenInfo
		err := r.Scan(&t.ID, &t.Kind, &t.Subject, &t.IssuedBy, &t.IssuedAt, &t.ExpiresAt, &t.RevokedAt)
		t.IssuedAt, t.ExpiresAt = t.IssuedAt.UTC(), t.ExpiresAt.UTC()
		if t.RevokedAt != nil {
			r := t.RevokedAt.UTC()
			t.RevokedAt = &r
		}
		return t, err
	})
}
