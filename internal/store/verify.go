package store

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

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
func (s *Store) CheckedRange(ctx context.Context, after, through int64, check func(*audit.Record) bool) (audit.CheckedPage, error) {
	seals, err := s.rangeSeals(ctx, after, through)
	if err != nil {
		return audit.CheckedPage{}, err
	}
	return s.checkedSeals(ctx, seals, check)
}

// CheckedAfter implements audit.ChainChecker: CheckedRange of a keyset page
// of the seals.
func (s *Store) CheckedAfter(ctx context.Context, after int64, limit int, check func(*audit.Record) bool) (audit.CheckedPage, error) {
	seals, err := readSeals(ctx, s.pool, limit, `SELECT `+sealColumns+` FROM audit_seals WHERE seq > $1 ORDER BY seq LIMIT $2`, after, limit)
	if err != nil {
		return audit.CheckedPage{}, fmt.Errorf("store: reading the chain: %w", err)
	}
	return s.checkedSeals(ctx, seals, check)
}

// checkedSeals reads the events of seals, every row of their ids' window
// whatever its time, and checks each against its seal; the window's rows
// that no seal of the page names are sorted out (strays).
func (s *Store) checkedSeals(ctx context.Context, seals []seal, check func(*audit.Record) bool) (audit.CheckedPage, error) {
	page := audit.CheckedPage{Events: make([]audit.Checked, len(seals))}
	var others []audit.Stray // rows of no seal of the page's, nor of their ids
	// The ids' rows in every month: no plan prunes the partitions, and
	// PostgreSQL, finding the generic plan dearer than a custom one, made
	// a custom plan over all of them for each page (16 ms at 16 months,
	// more than reading the page's 5,000 events; verification ran at 180
	// against 330 k events/s on a loaded machine). The generic plan (an
	// index scan of each month, the ids given at run time) is made once
	// per connection; BEGIN and the settings go in one round trip. A
	// generic plan costs its parameters' ranges by default selectivities:
	// at 20 M events that passed jit_above_cost for the sealer's key read
	// and bought an LLVM compilation per execution (660 ms, README
	// "Performance"), so these reads never compile.
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: `BEGIN READ ONLY; SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL jit = off`})
	if err != nil {
		return page, fmt.Errorf("store: reading the chain: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	found, window, err := eachSealedEvent(ctx, tx, seals, "", nil, true, func(j int, r *audit.Record) {
		page.Events[j] = r.Checked(check(r))
	}, func(r *audit.Record, sealSeq int64) {
		st := audit.Stray{ID: r.ID, At: r.At, Seq: sealSeq}
		if sealSeq > 0 {
			page.Strays = append(page.Strays, st)
		} else {
			others = append(others, st)
		}
	})
	if err != nil {
		return page, fmt.Errorf("store: reading the chain: %w", err)
	}
	page.Window = window
	for j := range seals {
		if !found[j] {
			m := seals[j].missing()
			page.Events[j] = m.Checked(false)
		}
	}
	if len(others) > 0 {
		strays, err := sealedElsewhere(ctx, tx, others)
		if err != nil {
			return page, fmt.Errorf("store: reading the chain: %w", err)
		}
		page.Strays = append(page.Strays, strays...)
	}
	return page, nil
}

// sealedElsewhere drops the rows of rows that a seal names (on another
// page: an event that committed late, or the next page's) and returns the
// others: a second row of a sealed event (Seq the seal's), or an event
// with no seal (its Age by the database's clock). One probe of the seals'
// id index per row; a page has few (none, when the seals follow ids).
func sealedElsewhere(ctx context.Context, q querier, rows []audit.Stray) ([]audit.Stray, error) {
	ids := make([]int64, len(rows))
	for i := range rows {
		ids[i] = rows[i].ID
	}
	var now time.Time
	var sealIDs, sealSeqs []int64
	var sealAts []time.Time
	if err := q.QueryRow(ctx, `SELECT now(), coalesce(array_agg(id), '{}'), coalesce(array_agg(at), '{}'), coalesce(array_agg(seq), '{}')
		FROM audit_seals WHERE id = ANY($1)`, ids).Scan(&now, &sealIDs, &sealAts, &sealSeqs); err != nil {
		return nil, err
	}
	byID := make(map[int64]int, len(sealIDs))
	for i, id := range sealIDs {
		byID[id] = i
	}
	var out []audit.Stray
	for _, r := range rows {
		if i, ok := byID[r.ID]; ok {
			if sealAts[i].Equal(r.At) {
				continue
			}
			r.Seq = sealSeqs[i]
		} else {
			r.Age = now.Sub(r.At)
		}
		out = append(out, r)
	}
	return out, nil
}

