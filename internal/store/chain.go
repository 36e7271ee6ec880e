package store

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/audit"
)

// The read side of the seal layout (migration 00029): the chain is
// audit_seals in seq order, each seal naming its event by (id, at). Readers
// do not join the two tables (PostgreSQL 15 plans such a join over every
// partition of audit_events): they read a page of seals, then the page's
// events with one range scan of the primary key over the page's ids (and
// its time span, which prunes the partitions), and match them in Go.

// sealColumns is the column list collectSeals reads, in order.
const sealColumns = `seq, id, at, prev_hash, hash, format`

// seal is one audit_seals row.
type seal struct {
	seq, id    int64
	at         time.Time
	prev, hash []byte
	format     int // audit.FormatV1 or FormatV2
}

// apply sets r's seal to s.
func (s *seal) apply(r *audit.Record) {
	r.Seq, r.PrevHash, r.Hash, r.SealFormat = s.seq, s.prev, s.hash, s.format
}

// collectSeals reads rows of sealColumns, decoding the binary wire format
// into one buffer for the page's hashes.
func collectSeals(rows pgx.Rows, capacity int) ([]seal, error) {
	defer rows.Close()
	for _, fd := range rows.FieldDescriptions() {
		if fd.Format != pgx.BinaryFormatCode {
			return nil, fmt.Errorf("store: seal column %s is not in binary format", fd.Name)
		}
	}
	if len(rows.FieldDescriptions()) != 6 {
		return nil, fmt.Errorf("store: unexpected seal columns")
	}
	out := make([]seal, 0, capacity)
	buf := make([]byte, 0, 2*audit.HashSize*capacity)
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != 6 || len(raw[0]) != 8 || len(raw[1]) != 8 || len(raw[2]) != 8 || len(raw[5]) != 2 {
			return nil, fmt.Errorf("store: unexpected seal row")
		}
		s := seal{
			seq:    int64(binary.BigEndian.Uint64(raw[0])),
			id:     int64(binary.BigEndian.Uint64(raw[1])),
			at:     pgEpoch.Add(time.Duration(int64(binary.BigEndian.Uint64(raw[2]))) * time.Microsecond),
			format: int(int16(binary.BigEndian.Uint16(raw[5]))),
		}
		start := len(buf)
		buf = append(buf, raw[3]...)
		mid := len(buf)
		buf = append(buf, raw[4]...)
		s.prev, s.hash = buf[start:mid:mid], buf[mid:len(buf):len(buf)]
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func readSeals(ctx context.Context, q querier, capacity int, sql string, args ...any) ([]seal, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("store: reading seals: %w", err)
	}
	seals, err := collectSeals(rows, capacity)
	if err != nil {
		return nil, fmt.Errorf("store: reading seals: %w", err)
	}
	return seals, nil
}

// chainRecords returns the records of seals, in seals' order, each its
// event with its seal. A seal whose event is not in the table comes back
// as a record with the seal alone and Missing set (verification reports
// it), or, when skipMissing, not at all. filter (conditions on audit_events
// over args, numbered from $1) narrows the events read; a seal whose event
// it leaves out counts as missing.
func chainRecords(ctx context.Context, q querier, seals []seal, filter string, args []any, skipMissing bool) ([]audit.Record, error) {
	if len(seals) == 0 {
		return []audit.Record{}, nil
	}
	events, err := sealedEvents(ctx, q, seals, filter, args)
	if err != nil {
		return nil, err
	}
	out := make([]audit.Record, 0, len(seals))
	next := 0 // seals mostly follow ids: the event after the last one found is tried first
	for _, s := range seals {
		i, found := next, next < len(events) && events[next].ID == s.id
		if !found {
			i, found = slices.BinarySearchFunc(events, s.id, func(r audit.Record, id int64) int { return cmp.Compare(r.ID, id) })
		}
		if found {
			next = i + 1
		}
		var r audit.Record
		switch {
		case found:
			r = events[i]
		case skipMissing:
			continue
		default:
			r = audit.Record{ID: s.id, At: s.at.UTC(), Missing: true}
		}
		s.apply(&r)
		out = append(out, r)
	}
	return out, nil
}

