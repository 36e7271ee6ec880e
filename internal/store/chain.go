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
	recs := make([]audit.Record, len(seals))
	page := newRecordPage(len(seals))
	found, _, err := eachSealedEvent(ctx, q, seals, filter, args, false, func(j int, r *audit.Record) {
		recs[j] = page.keep(r)
	}, nil)
	if err != nil {
		return nil, err
	}
	out := recs[:0]
	for j := range seals {
		switch {
		case found[j]:
			out = append(out, recs[j])
		case !skipMissing:
			out = append(out, seals[j].missing())
		}
	}
	return out, nil
}

// missing returns the record of a seal whose event is not in the trail:
// the seal, its event's key, and Missing.
func (s *seal) missing() audit.Record {
	r := audit.Record{ID: s.id, At: s.at.UTC(), Missing: true}
	s.apply(&r)
	return r
}

// eachSealedEvent reads the events seals name and calls fn(j, r) for each
// seal j whose event it read, r being that event with seal j applied. r's
// text and JSON fields are valid only during the call (recordDecoder).
// The events come with one range scan over the densest span of the seals'
// ids (most of a page: seals follow ids but for the few events that
// committed late; ids in the span that no seal names are read and
// dropped: a little waste, no probe), window, the rest by id. An event is
// its seal's when it has the seal's id and time: the primary key is (id,
// at), and a second row with a sealed event's id (the owner can insert
// one) is not that event. found says which seals' events were read.
//
// The time span of the seals prunes the months read, unless anyAt: then
// every row of the ids is read, whatever its time, and stray (when not
// nil) is called with each row read that no seal of seals names, and the
// seq of a seal of its id (a second row of a sealed event), else 0 (an
// event sealed on another page, or not at all). Verification reads so.
func eachSealedEvent(ctx context.Context, q querier, seals []seal, filter string, args []any, anyAt bool,
	fn func(j int, r *audit.Record), stray func(r *audit.Record, sealSeq int64)) (found []bool, window audit.IDRange, err error) {
	found, window = make([]bool, len(seals)), audit.IDRange{Lo: 1}
	if len(seals) == 0 {
		return found, window, nil
	}
	// The seals' indices in id order: an event's seals are a run of it.
	byID := make([]int32, len(seals))
	for j := range byID {
		byID[j] = int32(j)
	}
	slices.SortStableFunc(byID, func(a, b int32) int { return cmp.Compare(seals[a].id, seals[b].id) })
	idAt := func(k int) int64 { return seals[byID[k]].id }
	// The widest window of ids no more than about twice as wide as the page.
	span := int64(2*len(seals) + 256)
	lo, hi, w := 0, 0, 0
	for k := range byID {
		for idAt(k)-idAt(w) > span {
			w++
		}
		if k-w > hi-lo {
			lo, hi = w, k
		}
	}
	window = audit.IDRange{Lo: idAt(lo), Hi: idAt(hi)}
	inRange := func(id int64) bool { return id >= idAt(lo) && id <= idAt(hi) }
	n := len(args)
	type eventsQuery struct {
		where string
		args  []any
	}
	var queries []eventsQuery
	if anyAt {
		queries = append(queries, eventsQuery{fmt.Sprintf(`id >= $%d AND id <= $%d`, n+1, n+2), append(slices.Clip(args), idAt(lo), idAt(hi))})
	} else {
		minAt, maxAt := timeBounds(seals, inRange)
		queries = append(queries, eventsQuery{
			fmt.Sprintf(`id >= $%d AND id <= $%d AND at >= $%d AND at <= $%d`, n+1, n+2, n+3, n+4),
			append(slices.Clip(args), idAt(lo), idAt(hi), minAt, maxAt),
		})
	}
	if lo > 0 || hi < len(byID)-1 {
		var rest []int64
		for k := range byID {
			if k < lo || k > hi {
				rest = append(rest, idAt(k))
			}
		}
		if anyAt {
			queries = append(queries, eventsQuery{fmt.Sprintf(`id = ANY($%d)`, n+1), append(slices.Clip(args), rest)})
		} else {
			minAt, maxAt := timeBounds(seals, func(id int64) bool { return !inRange(id) })
			queries = append(queries, eventsQuery{fmt.Sprintf(`id = ANY($%d) AND at >= $%d AND at <= $%d`, n+1, n+2, n+3),
				append(slices.Clip(args), rest, minAt, maxAt)})
		}
	}
	next := 0 // events mostly come in id order: the seals after the last match are tried first
	var r audit.Record
	for _, qy := range queries {
		err := eachEvent(ctx, q, joinConds(filter, qy.where), qy.args, &r, func() {
			k := next
			if k >= len(byID) || idAt(k) != r.ID {
				k, _ = slices.BinarySearchFunc(byID, r.ID, func(j int32, id int64) int { return cmp.Compare(seals[j].id, id) })
			}
			matched, other := false, int64(0)
			for ; k < len(byID) && idAt(k) == r.ID; k++ {
				j := int(byID[k])
				if !seals[j].at.Equal(r.At) {
					other = seals[j].seq
					continue
				}
				matched = true
				if found[j] {
					continue
				}
				found[j] = true
				seals[j].apply(&r)
				fn(j, &r)
			}
			if !matched && stray != nil {
				stray(&r, other)
			}
			next = k
		})
		if err != nil {
			return nil, window, err
		}
	}
	return found, window, nil
}

// eachEvent reads the events where says (rows of recordColumns), decoding
// each into r before calling fn.
func eachEvent(ctx context.Context, q querier, where string, args []any, r *audit.Record, fn func()) error {
	rows, err := q.Query(ctx, `SELECT `+recordColumns+` FROM audit_events WHERE `+where, args...)
	if err != nil {
		return fmt.Errorf("store: reading audit events: %w", err)
	}
	defer rows.Close()
	dec, err := newRecordDecoder(rows.FieldDescriptions())
	if err != nil {
		return fmt.Errorf("store: reading audit events: %w", err)
	}
	for rows.Next() {
		if err := dec.decode(rows.RawValues(), r); err != nil {
			return fmt.Errorf("store: reading audit events: %w", err)
		}
		fn()
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: reading audit events: %w", err)
	}
	return nil
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
// when they are dense, else one lookup per id. A record gets the seal of
// its id and time (id, at) only.
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
		// The event's seal names its id and its time: a second row with a
		// sealed event's id is shown unsealed, never with that seal.
		if j, ok := slices.BinarySearchFunc(seals, r.ID, func(s seal, id int64) int { return cmp.Compare(s.id, id) }); ok && seals[j].at.Equal(r.At) {
			seals[j].apply(r)
		}
	}
	return nil
}
