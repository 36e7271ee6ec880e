package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/airlockhq/airlock/internal/audit"
)

// AppRole is the database role the server runs as (created by the
// migrations): it may insert audit events and their seals, change neither,
// and owns nothing (README "Audit trail").
const AppRole = "airlock_app"

// sealLockKey is the advisory lock the sealer holds while it seals a batch.
const sealLockKey int64 = 0x61697273_65616c31 // "airseal1"

// recordColumns is the column list recordDecoder decodes, in order. The
// seal is not among them: it lives in audit_seals (sealColumns), and
// readers merge the two in Go (attachSeals, eachSealedEvent).
const recordColumns = `id, at, kind, actor, agent_id, agent_instance, conversation_id, step_id, correlation_id,
	action_id, tool, args, risk, decision, data`

// collectRecords reads rows of recordColumns. Audit reads are the bulk
// path (verification walks every event), so values are decoded from their
// binary wire format (recordDecoder) and kept in two per-page buffers
// (recordPage), one for the text fields and one for the byte fields,
// instead of a dozen values allocated per row.
func collectRecords(rows pgx.Rows, capacity int) ([]audit.Record, error) {
	defer rows.Close()
	dec, err := newRecordDecoder(rows.FieldDescriptions())
	if err != nil {
		return nil, err
	}
	recs := make([]audit.Record, 0, capacity)
	page := newRecordPage(capacity)
	var r audit.Record
	for rows.Next() {
		if err := dec.decode(rows.RawValues(), &r); err != nil {
			return nil, err
		}
		recs = append(recs, page.keep(&r))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return recs, nil
}

// recordDecoder decodes rows of recordColumns from their binary wire format.
type recordDecoder struct {
	jsonb [4]bool  // args, risk, decision, data: jsonb in binary format (a version byte, then the text)
	uuid  [36]byte // the row's action_id as text
}

func newRecordDecoder(fds []pgconn.FieldDescription) (recordDecoder, error) {
	var d recordDecoder
	if len(fds) != 15 {
		return d, fmt.Errorf("store: unexpected audit columns")
	}
	for i, fd := range fds {
		switch {
		case i >= 2 && i <= 8 || i == 10: // text: the same bytes either way
		case i >= 11 && i <= 14: // json (since migration 00032; jsonb before): the text, or for jsonb in binary version 1 and the text
			d.jsonb[i-11] = fd.Format == pgx.BinaryFormatCode && fd.DataTypeOID == pgtype.JSONBOID
		case fd.Format != pgx.BinaryFormatCode:
			return d, fmt.Errorf("store: audit column %s is not in binary format", fd.Name)
		}
	}
	return d, nil
}

// decode sets r to the row raw. Its text and JSON fields are raw's bytes
// (action_id the decoder's), not copies: valid until the next row is read
// (recordPage.keep copies them), and never to be written.
func (d *recordDecoder) decode(raw [][]byte, r *audit.Record) error {
	if len(raw) != 15 || len(raw[0]) != 8 || len(raw[1]) != 8 {
		return fmt.Errorf("store: unexpected audit row")
	}
	*r = audit.Record{
		ID: int64(binary.BigEndian.Uint64(raw[0])),
		At: pgEpoch.Add(time.Duration(int64(binary.BigEndian.Uint64(raw[1]))) * time.Microsecond),
	}
	for i, dst := range [8]*string{&r.Kind, &r.Actor, &r.AgentID, &r.AgentInstance, &r.ConversationID, &r.StepID, &r.CorrelationID, &r.Tool} {
		v := raw[[8]int{2, 3, 4, 5, 6, 7, 8, 10}[i]]
		*dst = unsafe.String(unsafe.SliceData(v), len(v))
	}
	if raw[9] != nil {
		if len(raw[9]) != 16 {
			return fmt.Errorf("store: unexpected uuid")
		}
		appendUUID(d.uuid[:0], [16]byte(raw[9]))
		r.ActionID = unsafe.String(&d.uuid[0], len(d.uuid))
	}
	for i, dst := range [4]*json.RawMessage{&r.Args, &r.Risk, &r.Decision, &r.Data} {
		v := raw[11+i]
		if v == nil {
			continue
		}
		if d.jsonb[i] {
			if len(v) == 0 || v[0] != 1 { // jsonb's binary format: version 1, then the text
				return fmt.Errorf("store: unexpected jsonb format")
			}
			v = v[1:]
		}
		*dst = v[:len(v):len(v)]
	}
	return nil
}

// recordPage keeps decoded records, their text and JSON fields copied into
// two buffers that only grow: bytes once handed out are never written again.
type recordPage struct {
	text, bin []byte
}

func newRecordPage(capacity int) *recordPage {
	return &recordPage{text: make([]byte, 0, 128*capacity), bin: make([]byte, 0, 512*capacity)}
}

// keep returns r with its text and JSON fields copied into the page.
func (p *recordPage) keep(r *audit.Record) audit.Record {
	out := *r
	for _, dst := range [9]*string{&out.Kind, &out.Actor, &out.AgentID, &out.AgentInstance, &out.ConversationID, &out.StepID, &out.CorrelationID, &out.ActionID, &out.Tool} {
		if *dst == "" {
			continue
		}
		start := len(p.text)
		p.text = append(p.text, *dst...)
		*dst = unsafe.String(&p.text[start], len(p.text)-start)
	}
	for _, dst := range [4]*json.RawMessage{&out.Args, &out.Risk, &out.Decision, &out.Data} {
		if *dst == nil {
			continue
		}
		start := len(p.bin)
		p.bin = append(p.bin, *dst...)
		*dst = p.bin[start:len(p.bin):len(p.bin)]
	}
	return out
}

// pgEpoch is where PostgreSQL's binary timestamps count from.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// appendUUID appends b as a lowercase 8-4-4-4-12 UUID.
func appendUUID(dst []byte, b [16]byte) []byte {
	const hexDigits = "0123456789abcdef"
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hexDigits[c>>4], hexDigits[c&0xf])
	}
	return dst
}

