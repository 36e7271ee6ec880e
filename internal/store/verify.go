package store

import (
	"context"
	"fmt"

	"github.com/airlockhq/airlock/internal/audit"
)

// ChainPage implements audit.ChainSource: a keyset page of the seals in
// seq order, merged with their events (chainRecords).
func (s *Store) ChainPage(ctx context.Context, after int64, limit int) ([]audit.Record, error) {
	seals, err := readSeals(ctx, s.pool, limit, `SELECT `+sealColumns+` FROM audit_seals WHERE seq > $1 ORDER BY seq LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: reading the chain: %w", err)
	}
	recs, err := chainRecords(ctx, s.pool, seals, "", nil, false)
	if err != nil {
		return nil, fmt.Errorf("store: reading the chain: %w", err)
	}
	return recs, nil
}

// CheckpointPage implements audit.ChainSource.
func (s *Store) CheckpointPage(ctx context.Context, after int64, limit int) ([]audit.Checkpoint, error) {
	return checkpointPage(ctx, s.pool, `SELECT seq, hash, at, public_key, signature FROM audit_checkpoints
		WHERE seq > $1 ORDER BY seq LIMIT $2`, after, limit)
}

// Head implements audit.ChainSource.
func (s *Store) Head(ctx context.Context) (audit.Link, error) { return chainHead(ctx, s.pool) }

// ChainRange implements audit.ChainRanger.
func (s *Store) ChainRange(ctx context.Context, after, through int64) ([]audit.Record, error) {
	seals, err := readSeals(ctx, s.pool, int(min(max(through-after, 0), 10000)),
		`SELECT `+sealColumns+` FROM audit_seals WHERE seq > $1 AND seq <= $2 ORDER BY seq`, after, through)
	if err != nil {
		return nil, fmt.Errorf("store: reading the chain: %w", err)
	}
	recs, err := chainRecords(ctx, s.pool, seals, "", nil, false)
	if err != nil {
		return nil, fmt.Errorf("store: reading the chain: %w", err)
	}
	return recs, nil
}
