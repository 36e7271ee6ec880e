package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// ChainSource is the sealed chain and its stored checkpoints, read in pages
// so that a walk holds one page at a time however long the chain is.
type ChainSource interface {
	// ChainPage returns up to limit sealed events with seq > after, in seq
	// order.
	ChainPage(ctx context.Context, after int64, limit int) ([]Record, error)
	// CheckpointPage returns up to limit stored checkpoints with seq > after,
	// in seq order.
	CheckpointPage(ctx context.Context, after int64, limit int) ([]Checkpoint, error)
	// Head returns the event with the highest seq (the zero Link for none).
	Head(ctx context.Context) (Link, error)
}

// Report is the outcome of a verification (GET /api/v1/audit/verify).
type Report struct {
	OK bool `json:"ok"`
	// Checked counts the events whose place in the chain was verified.
	Checked int64 `json:"checked"`
	// Head is the last verified link; when the chain is broken, the link
	// with the highest seq as stored.
	Head Link `json:"head"`
	// From is the seq of the checkpoint the walk started after
	// (VerifyOptions.From); 0 for a walk from the chain's start.
	From int64 `json:"from,omitempty"`
	// FirstBadSeq is the first sequence number where the chain is wrong
	// (0 when what is wrong is events the chain leaves out: Unsealed).
	FirstBadSeq int64 `json:"first_bad_seq,omitempty"`
	// Reason says what is wrong there.
	Reason string `json:"reason,omitempty"`
	// Unsealed counts the events found with no seal that are older than
	// VerifyOptions.UnsealedGrace (or dated that far ahead): the sealer
	// left them out, or someone put them in where it does not look. They
	// make a report not ok. A walk that stops at a fault in the chain
	// counts those it met before.
	Unsealed int64 `json:"unsealed,omitempty"`
}

// VerifyOptions tune Verify.
type VerifyOptions struct {
	// Keys are the public keys stored checkpoints may be signed with: the
	// server's audit key last, after the keys it replaced, oldest first
	// (AIRLOCK_AUDIT_PREVIOUS_KEYS). A stored checkpoint signed otherwise is
	// reported as a bad checkpoint: somebody wrote it who does not hold the
	// key. So is one signed by a key after a checkpoint signed by a later
	// key: a key retired by a rotation signs nothing after its successor
	// did (the sealer refuses to), so a leaked old key cannot vouch for
	// what followed.
	Keys []ed25519.PublicKey
	// External are checkpoints kept outside the database (their signatures
	// already checked, see ParseCheckpoint). They are held against the chain
	// like stored ones.
	External []Checkpoint
	// From, when set, is a checkpoint to start from: the events up to its
	// seq are taken as it signs them (a prefix archived and detached,
	// say) and not read, and the rest must follow from its hash. It must
	// be signed by one of Keys (or, with no Keys, its own key: offline,
	// the caller vouches for it); checkpoints at or below its seq are not
	// held against the chain, except that an external one at its very seq
	// must agree with it.
	From *Checkpoint
	// PageSize is how many events one read fetches (default 5000).
	PageSize int
	// Readers is how many pages are read at once from a ChainRanger
	// (default 3: each reader hashes the page it read while the others
	// wait on the database; with two, a verification left 17 % of the two
	// CPUs idle, with three 12 % and it ran 13 % faster, issue 14).
	Readers int
	// UnsealedGrace is how old an event with no seal may be before it is
	// reported (default UnsealedGrace): younger, the sealer may not have
	// reached it yet.
	UnsealedGrace time.Duration
}