// WithSealLock implements audit.SealStore with a transaction-scoped
// advisory lock, tried without waiting: writers never take it, so sealing
// never holds up a submit, and of several instances one seals at a time.
func (s *Store) WithSealLock(ctx context.Context, fn func(audit.SealTx) error) (bool, error) {
	var got bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// Its own statement: what the batch reads next must be read after the
		// lock is held, so that the previous holder's commit is visible.
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, sealLockKey).Scan(&got); err != nil {
			return fmt.Errorf("store: sealing lock: %w", err)
		}
		if !got {
			return nil
		}
		return fn(sealTx{tx})
	})
	return got, err
}

type sealTx struct{ tx pgx.Tx }

// Head implements audit.SealTx. The watermark is on the last seal of every
// batch; should the newest seals be gone, an older watermark is still true.
func (t sealTx) Head(ctx context.Context) (audit.Link, audit.StoredWatermark, error) {
	var w audit.StoredWatermark
	l, err := chainHead(ctx, t.tx)
	if err != nil || l.Seq == 0 {
		return l, w, err
	}
	err = t.tx.QueryRow(ctx, `SELECT watermark, seq FROM audit_seals WHERE watermark IS NOT NULL ORDER BY seq DESC LIMIT 1`).Scan(&w.ID, &w.Seq)
	if err != nil && err != pgx.ErrNoRows {
		return l, w, fmt.Errorf("store: reading the sealing watermark: %w", err)
	}
	return l, w, nil
}

// WatermarkAtMost implements audit.SealTx: the watermarks above id are
// passed over, newest first.
func (t sealTx) WatermarkAtMost(ctx context.Context, id int64) (int64, error) {
	var w int64
	err := t.tx.QueryRow(ctx, `SELECT watermark FROM audit_seals WHERE watermark IS NOT NULL AND watermark <= $1 ORDER BY seq DESC LIMIT 1`, id).Scan(&w)
	if err != nil && err != pgx.ErrNoRows {
		return 0, fmt.Errorf("store: reading the sealing watermark: %w", err)
	}
	return w, nil
}

// LastID implements audit.SealTx.
func (t sealTx) LastID(ctx context.Context) (int64, error) {
	var id int64
	if err := t.tx.QueryRow(ctx, lastIDSQL).Scan(&id); err != nil {
		return 0, fmt.Errorf("store: reading the last event id: %w", err)
	}
	return id, nil
}

