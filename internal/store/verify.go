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

// CheckpointAt returns the stored checkpoint at seq, and whether there is
// one.
func (s *Store) CheckpointAt(ctx context.Context, seq int64) (audit.Checkpoint, bool, error) {
	cps, err := checkpointPage(ctx, s.pool, `SELECT seq, hash, at, public_key, signature FROM audit_checkpoints WHERE seq = $1`, seq)
	if err != nil || len(cps) == 0 {
		return audit.Checkpoint{}, false, err
	}
	return cps[0], true, nil
}

// Head implements audit.ChainSource.
func (s *Store) Head(ctx context.Context) (audit.Link, error) { return chainHead(ctx, s.pool) }

// ChainRange implements audit.ChainRanger.
func (s *Store) ChainRange(ctx context.Context, after, through int64) ([]audit.Record, error) {
	seals, err := s.rangeSeals(ctx, after, through)
	if err != nil {
		return nil, err
	}
	recs, err := chainRecords(ctx, s.pool, seals, "", nil, false)
	if err != nil {
		return nil, fmt.Errorf("store: reading the chain: %w", err)
	}
	return recs, nil
}

// CheckedRange implements audit.ChainChecker: ChainRange with each event
// handed to check as it is read, and kept as its key and seal only. What a
// verification reads is then never copied (issue 14).
func (s *Store) CheckedRange(ctx context.Context, after, through int64, check func(*audit.Record) bool) ([]audit.Checked, error) {
	seals, err := s.rangeSeals(ctx, after, through)
	if err != nil {
		return nil, err
	}
	events := make([]audit.Checked, len(seals))
	found, err := eachSealedEvent(ctx, s.pool, seals, "", nil, func(j int, r *audit.Record) {
		events[j] = r.Checked(check(r))
	})
	if err != nil {
		return nil, fmt.Errorf("store: reading the chain: %w", err)
	}
	for j := range seals {
		if !found[j] {
			m := seals[j].missing()
			events[j] = m.Checked(false)
		}
	}
	return events, nil
}

// rangeSeals reads the seals with after < seq ≤ through, in seq order.
func (s *Store) rangeSeals(ctx context.Context, after, through int64) ([]seal, error) {
	seals, err := readSeals(ctx, s.pool, int(min(max(through-after, 0), 10000)),
		`SELECT `+sealColumns+` FROM audit_seals WHERE seq > $1 AND seq <= $2 ORDER BY seq`, after, through)
	if err != nil {
		return nil, fmt.Errorf("store: reading the chain: %w", err)
	}
	return seals, nil
}
