package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"
)

// Link is a place in the chain: the event sealed at Seq has Hash. The zero
// Link is the empty chain.
type Link struct {
	Seq  int64    `json:"seq"`
	Hash HexBytes `json:"hash"`
}

// SealStore is what the sealer needs from storage (internal/store).
type SealStore interface {
	// WithSealLock runs fn in one transaction holding the sealing lock,
	// which at most one transaction in the whole database holds at a time,
	// and commits if fn returns nil. It reports false, without calling fn,
	// when another transaction holds the lock.
	WithSealLock(ctx context.Context, fn func(SealTx) error) (bool, error)
	// EnsureAuditPartitions creates the monthly partitions covering
	// [from, to] that do not exist yet.
	EnsureAuditPartitions(ctx context.Context, from, to time.Time) error
}

// SealTx is the sealer's view of the trail inside WithSealLock.
type SealTx interface {
	// Head returns the last sealed link (the zero Link for none) and the
	// newest watermark stored (zero for none): the sealer that stored it
	// promised that every event with an id up to it was sealed then, or
	// will never commit. Whoever may insert a seal may have stored it:
	// the sealer checks it, and waits for the writers then in flight, before
	// going by it (Sealer.unsealed).
	Head(ctx context.Context) (head Link, watermark StoredWatermark, err error)
	// LastID returns the highest event id handed out so far.
	LastID(ctx context.Context) (int64, error)
	// WatermarkAtMost returns the newest stored watermark that is not above
	// id (0 for none).
	WatermarkAtMost(ctx context.Context, id int64) (int64, error)
	// Unsealed returns up to limit events with an id above after that are
	// visible now and have no seal, lowest id first: each with its key and
	// its stored Digest, or, for an event stored without one, its content.
	Unsealed(ctx context.Context, after int64, limit int) ([]Record, error)
	// Seal stores the seal (Seq, PrevHash, Hash, SealFormat) of each record, with the
	// batch's watermark.
	Seal(ctx context.Context, records []Record, watermark int64) error
	// Frontier reads the highest event id handed out so far, and after it
	// the writers in flight (see Frontier).
	Frontier(ctx context.Context) (Frontier, error)
	// Writers returns the transactions writing audit events now, as
	// Frontier names them.
	Writers(ctx context.Context) ([]string, error)
	// Checkpoints returns up to limit stored checkpoints with a seq below
	// before, newest first.
	Checkpoints(ctx context.Context, before int64, limit int) ([]Checkpoint, error)
	// AddCheckpoint stores a checkpoint.
	AddCheckpoint(ctx context.Context, cp Checkpoint) error
	// HashAt returns the hash of the event sealed at seq (nil for none).
	HashAt(ctx context.Context, seq int64) ([]byte, error)
}

// StoredWatermark is a watermark as stored: its value and the seq of the
// seal that carries it.
type StoredWatermark struct {
	ID, Seq int64
}

// Frontier is how the sealer learns that no event below an id can still
// commit. LastID is the highest id handed out when it was read; Writers are
// the transactions that were writing audit events right after (each holds
// its lock on the events table from before it takes an id until it ends).
// Every event with an id up to LastID was taken by a transaction that had
// ended by then or is among Writers; once none of Writers is writing any
// more, every such event that will ever commit is visible.
type Frontier struct {
	LastID  int64
	Writers []string
}

// DefaultSealEvery is how often a sealer looks for unsealed events unless
// told otherwise (SealerConfig.Every).
const DefaultSealEvery = 250 * time.Millisecond

// UnsealedGrace is how long a committed event may go without a seal
// before verification reports it (VerifyOptions.UnsealedGrace): twenty
// sealing rounds, room for a writer's transaction to commit some time after
// its event was stamped and for a backlog to be worked off.
const UnsealedGrace = 20 * DefaultSealEvery