// lastIDSQL reads the highest id the events' sequence handed out.
const lastIDSQL = `SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM audit_events_id_seq`

// Unsealed implements audit.SealTx with range scans and no join (a join,
// or NOT EXISTS, lets the planner hash the whole seal table): first the ids
// sealed above after (those sealed while the watermark waited, one index
// range). Between after and the highest of them, the ids not sealed (the
// gaps: ids of late, aborted or still open transactions) are few, and are
// looked up by id; above it, the events are one range scan (keysAbove).
// With many gaps (rolled back writers), the events above after are read
// and the sealed ones dropped here. Nobody seals in between: the caller
// holds the sealing lock. Each event comes with its key and its writer's
// digest (sealKeyColumns); only the few stored without one are read whole
// (withContent).
func (t sealTx) Unsealed(ctx context.Context, after int64, limit int) ([]audit.Record, error) {
	rows, err := t.tx.Query(ctx, `SELECT id FROM audit_seals WHERE id > $1 ORDER BY id`, after)
	if err != nil {
		return nil, fmt.Errorf("store: reading unsealed events: %w", err)
	}
	sealed, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("store: reading unsealed events: %w", err)
	}
	var recs []audit.Record
	if n := int64(len(sealed)); n == 0 || sealed[n-1]-after-n <= maxGaps {
		top := after
		if n > 0 {
			top = sealed[n-1]
		}
		gaps := make([]int64, 0, top-after-n)
		next := after + 1
		for _, id := range sealed {
			for ; next < id; next++ {
				gaps = append(gaps, next)
			}
			next = id + 1
		}
		if len(gaps) > 0 {
			if recs, err = readKeys(ctx, t.tx, `SELECT `+sealKeyColumns+` FROM audit_events WHERE id = ANY($1) ORDER BY id`, gaps); err != nil {
				return nil, fmt.Errorf("store: reading unsealed events: %w", err)
			}
		}
		if len(recs) < limit {
			more, err := keysAbove(ctx, t.tx, top, limit)
			if err != nil {
				return nil, fmt.Errorf("store: reading unsealed events: %w", err)
			}
			recs = append(recs, more...)
		}
		return withContent(ctx, t.tx, recs[:min(len(recs), limit)])
	}
	if recs, err = readKeys(ctx, t.tx, `SELECT `+sealKeyColumns+` FROM audit_events WHERE id > $1 ORDER BY id LIMIT $2`,
		after, limit+len(sealed)); err != nil {
		return nil, fmt.Errorf("store: reading unsealed events: %w", err)
	}
	out, j := recs[:0], 0
	for _, r := range recs {
		for j < len(sealed) && sealed[j] < r.ID {
			j++
		}
		if j < len(sealed) && sealed[j] == r.ID {
			continue
		}
		out = append(out, r)
	}
	return withContent(ctx, t.tx, out[:min(len(out), limit)])
}

// keysAbove reads the keys of up to limit events above id, lowest first:
// the read every sealer tick makes. It runs on its generic plan, planned
// once per connection: a custom plan cost ~2.5 ms of planning a tick over
// the partitions, and, with the newest partition's statistics behind its
// rows, appended and sorted every event above id (8.1 ms against 0.8 ms
// for 1,000 keys). The limit is a constant in the statement's text: a
// generic plan's LIMIT $2 is costed at a tenth of the rows below it, which
// at 20 M events crossed jit_above_cost (660 ms of JIT a read).
func keysAbove(ctx context.Context, tx pgx.Tx, id int64, limit int) ([]audit.Record, error) {
	b := &pgx.Batch{}
	b.Queue(`SET LOCAL plan_cache_mode = force_generic_plan`)
	b.Queue(`SELECT `+sealKeyColumns+` FROM audit_events WHERE id > $1 ORDER BY id LIMIT `+strconv.Itoa(limit), id)
	b.Queue(`SET LOCAL plan_cache_mode = auto`)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	recs, err := collectKeys(rows)
	if err != nil {
		return nil, err
	}
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	return recs, br.Close()
}

// sealKeyColumns is what the sealer reads of an event: its key and the
// digest its writer stored (audit.FormatV2), 56 bytes instead of the
// event's ~600.
const sealKeyColumns = `id, at, digest`

