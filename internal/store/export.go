package store

import (
	"context"
	"fmt"

	"github.com/airlockhq/airlock/internal/audit"
)

// exportPage is how many events one read of an export fetches.
const exportPage = 1000

// ExportEvents calls fn with every event matching f, a page at a time, in id
// order (bySeq false: after f.After, sealed or not, as the audit query
// pages) or in seal order (bySeq true: sealed events only, after seq
// f.After; an unfiltered export in seal order is the whole chain, which
// auditctl can verify offline). f.Limit > 0 stops after that many events.
// Memory stays at one page whatever the export's size; each page is its own
// query, so no snapshot is held for the whole export.
func (s *Store) ExportEvents(ctx context.Context, f audit.Filter, bySeq bool, fn func(*audit.Record) error) error {
	if bySeq {
		return s.exportChain(ctx, f, fn)
	}
	after, n := f.After, 0
	for {
		where, args, ok := auditWhere(f, "id", after)
		if !ok {
			return nil
		}
		limit := exportPage
		if f.Limit > 0 {
			limit = min(limit, f.Limit-n)
		}
		args = append(args, limit)
		rows, err := s.pool.Query(ctx, `SELECT `+recordColumns+` FROM audit_events WHERE `+where+
			fmt.Sprintf(` ORDER BY id LIMIT $%d`, len(args)), args...)
		if err != nil {
			return fmt.Errorf("store: exporting audit events: %w", err)
		}
		recs, err := collectRecords(rows, limit)
		if err == nil {
			err = attachSeals(ctx, s.pool, recs)
		}
		if err != nil {
			return fmt.Errorf("store: exporting audit events: %w", err)
		}
		for i := range recs {
			if err := fn(&recs[i]); err != nil {
				return err
			}
		}
		n += len(recs)
		if len(recs) < limit || (f.Limit > 0 && n >= f.Limit) {
			return nil
		}
		after = recs[len(recs)-1].ID
	}
}

// exportChain is ExportEvents in seal order: a page of seals, their events
// matching f. A seal whose event is gone is left out (the export then has a
// gap in seq, which offline verification reports).
func (s *Store) exportChain(ctx context.Context, f audit.Filter, fn func(*audit.Record) error) error {
	// The filter's conditions on the events (its cursor is the seq, below).
	where, args, ok := auditWhere(f, "id", 0)
	if !ok {
		return nil
	}
	after, n := f.After, 0
	for {
		seals, err := readSeals(ctx, s.pool, exportPage,
			`SELECT `+sealColumns+` FROM audit_seals WHERE seq > $1 ORDER BY seq LIMIT $2`, after, exportPage)
		if err != nil {
			return fmt.Errorf("store: exporting audit events: %w", err)
		}
		recs, err := chainRecords(ctx, s.pool, seals, where, args, true)
		if err != nil {
			return fmt.Errorf("store: exporting audit events: %w", err)
		}
		for i := range recs {
			if err := fn(&recs[i]); err != nil {
				return err
			}
			if n++; f.Limit > 0 && n >= f.Limit {
				return nil
			}
		}
		if len(seals) < exportPage {
			return nil
		}
		after = seals[len(seals)-1].seq
	}
}