// Verify walks the whole chain in seq order (or what follows
// VerifyOptions.From) and checks that the sequence numbers run 1, 2, 3…
// (or on from the checkpoint's) without gap or repeat, that each event's
// prev_hash is the hash of the one before (32 zero bytes for seq 1, the
// checkpoint's hash after VerifyOptions.From), that each hash is
// SHA-256(prev_hash || the event's canonical encoding), and that the chain
// holds every checkpoint, stored or external: the event at the
// checkpoint's seq exists and has the checkpoint's hash, and the
// checkpoint's signature is good. It stops at the first fault. The error is
// for failures to read, not for a bad chain.
//
// Reading the next pages overlaps with checking the current one: with a
// ChainRanger source, Readers pages are read at once, so a walk keeps as
// many database connections busy as there are CPUs to spare.
func Verify(ctx context.Context, src ChainSource, opts VerifyOptions) (Report, error) {
	if opts.PageSize <= 0 {
		opts.PageSize = 5000
	}
	if opts.Readers <= 0 {
		opts.Readers = 3
	}
	if opts.UnsealedGrace <= 0 {
		opts.UnsealedGrace = UnsealedGrace
	}
	v := verifier{opts: opts, cps: newCheckpointStream(src, opts.External), dupAt: math.MaxInt64}
	if a := opts.From; a != nil {
		reason := v.anchorFault(a)
		if reason == "" {
			var err error
			if reason, err = v.retiredAnchorFault(ctx, src, a); err != nil {
				return Report{}, err
			}
		}
		if reason != "" {
			v.fail(a.Seq, reason)
			return v.badReport(ctx, src)
		}
		v.head = Link{Seq: a.Seq, Hash: slices.Clone(a.Hash)}
		v.cps.skipThrough(a.Seq)
	}
	for {
		if err := v.walk(ctx, src); err != nil {
			return Report{}, err
		}
		if v.bad.FirstBadSeq != 0 {
			return v.badReport(ctx, src)
		}
		if v.checked == 0 && opts.From != nil {
			// Nothing after the checkpoint started from: the chain must
			// still reach it.
			head, err := src.Head(ctx)
			if err != nil {
				return Report{}, err
			}
			if head.Seq < opts.From.Seq {
				v.fail(head.Seq+1, fmt.Sprintf("truncated: the chain ends at seq %d but the checkpoint verification starts from is at seq %d", head.Seq, opts.From.Seq))
				return v.badReport(ctx, src)
			}
		}
		// A checkpoint beyond the end: either the chain grew while it was
		// walked (walk on), or it lost its tail.
		cp, ok, err := v.cps.peek(ctx)
		if err != nil {
			return Report{}, err
		}
		if !ok {
			if err := v.finish(ctx, src); err != nil {
				return Report{}, err
			}
			if v.bad.FirstBadSeq != 0 {
				return v.badReport(ctx, src)
			}
			return v.report(), nil
		}
		head, err := src.Head(ctx)
		if err != nil {
			return Report{}, err
		}
		if head.Seq <= v.head.Seq {
			v.fail(v.head.Seq+1, fmt.Sprintf("truncated: the chain ends at seq %d but the %s checkpoint signed at %s covers seq %d",
				v.head.Seq, cp.source(), cp.At.UTC().Format("2006-01-02T15:04:05Z"), cp.Seq))
			return v.badReport(ctx, src)
		}
	}
}

// walk checks every sealed event after v.head, stopping at the first fault.
func (v *verifier) walk(ctx context.Context, src ChainSource) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for p := range v.pages(ctx, src) {
		if p.err != nil {
			return p.err
		}
		if v.strays(&p); v.bad.FirstBadSeq != 0 {
			return nil
		}
		for i := range p.events {
			if err := v.next(ctx, &p.events[i]); err != nil {
				return err
			}
			if v.bad.FirstBadSeq != 0 {
				return nil
			}
		}
	}
	return ctx.Err()
}

// ChainRanger is a ChainSource that can read any range of the chain, so
// that several pages can be read at once.
type ChainRanger interface {
	// ChainRange returns the sealed events with after < seq ≤ through, in
	// seq order.
	ChainRange(ctx context.Context, after, through int64) ([]Record, error)
}

// ChainChecker is a ChainRanger that checks each event as it reads it, so
// that a verification never keeps (or copies) the events' content, and
// that says which events of the ids it read no seal of the page accounts
// for.
type ChainChecker interface {
	// CheckedRange returns the sealed events with after < seq ≤ through, in
	// seq order, as ChainRange does but as Checked events: OK is what check
	// said of the event (false for a missing one). check gets each event
	// read with its seal, once per seal, in any order; the record's fields
	// are valid only during the call. An event is its seal's when it has
	// the seal's id and time (id, at).
	CheckedRange(ctx context.Context, after, through int64, check func(*Record) bool) (CheckedPage, error)
	// CheckedAfter is CheckedRange of the limit sealed events after seq
	// after.
	CheckedAfter(ctx context.Context, after int64, limit int, check func(*Record) bool) (CheckedPage, error)
}