// SealerConfig tunes a Sealer. Zero fields take the defaults.
type SealerConfig struct {
	Every           time.Duration // how often to look for unsealed events (DefaultSealEvery)
	Batch           int           // most events sealed per transaction (5000)
	CheckpointEvery time.Duration // least time between two checkpoints while events keep coming (10s)
	// CheckpointQuiet is the least time between two checkpoints once the
	// chain has stopped growing (1s): the newest events are covered soon
	// after a burst, without a checkpoint per batch under load.
	CheckpointQuiet time.Duration
	// PreviousKeys are the public keys of the audit keys the sealer's key
	// replaced (AIRLOCK_AUDIT_PREVIOUS_KEYS): the newest checkpoint may be
	// signed by one of them when the sealer signs the next.
	PreviousKeys []ed25519.PublicKey
	Logger       *slog.Logger
	Now          func() time.Time
}

// Sealer gives committed audit events their place in the hash chain: in
// batches, in one transaction per batch, under a lock that one server
// instance at a time holds (so several instances can all run one). Writers
// never wait for it: they insert unsealed rows and take no lock the sealer
// takes. Events are sealed in id order among those committed; an event
// whose transaction commits late is sealed late, with a later seq.
//
// The sealer finds the unsealed events above a watermark: every event
// with an id up to it is sealed, or will never commit. Ids are handed out
// at insert and transactions commit in another order, so the highest
// sealed id is no watermark: a transaction that took a lower id may still
// be in flight. The watermark moves to a Frontier's LastID once none of
// its Writers is writing any more and the batch has sealed what that made
// visible (one tick later, usually); the events sealed above it in the
// meantime are told apart by their seals. A watermark stored above its own
// (by another instance, or by whoever else may insert a seal) is gone by
// the same way: once the writers in flight when the sealer first saw it
// have ended, and then only if no event at or below it is left unsealed
// (unsealed).
type Sealer struct {
	store SealStore
	key   *SigningKey
	cfg   SealerConfig
	log   *slog.Logger

	mu         sync.Mutex // one batch at a time; guards the fields below
	hash       Hasher
	lastSigned int64 // seq of the newest checkpoint this sealer signed (and committed)
	nextSigned int64 // the checkpoint the batch in progress signed, if any
	// watermark is the highest one this sealer established (it may not be
	// stored: a tick that seals nothing stores nothing); frontier is the
	// one it waits on to move it (nil: read one at the end of the batch).
	watermark int64
	frontier  *Frontier
	// vetting is the stored watermark above its own that it waits to go by
	// (nil: none), with the Frontier read when it first saw one. It is kept
	// whether or not that batch commits: what a Frontier says of the
	// writers then in flight holds either way.
	vetting *vetting
	// next are what the batch in progress would make them, set once its
	// transaction commits.
	nextWatermark int64
	nextFrontier  *Frontier

	// What it reports of its work (Stats), and what it logged last, so
	// that a condition that lasts is logged once, not every round.
	lockMissed  int       // rounds in a row that found the sealing lock held elsewhere
	caughtUp    time.Time // when a round last left nothing committed unsealed
	refused     int       // stored watermarks refused
	skipped     int       // stored checkpoints passed over
	refusedSeq  int64     // the seal of the stored watermark last refused
	skippedTop  int64     // the highest seq of a checkpoint passed over (and counted)
	occupiedSeq int64     // the head last found holding a checkpoint the sealer went past
	// What it has read of the stored checkpoints (newestCheckpoint): the
	// newest it goes by (Seq 0: none), and the newest stored, up to which
	// every one has been read.
	goesBy Checkpoint
	readTo int64
}

