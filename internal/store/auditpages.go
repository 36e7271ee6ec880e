package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/airlockhq/airlock/internal/audit"
)

// QueryEventsNewest returns a page of up to f.Limit events matching f
// (f.After is ignored), newest first. With newer > 0 it is the page just
// newer than event id newer; else the page just older than event id
// older (0: the latest page). more says whether another page lies beyond
// in the query's direction: older events for an older (or latest) page,
// newer ones for a newer page.
func (s *Store) QueryEventsNewest(ctx context.Context, f audit.Filter, older, newer int64) ([]audit.Event, bool, error) {
	where, args, ok := auditWhere(f, "id", 0)
	if !ok {
		return []audit.Event{}, false, nil
	}
	order := "DESC"
	switch {
	case newer > 0:
		args = append(args, newer)
		where += fmt.Sprintf(" AND id > $%d", len(args))
		order = "ASC"
	case older > 0:
		args = append(args, older)
		where += fmt.Sprintf(" AND id < $%d", len(args))
	}
	args = append(args, f.Limit+1)
	rows, err := s.pool.Query(ctx, `SELECT `+recordColumns+` FROM audit_events WHERE `+where+
		fmt.Sprintf(` ORDER BY id %s LIMIT $%d`, order, len(args)), args...)
	if err != nil {
		return nil, false, fmt.Errorf("store: querying audit: %w", err)
	}
	recs, err := collectRecords(rows, f.Limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("store: querying audit: %w", err)
	}
	more := len(recs) > f.Limit
	if more {
		recs = recs[:f.Limit]
	}
	events := make([]audit.Event, len(recs))
	for i := range recs {
		if events[i], err = recs[i].Event(); err != nil {
			return nil, false, fmt.Errorf("store: querying audit: %w", err)
		}
	}
	if order == "ASC" {
		slices.Reverse(events)
	}
	return events, more, nil
}