// CheckedPage is a page of the chain as a ChainChecker reads it.
type CheckedPage struct {
	Events []Checked
	// Window is the range of event ids read whole for the page (empty
	// when none): each event in it is one of the page's, sealed on
	// another page, or among Strays.
	Window IDRange
	// Strays are the events of Window no seal accounts for: a second
	// row of a sealed event's id (Seq is that seal's), or an event with
	// no seal at all (Seq 0; Age says how old it was when read).
	Strays []Stray
}

// IDRange is the event ids from Lo to Hi, both included; empty when Lo >
// Hi.
type IDRange struct{ Lo, Hi int64 }

// Empty reports whether r holds no id.
func (r IDRange) Empty() bool { return r.Lo > r.Hi }

// Stray is an event row the chain does not account for.
type Stray struct {
	ID int64
	At time.Time
	// Seq is the seq of the seal of another row with this id: this row is
	// a second one of a sealed event (what the owner can insert: the
	// primary key is (id, at)). 0 for an event with no seal.
	Seq int64
	// Age is how old the event was (by the database's clock) when it was
	// found unsealed; negative for one dated ahead.
	Age time.Duration
}

// StrayFinder is a ChainSource that can look for unsealed events in the
// ids no page of a walk read (between the pages' windows, and above the
// last).
type StrayFinder interface {
	// UnsealedEvents counts the events with an id in one of ranges (and,
	// with aboveSealed, above every sealed id) that no seal names by
	// (id, at) and whose time is more than grace before the source's
	// clock, or as far ahead; first is the one with the lowest id.
	UnsealedEvents(ctx context.Context, ranges []IDRange, aboveSealed bool, grace time.Duration) (n int64, first Stray, err error)
}

// Checked is a sealed event as a verification walks it: its key, its
// seal, and whether its hash was found right. Its content is gone: a page
// of them is a fifth of a page of Records.
type Checked struct {
	ID, Seq        int64
	PrevHash, Hash []byte
	// Missing marks a seal whose event is not in the trail.
	Missing bool
	// OK says that Hash is the event's chain hash after PrevHash
	// (Hasher.Hash).
	OK bool
}

// Checked returns r as a verification walks it, OK as given.
func (r *Record) Checked(ok bool) Checked {
	return Checked{ID: r.ID, Seq: r.Seq, PrevHash: r.PrevHash, Hash: r.Hash, Missing: r.Missing, OK: ok && !r.Missing}
}

type page struct {
	// events are the page's events, their hashes checked: by the goroutine
	// that read the page, so that pages are hashed in parallel and the walk
	// in order only follows the links.
	events []Checked
	// window and strays are the CheckedPage's (a ChainChecker's page).
	window IDRange
	strays []Stray
	err    error
}

// noWindow is the empty IDRange of a page read by ChainRange or ChainPage.
var noWindow = IDRange{Lo: 1}

// readPage returns the chain's events with after < seq ≤ through, checked:
// as the source reads them when it can (ChainChecker).
func readPage(ctx context.Context, src ChainRanger, after, through int64) page {
	var h Hasher
	if c, ok := src.(ChainChecker); ok {
		return fromChecked(c.CheckedRange(ctx, after, through, h.sealed))
	}
	recs, err := src.ChainRange(ctx, after, through)
	return checkedPage(&h, recs, err)
}

func fromChecked(p CheckedPage, err error) page {
	return page{events: p.Events, window: p.Window, strays: p.Strays, err: err}
}

// checkedPage returns the page of recs, each checked by h.
func checkedPage(h *Hasher, recs []Record, err error) page {
	if err != nil {
		return page{err: err}
	}
	events := make([]Checked, len(recs))
	for i := range recs {
		events[i] = recs[i].Checked(!recs[i].Missing && h.sealed(&recs[i]))
	}
	return page{events: events, window: noWindow}
}