// unsealedPage is how many events UnsealedEvents reads at a time.
const unsealedPage = 5000

// UnsealedEvents implements audit.StrayFinder: the events of ranges, those
// older (or dated later) than grace by the database's clock only, read a
// page at a time in id order (ranges of a few ids together, by id), and
// the seals of their ids. The ids no page of a verification read are
// few: where a page's window ends and the next one's starts, and what was
// written after the walk began, which is mostly young.
func (s *Store) UnsealedEvents(ctx context.Context, ranges []audit.IDRange, aboveSealed bool, grace time.Duration) (int64, audit.Stray, error) {
	var n int64
	var first audit.Stray
	var now time.Time
	var maxSealed *int64
	if err := s.pool.QueryRow(ctx, `SELECT now(), (SELECT max(id) FROM audit_seals)`).Scan(&now, &maxSealed); err != nil {
		return 0, first, fmt.Errorf("store: looking for unsealed events: %w", err)
	}
	if aboveSealed {
		lo := int64(math.MinInt64)
		if maxSealed != nil {
			lo = *maxSealed + 1
		}
		ranges = append(slices.Clip(ranges), audit.IDRange{Lo: lo, Hi: math.MaxInt64})
	}
	old, ahead := now.Add(-grace), now.Add(grace)
	count := func(rows []audit.Stray) error {
		unsealed, err := sealedElsewhere(ctx, s.pool, rows)
		if err != nil {
			return err
		}
		for _, r := range unsealed {
			if n == 0 || r.ID < first.ID {
				first = r
			}
			n++
		}
		return nil
	}
	var ids []int64
	for _, r := range ranges {
		if r.Empty() {
			continue
		}
		if uint64(r.Hi)-uint64(r.Lo) < 64 {
			for id := r.Lo; ; id++ {
				ids = append(ids, id)
				if id == r.Hi {
					break
				}
			}
			continue
		}
		for lo := r.Lo; ; {
			rows, err := readStrays(ctx, s.pool, `id >= $1 AND id <= $2 AND (at < $3 OR at > $4) ORDER BY id LIMIT `+strconv.Itoa(unsealedPage),
				lo, r.Hi, old, ahead)
			if err == nil && len(rows) > 0 {
				err = count(rows)
			}
			if err != nil {
				return 0, first, fmt.Errorf("store: looking for unsealed events: %w", err)
			}
			if len(rows) < unsealedPage || rows[len(rows)-1].ID == math.MaxInt64 {
				break
			}
			lo = rows[len(rows)-1].ID + 1
		}
	}
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), unsealedPage)]
		ids = ids[len(chunk):]
		rows, err := readStrays(ctx, s.pool, `id = ANY($1) AND (at < $2 OR at > $3)`, chunk, old, ahead)
		if err == nil && len(rows) > 0 {
			err = count(rows)
		}
		if err != nil {
			return 0, first, fmt.Errorf("store: looking for unsealed events: %w", err)
		}
	}
	return n, first, nil
}

// readStrays reads the keys (id, at) of the events where says.
func readStrays(ctx context.Context, q querier, where string, args ...any) ([]audit.Stray, error) {
	rows, err := q.Query(ctx, `SELECT id, at FROM audit_events WHERE `+where, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (audit.Stray, error) {
		var s audit.Stray
		err := row.Scan(&s.ID, &s.At)
		return s, err
	})
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