// SealerStats is what a sealer reports of its work (the server's metrics).
type SealerStats struct {
	// LockMissed counts the sealing rounds in a row that found the sealing
	// lock held by another session: another instance sealing, for a round
	// or two; for longer, something holding it (pg_advisory_lock with the
	// sealer's key) while events wait unsealed.
	LockMissed int
	// Lag is how long ago this sealer last left nothing committed
	// unsealed (since it started, if never): a few rounds at most while
	// sealing keeps up, whichever instance seals.
	Lag time.Duration
	// WatermarksRefused counts the stored watermarks it refused to go by:
	// above the last event id, or with unsealed events below them.
	WatermarksRefused int
	// CheckpointsSkipped counts the stored checkpoints it went past: a
	// signature that does not verify, or a key that is neither its audit
	// key nor one that key replaced.
	CheckpointsSkipped int
}

// Stats returns what the sealer reports of its work.
func (s *Sealer) Stats() SealerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SealerStats{LockMissed: s.lockMissed, Lag: max(s.cfg.Now().Sub(s.caughtUp), 0),
		WatermarksRefused: s.refused, CheckpointsSkipped: s.skipped}
}

// NewSealer returns a sealer that signs checkpoints with key.
func NewSealer(store SealStore, key *SigningKey, cfg SealerConfig) *Sealer {
	if cfg.Every <= 0 {
		cfg.Every = DefaultSealEvery
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 5000
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = 10 * time.Second
	}
	if cfg.CheckpointQuiet <= 0 {
		cfg.CheckpointQuiet = min(time.Second, cfg.CheckpointEvery)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Sealer{store: store, key: key, cfg: cfg, log: log, caughtUp: cfg.Now()}
}

// partitionsAhead is how far ahead of today the monthly partitions exist.
const partitionsAhead = 62 * 24 * time.Hour

// Run seals every Every until ctx ends, and keeps the partitions of the
// coming months in place (at start, then hourly).
func (s *Sealer) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Every)
	defer t.Stop()
	var partitioned time.Time
	for {
		if now := s.cfg.Now(); now.Sub(partitioned) >= time.Hour {
			if err := s.store.EnsureAuditPartitions(ctx, now, now.Add(partitionsAhead)); err != nil {
				s.logErr(ctx, "audit: creating partitions", err)
			} else {
				partitioned = now
			}
		}
		if _, err := s.seal(ctx, false); err != nil {
			s.logErr(ctx, "audit: sealing", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Sealer) logErr(ctx context.Context, msg string, err error) {
	if ctx.Err() == nil {
		s.log.Error(msg, "err", err)
	}
}

// Seal seals every event committed before it was called (unless another
// instance holds the lock) and returns how many it sealed. A checkpoint of
// the head is stored when the newest one is older than CheckpointEvery (or
// CheckpointQuiet, when there was nothing new to seal).
func (s *Sealer) Seal(ctx context.Context) (int, error) { return s.seal(ctx, false) }

// Checkpoint seals what is committed and stores a checkpoint of the head
// now, unless the newest checkpoint already covers it.
func (s *Sealer) Checkpoint(ctx context.Context) error {
	_, err := s.seal(ctx, true)
	return err
}

// ErrSealLockHeld is returned by Checkpoint when another instance is
// sealing.
var ErrSealLockHeld = errors.New("audit: another instance holds the sealing lock")

func (s *Sealer) seal(ctx context.Context, checkpoint bool) (int, error) {
	total := 0
	for {
		n, full := 0, false
		got, err := s.store.WithSealLock(ctx, func(tx SealTx) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			var err error
			n, err = s.batch(ctx, tx, checkpoint)
			full = n == s.cfg.Batch
			return err
		})
		s.mu.Lock()
		if got && err == nil { // the batch committed: what it promised holds
			s.watermark, s.frontier = max(s.watermark, s.nextWatermark), s.nextFrontier
			s.lastSigned = max(s.lastSigned, s.nextSigned)
			if !full {
				s.caughtUp = s.cfg.Now()
			}
		}
		s.nextSigned = 0 // a checkpoint rolled back with its batch was never signed
		s.lockRound(got, err)
		s.mu.Unlock()
		total += n
		switch {
		case err != nil:
			return total, err
		case !got && checkpoint:
			return total, ErrSealLockHeld
		case !got || !full:
			return total, nil
		}
	}
}

// lockWarnRounds is how many rounds in a row without the sealing lock are
// logged as a warning (and every as many after): ten seconds at the
// default pace, far longer than another instance holds it for a batch.
const lockWarnRounds = 40

// lockRound counts a round that did not get the sealing lock, and logs
// when that lasts. Called with s.mu held.
func (s *Sealer) lockRound(got bool, err error) {
	switch {
	case got:
		if s.lockMissed >= lockWarnRounds {
			s.log.Info("audit: sealing lock obtained again", "rounds_missed", s.lockMissed)
		}
		s.lockMissed = 0
	case err == nil:
		s.lockMissed++
		if s.lockMissed%lockWarnRounds == 0 {
			s.log.Warn("audit: sealing lock not obtained for "+fmt.Sprint(s.lockMissed)+" rounds: another session holds it "+
				"(pg_advisory_lock with the sealer's key?); events wait unsealed, and verification reports them once they are old",
				"rounds", s.lockMissed, "lag", s.cfg.Now().Sub(s.caughtUp).Round(time.Millisecond))
		}
	}
}

// batch seals up to Batch events after the head and adds a checkpoint when
// one is due.
func (s *Sealer) batch(ctx context.Context, tx SealTx, forceCheckpoint bool) (int, error) {
	head, stored, err := tx.Head(ctx)
	if err != nil {
		return 0, err
	}
	// A frontier is passed when none of its writers is still writing:
	// checked before the events are read, so that what they committed is
	// read too.
	var writers []string
	if s.frontier != nil || s.vetting != nil {
		if writers, err = tx.Writers(ctx); err != nil {
			return 0, err
		}
	}
	passed := s.frontier != nil && s.frontier.passed(writers)
	from, records, err := s.unsealed(ctx, tx, stored, writers)
	if err != nil {
		return 0, err
	}
	s.nextWatermark, s.nextFrontier = from, s.frontier
	if passed {
		if len(records) < s.cfg.Batch {
			// Every event up to LastID that will ever commit is visible,
			// and every visible one above from is in records.
			s.nextWatermark, s.nextFrontier = max(from, s.frontier.LastID), nil
		} else {
			// A full batch holds the visible unsealed events up to its
			// last id only: the frontier stays for the next batch.
			s.nextWatermark = max(from, min(s.frontier.LastID, records[len(records)-1].ID))
		}
	}
	if len(records) > 0 {
		prev := []byte(head.Hash)
		if head.Seq == 0 {
			prev = Genesis
		}
		for i := range records {
			r := &records[i]
			r.Seq = head.Seq + int64(i) + 1
			r.PrevHash = prev
			r.SealFormat = FormatV2
			if r.Hash, err = s.hash.Seal(prev, r); err != nil {
				// Cannot happen for rows PostgreSQL stored (their JSON is
				// valid); if it did, sealing would stop here, loudly.
				return 0, fmt.Errorf("audit: sealing event %d: %w", r.ID, err)
			}
			prev = r.Hash
		}
		if err := tx.Seal(ctx, records, s.nextWatermark); err != nil {
			return 0, err
		}
		last := records[len(records)-1]
		head = Link{Seq: last.Seq, Hash: last.Hash}
	}
	if s.nextFrontier == nil {
		f, err := tx.Frontier(ctx)
		if err != nil {
			return 0, err
		}
		s.nextFrontier = &f
	}
	if head.Seq == 0 {
		return 0, nil
	}
	n, err := s.newestCheckpoint(ctx, tx)
	if err != nil {
		return 0, err
	}
	now := s.cfg.Now()
	every := s.cfg.CheckpointEvery
	if len(records) == 0 {
		every = s.cfg.CheckpointQuiet
	}
	cp := n.cp
	if n.state == noCheckpoint || (cp.Seq < head.Seq && (forceCheckpoint || now.Sub(cp.At) >= every)) {
		if n.newest >= head.Seq {
			// A checkpoint the sealer went past holds the head (checkpoints
			// go in seq order: migration 00036): the next events' batch
			// signs its own head.
			if s.occupiedSeq != head.Seq {
				s.occupiedSeq = head.Seq
				s.log.Warn("audit: a checkpoint this server cannot verify is stored at the chain's head; signing after the next events", "seq", head.Seq)
			}
			return len(records), nil
		}
		if err := s.checkBeforeSigning(ctx, tx, cp, n.state == usable); err != nil {
			return 0, err
		}
		if err := tx.AddCheckpoint(ctx, s.key.Sign(head.Seq, head.Hash, now)); err != nil {
			return 0, err
		}
		s.nextSigned = head.Seq
	}
	return len(records), nil
}

// watermarkCheck is how far below a stored watermark the sealer looks for
// events it leaves unsealed before going by it (with no watermark of its
// own below it to start from).
const watermarkCheck = 10_000

// vetting is a stored watermark the sealer waits to go by, and the
// Frontier it waits on: read when the sealer first saw a stored watermark
// above its own, it names every writer that could still commit an event at
// or below it (its LastID is not below it).
type vetting struct {
	w        StoredWatermark
	frontier Frontier
}

// passed reports whether none of f's writers is among writers (those
// writing now).
func (f *Frontier) passed(writers []string) bool {
	return !slices.ContainsFunc(f.Writers, func(w string) bool { return slices.Contains(writers, w) })
}

// unsealed returns the watermark this batch goes by (every event with an
// id up to it is sealed, or will never commit) and the events to seal
// above it; writers are those writing now (read when the sealer has a
// frontier to check).
//
// A stored watermark above the sealer's own (another instance stored it,
// or this sealer has only just started, or whoever else may insert a seal
// did) is refused, loudly, when it is above the last event id handed out,
// or when a visible event at or below it (down to the sealer's own, or
// watermarkCheck ids below it: base) is unsealed; the sealer then seals
// what it left out. No visible unsealed event does not make it true yet: a
// writer still in flight may have taken an id below it (the server's role
// can store a correct seal of the newest event with its watermark at the
// last id handed out, over such a writer). So on first sight the sealer
// reads a Frontier for it, and goes by it only in a later batch once none
// of that Frontier's writers is still writing, and the same check finds
// nothing unsealed at or below it; until then it seals from base, and
// gives base as the batch's watermark (lower than the stored one: what it
// promises is less). A newer stored watermark above its own takes the
// place of the one it waits on (with the same Frontier when that Frontier's
// LastID is not below it), and one it waits on stays when a seal of its
// own (with its lower watermark) is stored after it. With several
// instances, one that takes the sealing lock over goes by the other's
// watermark one batch later, or sooner by its own Frontier.
//
// What it looks through for that is what it would read anyway, and the
// seals of the ids below (Unsealed tells sealed ids apart): at most
// watermarkCheck ids below the stored watermark, and one Frontier read
// when it first sees one.
func (s *Sealer) unsealed(ctx context.Context, tx SealTx, stored StoredWatermark, writers []string) (int64, []Record, error) {
	own := s.watermark
	var w StoredWatermark // the stored watermark above its own it may go by
	if stored.ID > own {
		last, err := tx.LastID(ctx)
		if err != nil {
			return 0, nil, err
		}
		w = stored
		if w.ID > last {
			s.refuse(stored, fmt.Sprintf("it is above the last event id handed out (%d)", last))
			if w.ID, err = tx.WatermarkAtMost(ctx, last); err != nil {
				return 0, nil, err
			}
		}
	}
	v := s.vetting
	if w.ID <= own && v != nil && v.w.ID > own {
		w = v.w // a seal of its own was stored after the one it waits on
	}
	if w.ID <= own {
		s.vetting = nil
		records, err := tx.Unsealed(ctx, own, s.cfg.Batch)
		return own, records, err
	}
	wait := v == nil || w.ID > v.frontier.LastID || !v.frontier.passed(writers)
	if v == nil || w.ID > v.frontier.LastID {
		f, err := tx.Frontier(ctx)
		if err != nil {
			return 0, nil, err
		}
		v = &vetting{frontier: f}
	}
	v.w, s.vetting = w, v
	base := max(own, w.ID-watermarkCheck)
	records, err := tx.Unsealed(ctx, base, s.cfg.Batch)
	if err != nil {
		return 0, nil, err
	}
	if n, _ := slices.BinarySearchFunc(records, w.ID+1, func(r Record, id int64) int { return cmpInt(r.ID, id) }); n > 0 {
		s.vetting = nil
		s.refuse(w, fmt.Sprintf("%d events at or below it are not sealed (event %d the first): sealing them", n, records[0].ID))
		return base, records, nil
	}
	if wait {
		return base, records, nil
	}
	s.vetting = nil
	return w.ID, records, nil // the events above it, as Unsealed(w.ID) reads them
}

// refuse logs a stored watermark the sealer will not go by (once per seal
// that carries it).
func (s *Sealer) refuse(w StoredWatermark, why string) {
	if s.refusedSeq == w.Seq {
		return
	}
	s.refusedSeq = w.Seq
	s.refused++
	s.log.Error("audit: refusing the stored sealing watermark: whoever may insert a seal stored it (verify the trail: GET /api/v1/audit/verify)",
		"watermark", w.ID, "seal_seq", w.Seq, "why", why)
}

// newestStored is what the sealer makes of the stored checkpoints.
type newestStored struct {
	cp    Checkpoint // the newest the sealer goes by (state usable)
	state checkpointState
	// newest is the seq of the newest stored checkpoint, whatever signed
	// it (0 for none): the next is stored above it.
	newest int64
}

type checkpointState int

const (
	noCheckpoint checkpointState = iota // none stored that the sealer could go by
	usable                              // signed by a key the sealer knows
)

// newestCheckpoint finds the newest stored checkpoint the sealer goes by:
// the newest signed by a key the sealer knows (its own, or one it
// replaced) whose signature verifies. It is what the chain must still hold
// (checkBeforeSigning). The others are passed over, counted and logged: a
// checkpoint whose signature does not verify, or one signed by any other
// key, is nothing the sealer can tell from what whoever may insert a
// checkpoint (the server's own role: an injection) can write, a key of its
// own over the chain's hash included. They must stop neither sealing nor
// signing (before, one signed by another key over the chain's hash stopped
// the signing on every instance); verification reports them. An instance
// holding a newer audit key is one of them too: rotate with every
// instance stopped (README "Rotating the audit key").
//
// However many there are, each is read and verified once: the sealer
// keeps the one it goes by and how far it has read, and reads only the
// checkpoints stored above that (newest first, down to the first it goes
// by: checkpoints go in seq order, migration 00036). Before, it read the
// newest 256 only, and stopped signing when none of them was one it goes
// by: the server's role can store one at each seal. The one it goes by is
// read again every time: when it is gone or changed (the owner did it),
// everything is read again, and checkBeforeSigning finds out whether a
// checkpoint this sealer signed has gone.
func (s *Sealer) newestCheckpoint(ctx context.Context, tx SealTx) (newestStored, error) {
	if s.goesBy.Seq > 0 {
		cps, err := tx.Checkpoints(ctx, s.goesBy.Seq+1, 1)
		if err != nil {
			return newestStored{}, err
		}
		if len(cps) == 0 || !sameCheckpoint(cps[0], s.goesBy) {
			s.goesBy, s.readTo = Checkpoint{}, 0
		}
	}
	n := newestStored{newest: s.readTo}
	top := s.skippedTop // passed over and counted before this read
	before, limit := int64(math.MaxInt64), 4
	var found *Checkpoint
read:
	for {
		cps, err := tx.Checkpoints(ctx, before, limit)
		if err != nil {
			return newestStored{}, err
		}
		if before == math.MaxInt64 && len(cps) > 0 {
			n.newest = max(n.newest, cps[0].Seq)
		}
		for i := range cps {
			c := &cps[i]
			if c.Seq <= s.readTo {
				break read
			}
			before = c.Seq
			known := s.key.Public().Equal(c.PublicKey) || keyRank(s.cfg.PreviousKeys, c.PublicKey) >= 0
			switch {
			case !known: // whatever its signature: no key the sealer trusts
				s.skip(*c, top, "it is signed by a key that is neither this server's audit key nor one it replaced")
			case c.Verify() != nil:
				s.skip(*c, top, "its signature does not verify")
			default:
				found = c
				break read
			}
		}
		if len(cps) < limit {
			break
		}
		limit = min(4*limit, 1024)
	}
	if found != nil {
		s.goesBy = *found
	}
	s.readTo = n.newest
	if s.goesBy.Seq > 0 {
		n.cp, n.state = s.goesBy, usable
	}
	return n, nil
}

// sameCheckpoint reports whether a and b are the same stored checkpoint.
func sameCheckpoint(a, b Checkpoint) bool {
	return a.Seq == b.Seq && bytes.Equal(a.Hash, b.Hash) && a.At.Equal(b.At) &&
		a.PublicKey.Equal(b.PublicKey) && bytes.Equal(a.Signature, b.Signature)
}

// skip counts and logs a stored checkpoint the sealer passes over, unless
// it was counted before (its seq at or below top, the highest counted
// before this read: they are read newest first).
func (s *Sealer) skip(c Checkpoint, top int64, why string) {
	if c.Seq <= top {
		return
	}
	s.skippedTop = max(s.skippedTop, c.Seq)
	s.skipped++
	s.log.Error("audit: passing over a stored checkpoint nobody holding an audit key signed (verification reports it)",
		"seq", c.Seq, "why", why)
}

// checkBeforeSigning refuses to sign a chain that no longer holds the
// newest checkpoint signed by a key the sealer knows, or from which a
// checkpoint this sealer signed has gone: signing it would vouch for
// whatever was done to it. The batch then fails, so sealing stops (loudly,
// every tick) until someone verifies the trail; nothing is lost, new
// events wait unsealed (and verification reports them once they are old).
//
// Nor does it sign after a checkpoint its key's predecessor signed after
// this sealer signed one: the retired key signs nothing after its
// successor did, and here it has (it leaked). Checkpoints it cannot
// verify never get here (newestCheckpoint).
func (s *Sealer) checkBeforeSigning(ctx context.Context, tx SealTx, last Checkpoint, ok bool) error {
	if s.lastSigned > 0 && (!ok || last.Seq < s.lastSigned) {
		return fmt.Errorf("%w: the checkpoint this server signed at seq %d is gone", ErrTampered, s.lastSigned)
	}
	if !ok {
		return nil
	}
	h, err := tx.HashAt(ctx, last.Seq)
	if err != nil {
		return err
	}
	if !bytes.Equal(h, last.Hash) {
		return fmt.Errorf("%w: the chain no longer matches the checkpoint at seq %d", ErrTampered, last.Seq)
	}
	if !s.key.Public().Equal(last.PublicKey) && s.lastSigned > 0 {
		return fmt.Errorf("%w: the checkpoint at seq %d is signed by a retired audit key, after this server signed the one at seq %d", ErrTampered, last.Seq, s.lastSigned)
	}
	return nil
}

// ErrTampered stops the sealer: the trail was changed behind its back.
var ErrTampered = errors.New("audit: refusing to seal (verify the trail: GET /api/v1/audit/verify)")