// pages reads the chain after v.head ahead of the caller, in order: the
// ranges up to the head as it is now Readers at a time (when src can read
// ranges), then page by page what was sealed since.
func (v *verifier) pages(ctx context.Context, src ChainSource) <-chan page {
	futures := make(chan chan page, max(v.opts.Readers-2, 0)) // with the one awaited and the one being handed on: Readers reads at once
	out := make(chan page)
	size := v.opts.PageSize
	from := v.head.Seq // v.head moves on as the pages are checked
	rangedTo := from   // written before futures is closed, read after
	send := func(p page) bool {
		select {
		case out <- p:
			return p.err == nil
		case <-ctx.Done():
			return false
		}
	}
	go func() { // hands the ranges' pages over in order
		defer close(out)
		for f := range futures {
			if !send(<-f) {
				return
			}
		}
		after := rangedTo
		var h Hasher
		checker, _ := src.(ChainChecker)
		for {
			var p page
			if checker != nil {
				p = fromChecked(checker.CheckedAfter(ctx, after, size, h.sealed))
			} else {
				recs, err := src.ChainPage(ctx, after, size)
				p = checkedPage(&h, recs, err)
			}
			if !send(p) || len(p.events) < size {
				return
			}
			after = p.events[len(p.events)-1].Seq
		}
	}()
	go func() { // starts the range reads, Readers at a time
		defer close(futures)
		r, ok := src.(ChainRanger)
		if !ok || v.opts.Readers < 2 {
			return
		}
		head, err := src.Head(ctx)
		if err != nil {
			f := make(chan page, 1)
			f <- page{err: err}
			futures <- f
			return
		}
		for after := from; after < head.Seq; after += int64(size) {
			f := make(chan page, 1)
			go func(after, through int64) {
				f <- readPage(ctx, r, after, through)
			}(after, min(after+int64(size), head.Seq))
			select {
			case futures <- f:
			case <-ctx.Done():
				return
			}
		}
		rangedTo = max(from, head.Seq)
	}()
	return out
}

type verifier struct {
	opts    VerifyOptions
	cps     *checkpointStream
	head    Link
	headID  int64
	checked int64
	bad     Report
	// rank is the place in opts.Keys of the newest key that signed a
	// checkpoint so far (at rankSeq): no older key may sign after it.
	rank    int
	rankSeq int64
	// soft is the first stored checkpoint found that no audit key (in
	// order) signed: reported when the chain holds nothing worse, but no
	// reason to stop checking it (the server's own role can insert one).
	soft *Report

	// What the pages' windows tell of the events the chain leaves out:
	// the ids read (cover), the unsealed events met (seen, to count each
	// once; unsealed of them, first the one with the lowest id), and the
	// second rows of sealed events still ahead of the walk (dups; dupAt
	// the lowest seq among them).
	cover    coverage
	seen     map[[2]int64]struct{}
	unsealed int64
	first    Stray
	dups     []Stray
	dupAt    int64
}

// strays takes in what a page says of the events no seal accounts for.
func (v *verifier) strays(p *page) {
	v.cover.add(p.window, v.opts.From == nil)
	for _, s := range p.strays {
		switch {
		case s.Seq > 0:
			if s.Seq <= v.head.Seq { // a seq the walk has passed (a stray read on a later page)
				v.fail(s.Seq, dupReason(s))
				return
			}
			v.dups = append(v.dups, s)
			v.dupAt = min(v.dupAt, s.Seq)
		case s.Age > v.opts.UnsealedGrace || s.Age < -v.opts.UnsealedGrace:
			key := [2]int64{s.ID, s.At.UnixMicro()}
			if _, twice := v.seen[key]; twice { // read by two pages whose windows overlap
				continue
			}
			if v.seen == nil {
				v.seen = map[[2]int64]struct{}{}
			}
			v.seen[key] = struct{}{}
			v.countUnsealed(Stray{ID: s.ID, At: s.At, Age: s.Age}, 1)
		}
	}
}

// countUnsealed counts n unsealed events, first the one with the lowest
// id of them.
func (v *verifier) countUnsealed(first Stray, n int64) {
	if v.unsealed == 0 || first.ID < v.first.ID {
		v.first = first
	}
	v.unsealed += n
}

func dupReason(s Stray) string {
	return fmt.Sprintf("duplicate: event %d has a second row (at %s) besides the one sealed at seq %d",
		s.ID, s.At.UTC().Format("2006-01-02T15:04:05.000000Z"), s.Seq)
}

// finish looks for unsealed events in the ids the pages did not read (the
// source permitting), and fails at a second row of a sealed event the
// walk did not reach.
func (v *verifier) finish(ctx context.Context, src ChainSource) error {
	if v.dupAt != math.MaxInt64 && v.bad.FirstBadSeq == 0 {
		i := slices.IndexFunc(v.dups, func(s Stray) bool { return s.Seq == v.dupAt })
		v.fail(v.dupAt, dupReason(v.dups[i]))
	}
	f, ok := src.(StrayFinder)
	if !ok {
		return nil
	}
	var ranges []IDRange
	aboveSealed := false
	switch {
	case v.cover.started:
		ranges = v.cover.ranges()
	case v.opts.From == nil: // no event sealed: every one is looked at
		ranges = []IDRange{{Lo: math.MinInt64, Hi: math.MaxInt64}}
	default: // nothing sealed after the checkpoint started from
		aboveSealed = true
	}
	n, first, err := f.UnsealedEvents(ctx, ranges, aboveSealed, v.opts.UnsealedGrace)
	if err != nil || n == 0 {
		return err
	}
	v.countUnsealed(first, n)
	return nil
}