// readKeys reads rows of sealKeyColumns (binary format) into records
// holding the key and the digest, the digests in one buffer.
func readKeys(ctx context.Context, q querier, sql string, args ...any) ([]audit.Record, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return collectKeys(rows)
}

// collectKeys reads rows of sealKeyColumns, as readKeys does.
func collectKeys(rows pgx.Rows) ([]audit.Record, error) {
	defer rows.Close()
	var recs []audit.Record
	var buf []byte // the digests; a record keeps its slice of it when append moves on
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != 3 || len(raw[0]) != 8 || len(raw[1]) != 8 || (raw[2] != nil && len(raw[2]) != audit.HashSize) {
			return nil, fmt.Errorf("store: unexpected audit key row")
		}
		r := audit.Record{
			ID: int64(binary.BigEndian.Uint64(raw[0])),
			At: pgEpoch.Add(time.Duration(int64(binary.BigEndian.Uint64(raw[1]))) * time.Microsecond),
		}
		if raw[2] != nil {
			start := len(buf)
			buf = append(buf, raw[2]...)
			r.Digest = buf[start:len(buf):len(buf)]
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return recs, nil
}

// withContent replaces the records of recs stored without a digest (events
// written before migration 00030, and those the database composes itself,
// such as an expiry's) by the events read whole, for the sealer to digest.
func withContent(ctx context.Context, q querier, recs []audit.Record) ([]audit.Record, error) {
	var ids []int64
	var lo, hi time.Time
	for _, r := range recs {
		if r.Digest != nil {
			continue
		}
		if len(ids) == 0 || r.At.Before(lo) {
			lo = r.At
		}
		if len(ids) == 0 || r.At.After(hi) {
			hi = r.At
		}
		ids = append(ids, r.ID)
	}
	if len(ids) == 0 {
		return recs, nil
	}
	whole, err := readEvents(ctx, q, len(ids), `id = ANY($1) AND at >= $2 AND at <= $3`, ids, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("store: reading unsealed events: %w", err)
	}
	j := 0
	for i := range recs {
		if recs[i].Digest != nil {
			continue
		}
		if j >= len(whole) || whole[j].ID != recs[i].ID {
			return nil, fmt.Errorf("store: reading unsealed events: event %d vanished", recs[i].ID)
		}
		recs[i] = whole[j]
		j++
	}
	return recs, nil
}

// maxGaps bounds the ids Unsealed looks up one by one.
const maxGaps = 512

// Seal implements audit.SealTx: the batch's seals in one COPY (cheaper
// than an INSERT over unnest'ed arrays: a backlog sealed at 116-139k
// events/s instead of 95-122k), the watermark on the last. The seal
// table's keys (seq, and the event's id) make a second sealer (which the
// lock rules out) fail, not fork the chain.
func (t sealTx) Seal(ctx context.Context, recs []audit.Record, watermark int64) error {
	if len(recs) == 0 {
		return nil
	}
	n, err := t.tx.CopyFrom(ctx, pgx.Identifier{"audit_seals"}, sealCopyColumns, &sealRows{recs: recs, watermark: watermark, i: -1})
	if err != nil {
		return fmt.Errorf("store: sealing events: %w", err)
	}
	if n != int64(len(recs)) {
		return fmt.Errorf("store: sealing events: %d of %d seals written", n, len(recs))
	}
	return nil
}

var sealCopyColumns = []string{"seq", "id", "at", "prev_hash", "hash", "format", "watermark"}

// sealRows is the pgx.CopyFromSource of a batch's seals.
type sealRows struct {
	recs      []audit.Record
	watermark int64
	i         int
	vals      [7]any
}

func (s *sealRows) Next() bool { s.i++; return s.i < len(s.recs) }

func (s *sealRows) Values() ([]any, error) {
	r := &s.recs[s.i]
	var watermark any // NULL but on the batch's last seal
	if s.i == len(s.recs)-1 {
		watermark = s.watermark
	}
	s.vals = [7]any{r.Seq, r.ID, r.At, []byte(r.PrevHash), []byte(r.Hash), int16(max(r.SealFormat, audit.FormatV1)), watermark}
	return s.vals[:], nil
}

func (s *sealRows) Err() error { return nil }

// Frontier implements audit.SealTx: the sequence's last value first, the
// writers after, each in its own statement. A writer takes its lock on
// audit_events when its INSERT starts, before the id (nextval runs as the
// row is built), and keeps it to its end; so whoever took an id up to
// LastID and is still in flight is among the writers read after it. This
// holds for the sequence as the migrations made it (CACHE 1: no session
// hands out ids it took earlier).
func (t sealTx) Frontier(ctx context.Context) (audit.Frontier, error) {
	var f audit.Frontier
	if err := t.tx.QueryRow(ctx, lastIDSQL).Scan(&f.LastID); err != nil {
		return f, fmt.Errorf("store: reading the last event id: %w", err)
	}
	var err error
	f.Writers, err = t.Writers(ctx)
	return f, err
}

// Writers implements audit.SealTx: the virtual transaction IDs holding (or
// waiting for) the lock an INSERT or COPY takes on audit_events or one of
// its partitions, in this database, but the sealer's own. Readers and
// (auto)vacuum take other modes and do not hold the watermark back. A
// virtual transaction ID names one transaction of one backend, and is not
// used again.
func (t sealTx) Writers(ctx context.Context) ([]string, error) {
	var w []string
	err := t.tx.QueryRow(ctx, `
SELECT coalesce(array_agg(DISTINCT virtualtransaction), '{}') FROM pg_locks
WHERE locktype = 'relation' AND mode = 'RowExclusiveLock' AND pid IS DISTINCT FROM pg_backend_pid()
	AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND (relation = 'audit_events'::regclass
		OR relation IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'audit_events'::regclass))`).Scan(&w)
	if err != nil {
		return nil, fmt.Errorf("store: reading the audit writers: %w", err)
	}
	return w, nil
}

// Checkpoints implements audit.SealTx.
func (t sealTx) Checkpoints(ctx context.Context, before int64, limit int) ([]audit.Checkpoint, error) {
	return checkpointPage(ctx, t.tx, `SELECT seq, hash, at, public_key, signature FROM audit_checkpoints
		WHERE seq < $1 ORDER BY seq DESC LIMIT $2`, before, limit)
}

func (t sealTx) AddCheckpoint(ctx context.Context, cp audit.Checkpoint) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO audit_checkpoints (seq, hash, at, public_key, signature) VALUES ($1, $2, $3, $4, $5)`,
		cp.Seq, []byte(cp.Hash), cp.At, []byte(cp.PublicKey), cp.Signature)
	if err != nil {
		return fmt.Errorf("store: writing checkpoint: %w", err)
	}
	return nil
}

func (t sealTx) HashAt(ctx context.Context, seq int64) ([]byte, error) {
	var h []byte
	err := t.tx.QueryRow(ctx, `SELECT hash FROM audit_seals WHERE seq = $1`, seq).Scan(&h)
	if err == pgx.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: reading the chain at seq %d: %w", seq, err)
	}
	return h, nil
}

// EnsureAuditPartitions implements audit.SealStore.
func (s *Store) EnsureAuditPartitions(ctx context.Context, from, to time.Time) error {
	if _, err := s.pool.Exec(ctx, `SELECT audit_ensure_partitions($1, $2)`, from, to); err != nil {
		return fmt.Errorf("store: creating audit partitions: %w", err)
	}
	return nil
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func chainHead(ctx context.Context, q querier) (audit.Link, error) {
	var l audit.Link
	err := q.QueryRow(ctx, `SELECT seq, hash FROM audit_seals ORDER BY seq DESC LIMIT 1`).
		Scan(&l.Seq, &l.Hash)
	if err == pgx.ErrNoRows {
		return audit.Link{}, nil
	}
	if err != nil {
		return l, fmt.Errorf("store: reading the chain's head: %w", err)
	}
	return l, nil
}

func checkpointPage(ctx context.Context, q querier, sql string, args ...any) ([]audit.Checkpoint, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("store: reading checkpoints: %w", err)
	}
	cps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (audit.Checkpoint, error) {
		var c audit.Checkpoint
		var hash, key []byte
		err := row.Scan(&c.Seq, &hash, &c.At, &key, &c.Signature)
		c.Hash, c.PublicKey, c.At = hash, key, c.At.UTC()
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: reading checkpoints: %w", err)
	}
	return cps, nil
}