// sealedEvents reads the events seals name, ordered by id: the bulk with
// one range scan over the densest span of their ids (most of a page: seals
// follow ids but for the few events that committed late), the rest by id.
func sealedEvents(ctx context.Context, q querier, seals []seal, filter string, args []any) ([]audit.Record, error) {
	ids := make([]int64, len(seals))
	for i, s := range seals {
		ids[i] = s.id
	}
	slices.Sort(ids)
	// The widest window of ids no more than about twice as wide as the page
	// (ids not in the page are read and dropped: a little waste, no probe).
	span := int64(2*len(ids) + 256)
	lo, hi, j := 0, 0, 0
	for i := range ids {
		for ids[i]-ids[j] > span {
			j++
		}
		if i-j > hi-lo {
			lo, hi = j, i
		}
	}
	inRange := func(id int64) bool { return id >= ids[lo] && id <= ids[hi] }
	minAt, maxAt := timeBounds(seals, inRange)
	n := len(args)
	where := fmt.Sprintf(`id >= $%d AND id <= $%d AND at >= $%d AND at <= $%d`, n+1, n+2, n+3, n+4)
	events, err := readEvents(ctx, q, len(seals), joinConds(filter, where), append(args, ids[lo], ids[hi], minAt, maxAt)...)
	if err != nil {
		return nil, err
	}
	if lo == 0 && hi == len(ids)-1 {
		return events, nil
	}
	rest := slices.Concat(ids[:lo], ids[hi+1:])
	minAt, maxAt = timeBounds(seals, func(id int64) bool { return !inRange(id) })
	where = fmt.Sprintf(`id = ANY($%d) AND at >= $%d AND at <= $%d`, n+1, n+2, n+3)
	more, err := readEvents(ctx, q, len(rest), joinConds(filter, where), append(args[:n:n], rest, minAt, maxAt)...)
	if err != nil {
		return nil, err
	}
	events = append(events, more...)
	slices.SortFunc(events, func(a, b audit.Record) int { return cmp.Compare(a.ID, b.ID) })
	return events, nil
}

func timeBounds(seals []seal, keep func(id int64) bool) (lo, hi time.Time) {
	first := true
	for _, s := range seals {
		if !keep(s.id) {
			continue
		}
		if first || s.at.Before(lo) {
			lo = s.at
		}
		if first || s.at.After(hi) {
			hi = s.at
		}
		first = false
	}
	return lo, hi
}

func joinConds(conds ...string) string {
	var b strings.Builder
	for _, c := range conds {
		if c == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(" AND ")
		}
		b.WriteString(c)
	}
	return b.String()
}

// readEvents reads the events where says, in id order. The order is put
// in Go, not asked of PostgreSQL: a generic plan over the partitions reads
// a range with bitmap scans and sorted it, copying every row once more
// (issue 14: 8 % of a verification), while the rows come in id order, or
// nearly, either way.
func readEvents(ctx context.Context, q querier, capacity int, where string, args ...any) ([]audit.Record, error) {
	rows, err := q.Query(ctx, `SELECT `+recordColumns+` FROM audit_events WHERE `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("store: reading audit events: %w", err)
	}
	recs, err := collectRecords(rows, capacity)
	if err != nil {
		return nil, fmt.Errorf("store: reading audit events: %w", err)
	}
	if byID := func(a, b audit.Record) int { return cmp.Compare(a.ID, b.ID) }; !slices.IsSortedFunc(recs, byID) {
		slices.SortFunc(recs, byID)
	}
	return recs, nil
}

// attachSeals fills in the seals of recs (events in id order, as a page of
// the trail is read): one scan of the seals' id index over the page's ids
// when they are dense, else one lookup per id.
func attachSeals(ctx context.Context, q querier, recs []audit.Record) error {
	if len(recs) == 0 {
		return nil
	}
	lo, hi := recs[0].ID, recs[len(recs)-1].ID
	var seals []seal
	var err error
	if hi-lo <= int64(4*len(recs)+64) {
		seals, err = readSeals(ctx, q, len(recs), `SELECT `+sealColumns+` FROM audit_seals WHERE id >= $1 AND id <= $2`, lo, hi)
	} else {
		ids := make([]int64, len(recs))
		for i := range recs {
			ids[i] = recs[i].ID
		}
		seals, err = readSeals(ctx, q, len(recs), `SELECT `+sealColumns+` FROM audit_seals WHERE id = ANY($1)`, ids)
	}
	if err != nil {
		return err
	}
	slices.SortFunc(seals, func(a, b seal) int { return cmp.Compare(a.id, b.id) })
	for i := range recs {
		r := &recs[i]
		if j, ok := slices.BinarySearchFunc(seals, r.ID, func(s seal, id int64) int { return cmp.Compare(s.id, id) }); ok {
			seals[j].apply(r)
		}
	}
	return nil
}