// coverage is what a walk's pages read of the events' ids (their
// windows), so that the ids between them, and above them, can be looked
// through at the end. Windows come in about increasing order: what lies
// between the last one and the next is a hole, until a later window reads
// it.
type coverage struct {
	started bool
	next    int64 // the lowest id above every window so far
	top     bool  // a window reached the highest id there is
	holes   []IDRange
}

// add records that the ids of w were read. The first window starts the
// coverage: at the lowest id there is for a walk from the chain's start
// (what lies below is a hole), at the window for one from a checkpoint.
func (c *coverage) add(w IDRange, fromStart bool) {
	if w.Empty() || c.top {
		return
	}
	if !c.started {
		c.started, c.next = true, w.Lo
		if fromStart {
			c.next = math.MinInt64
		}
	}
	switch {
	case w.Lo > c.next:
		c.holes = append(c.holes, IDRange{Lo: c.next, Hi: w.Lo - 1})
	case len(c.holes) > 0 && w.Lo <= c.holes[len(c.holes)-1].Hi:
		c.fill(w)
	}
	if w.Hi >= c.next {
		if w.Hi == math.MaxInt64 {
			c.top = true
			return
		}
		c.next = w.Hi + 1
	}
}

// fill takes w out of the holes.
func (c *coverage) fill(w IDRange) {
	i := sort.Search(len(c.holes), func(i int) bool { return c.holes[i].Hi >= w.Lo })
	var kept []IDRange
	for _, h := range c.holes[i:] {
		if h.Lo > w.Hi {
			kept = append(kept, h)
			continue
		}
		if h.Lo < w.Lo {
			kept = append(kept, IDRange{Lo: h.Lo, Hi: w.Lo - 1})
		}
		if h.Hi > w.Hi {
			kept = append(kept, IDRange{Lo: w.Hi + 1, Hi: h.Hi})
		}
	}
	c.holes = append(c.holes[:i], kept...)
}

// ranges returns the ids no window read: the holes, and all above.
func (c *coverage) ranges() []IDRange {
	r := slices.Clone(c.holes)
	if !c.top {
		r = append(r, IDRange{Lo: c.next, Hi: math.MaxInt64})
	}
	return r
}

// keyRank returns k's place in keys (the last, if listed twice), -1 when
// it is not there.
func keyRank(keys []ed25519.PublicKey, k ed25519.PublicKey) int {
	for i := len(keys) - 1; i >= 0; i-- {
		if keys[i].Equal(k) {
			return i
		}
	}
	return -1
}

func (v *verifier) fail(seq int64, reason string) {
	v.bad = Report{FirstBadSeq: seq, Reason: reason}
}

func (v *verifier) badReport(ctx context.Context, src ChainSource) (Report, error) {
	head, err := src.Head(context.WithoutCancel(ctx))
	if err != nil {
		return Report{}, err
	}
	r := v.bad
	r.Checked, r.Head, r.From, r.Unsealed = v.checked, head, v.from(), v.unsealed
	if v.soft != nil && v.soft.FirstBadSeq != r.FirstBadSeq {
		r.Reason += "; and " + v.soft.Reason
	}
	return r, nil
}

// report is the report of a walk that found the chain whole: ok unless a
// stored checkpoint is no audit key's, or events older than the grace are
// unsealed.
func (v *verifier) report() Report {
	r := Report{OK: true, Checked: v.checked, Head: v.head, From: v.from(), Unsealed: v.unsealed}
	switch {
	case v.soft != nil:
		r.OK, r.Checked, r.FirstBadSeq, r.Reason = false, v.soft.Checked, v.soft.FirstBadSeq, v.soft.Reason
	case r.Unsealed > 0:
		r.OK = false
		r.Reason = fmt.Sprintf("unsealed: %d events older than %s are not sealed (the first: event %d, at %s)",
			r.Unsealed, v.opts.UnsealedGrace, v.first.ID, v.first.At.UTC().Format("2006-01-02T15:04:05.000000Z"))
	}
	return r
}

// from is the seq of the checkpoint the walk started after (0: none).
func (v *verifier) from() int64 {
	if v.opts.From == nil {
		return 0
	}
	return v.opts.From.Seq
}

// anchorFault says what is wrong with a, the checkpoint a walk is to start
// from, or "" when it may be started from.
func (v *verifier) anchorFault(a *Checkpoint) string {
	if a.Verify() != nil {
		return fmt.Sprintf("checkpoint mismatch: the signature of the checkpoint at seq %d, which verification starts from, does not verify", a.Seq)
	}
	if len(v.opts.Keys) > 0 {
		rank := keyRank(v.opts.Keys, a.PublicKey)
		if rank < 0 {
			return fmt.Sprintf("checkpoint mismatch: the checkpoint at seq %d, which verification starts from, is not signed by the audit key", a.Seq)
		}
		v.rank, v.rankSeq = rank, a.Seq
	}
	for _, e := range v.opts.External {
		if e.Seq == a.Seq && !bytes.Equal(e.Hash, a.Hash) {
			return fmt.Sprintf("checkpoint mismatch: the chain's hash at seq %d, where verification starts, differs from the external checkpoint signed at %s",
				a.Seq, e.At.UTC().Format("2006-01-02T15:04:05Z"))
		}
	}
	return ""
}

// retiredAnchorFault says what is wrong with a, a checkpoint to start from
// that a retired key signed (v.rank is its key's, set by anchorFault):
// that a later key signed a stored checkpoint before it. The checkpoints
// below a are read only then: a key signs nothing after its successor did,
// and a walk from a checkpoint does not hold the earlier ones against the
// chain, so this is the one order check they get.
func (v *verifier) retiredAnchorFault(ctx context.Context, src ChainSource, a *Checkpoint) (string, error) {
	if v.rank >= len(v.opts.Keys)-1 {
		return "", nil
	}
	for after := int64(0); after < a.Seq; {
		cps, err := src.CheckpointPage(ctx, after, 1000)
		if err != nil {
			return "", err
		}
		for _, cp := range cps {
			if cp.Seq >= a.Seq {
				return "", nil
			}
			if keyRank(v.opts.Keys, cp.PublicKey) > v.rank {
				return fmt.Sprintf("checkpoint mismatch: the checkpoint at seq %d, which verification starts from, is signed by a retired audit key, after its successor signed the one at seq %d", a.Seq, cp.Seq), nil
			}
		}
		if len(cps) < 1000 {
			return "", nil
		}
		after = cps[len(cps)-1].Seq
	}
	return "", nil
}

// next checks r, the event after v.head, and the checkpoints at its seq.
func (v *verifier) next(ctx context.Context, r *Checked) error {
	want := v.head.Seq + 1
	prev := []byte(v.head.Hash)
	if v.head.Seq == 0 {
		prev = Genesis
	}
	switch {
	case r.Seq == v.head.Seq && r.Seq > 0:
		v.fail(r.Seq, fmt.Sprintf("duplicate: events %d and %d are both sealed at seq %d", v.headID, r.ID, r.Seq))
		return nil
	case r.Seq != want:
		v.fail(want, fmt.Sprintf("gap: seq %d is missing (the next event is sealed at seq %d)", want, r.Seq))
		return nil
	case !bytes.Equal(r.PrevHash, prev):
		v.fail(want, fmt.Sprintf("broken link: the prev_hash of seq %d is not the hash of seq %d", want, want-1))
		return nil
	case r.Missing:
		v.fail(want, fmt.Sprintf("missing: event %d, sealed at seq %d, is not in the trail", r.ID, want))
		return nil
	}
	if !r.OK {
		v.fail(want, fmt.Sprintf("hash mismatch: event %d (seq %d) is not what was sealed", r.ID, want))
		return nil
	}
	if r.Seq >= v.dupAt {
		i := slices.IndexFunc(v.dups, func(s Stray) bool { return s.Seq == v.dupAt })
		v.fail(v.dupAt, dupReason(v.dups[i]))
		return nil
	}
	for {
		cp, ok, err := v.cps.peek(ctx)
		if err != nil {
			return err
		}
		if !ok || cp.Seq > r.Seq {
			break
		}
		v.cps.pop()
		reason, soft := v.checkpointFault(cp, r)
		switch {
		case reason == "":
		case !soft:
			v.fail(cp.Seq, reason)
			return nil
		case v.soft == nil:
			v.soft = &Report{FirstBadSeq: cp.Seq, Reason: reason, Checked: v.checked}
		}
	}
	v.head = Link{Seq: r.Seq, Hash: slices.Clone(r.Hash)}
	v.headID = r.ID
	v.checked++
	return nil
}

// checkpointFault says what is wrong with cp, the checkpoint at r's seq
// ("" for nothing). A soft fault is a stored checkpoint no audit key (in
// order) signed: it vouches for nothing, and the walk goes on checking the
// chain (the server's own role can insert one, and must not be able to
// hide what follows behind it).
func (v *verifier) checkpointFault(cp sourcedCheckpoint, r *Checked) (reason string, soft bool) {
	if cp.Seq < r.Seq { // only after a fault the walk stopped at
		return fmt.Sprintf("checkpoint at seq %d is out of order", cp.Seq), false
	}
	if !cp.external {
		rank := keyRank(v.opts.Keys, cp.PublicKey)
		switch {
		case rank < 0:
			return fmt.Sprintf("checkpoint mismatch: the stored checkpoint at seq %d is not signed by the audit key", cp.Seq), true
		case rank < v.rank:
			return fmt.Sprintf("checkpoint mismatch: the stored checkpoint at seq %d is signed by a retired audit key, after its successor signed the one at seq %d", cp.Seq, v.rankSeq), true
		case cp.Verify() != nil:
			return fmt.Sprintf("checkpoint mismatch: the signature of the stored checkpoint at seq %d does not verify", cp.Seq), true
		}
		if rank > v.rank {
			v.rank, v.rankSeq = rank, cp.Seq
		}
	}
	if !bytes.Equal(cp.Hash, r.Hash) {
		return fmt.Sprintf("checkpoint mismatch: the chain's hash at seq %d differs from the %s checkpoint signed at %s (the chain was rewritten at or before seq %d)",
			cp.Seq, cp.source(), cp.At.UTC().Format("2006-01-02T15:04:05Z"), cp.Seq), false
	}
	return "", false
}

type sourcedCheckpoint struct {
	Checkpoint
	external bool
}

func (c sourcedCheckpoint) source() string {
	if c.external {
		return "external"
	}
	return "stored"
}

// checkpointStream merges the stored checkpoints (read a page at a time)
// with the external ones, in seq order.
type checkpointStream struct {
	src      ChainSource
	stored   []Checkpoint
	after    int64
	done     bool
	external []Checkpoint
}

func newCheckpointStream(src ChainSource, external []Checkpoint) *checkpointStream {
	ext := slices.Clone(external)
	slices.SortFunc(ext, func(a, b Checkpoint) int { return cmpInt(a.Seq, b.Seq) })
	return &checkpointStream{src: src, external: ext}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

const checkpointPage = 1000

func (s *checkpointStream) peek(ctx context.Context) (sourcedCheckpoint, bool, error) {
	if len(s.stored) == 0 && !s.done {
		page, err := s.src.CheckpointPage(ctx, s.after, checkpointPage)
		if err != nil {
			return sourcedCheckpoint{}, false, err
		}
		s.stored = page
		s.done = len(page) < checkpointPage
		if len(page) > 0 {
			s.after = page[len(page)-1].Seq
		}
	}
	switch {
	case len(s.stored) == 0 && len(s.external) == 0:
		return sourcedCheckpoint{}, false, nil
	case len(s.stored) == 0 || (len(s.external) > 0 && s.external[0].Seq < s.stored[0].Seq):
		return sourcedCheckpoint{s.external[0], true}, true, nil
	}
	return sourcedCheckpoint{s.stored[0], false}, true, nil
}

// skipThrough drops the checkpoints with seq <= seq: those of a prefix
// the walk does not read.
func (s *checkpointStream) skipThrough(seq int64) {
	s.after = max(s.after, seq)
	s.external = slices.DeleteFunc(s.external, func(c Checkpoint) bool { return c.Seq <= seq })
}

// pop drops the checkpoint peek returned.
func (s *checkpointStream) pop() {
	if len(s.stored) == 0 || (len(s.external) > 0 && s.external[0].Seq < s.stored[0].Seq) {
		s.external = s.external[1:]
		return
	}
	s.stored = s.stored[1:]
}
