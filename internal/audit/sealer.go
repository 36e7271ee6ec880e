package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
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
	// watermark stored with the last batch (0 for none): every event with
	// an id up to it was sealed then, or will never commit.
	Head(ctx context.Context) (head Link, watermark int64, err error)
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
	// LastCheckpoint returns the newest stored checkpoint (ok false for none).
	LastCheckpoint(ctx context.Context) (cp Checkpoint, ok bool, err error)
	// AddCheckpoint stores a checkpoint.
	AddCheckpoint(ctx context.Context, cp Checkpoint) error
	// HashAt returns the hash of the event sealed at seq (nil for none).
	HashAt(ctx context.Context, seq int64) ([]byte, error)
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

// SealerConfig tunes a Sealer. Zero fields take the defaults.
type SealerConfig struct {
	Every           time.Duration // how often to look for unsealed events (250ms)
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
// meantime are told apart by their seals.
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
	// next are what the batch in progress would make them, set once its
	// transaction commits.
	nextWatermark int64
	nextFrontier  *Frontier
}

// NewSealer returns a sealer that signs checkpoints with key.
func NewSealer(store SealStore, key *SigningKey, cfg SealerConfig) *Sealer {
	if cfg.Every <= 0 {
		cfg.Every = 250 * time.Millisecond
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
	return &Sealer{store: store, key: key, cfg: cfg, log: log}
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
		}
		s.nextSigned = 0 // a checkpoint rolled back with its batch was never signed
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

// batch seals up to Batch events after the head and adds a checkpoint when
// one is due.
func (s *Sealer) batch(ctx context.Context, tx SealTx, forceCheckpoint bool) (int, error) {
	head, stored, err := tx.Head(ctx)
	if err != nil {
		return 0, err
	}
	from := max(stored, s.watermark) // both are true; another instance may have moved it
	// The frontier is passed when none of its writers is still writing:
	// checked before the events are read, so that what they committed is
	// read too.
	passed := false
	if s.frontier != nil {
		writers, err := tx.Writers(ctx)
		if err != nil {
			return 0, err
		}
		passed = !slices.ContainsFunc(s.frontier.Writers, func(w string) bool { return slices.Contains(writers, w) })
	}
	records, err := tx.Unsealed(ctx, from, s.cfg.Batch)
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
	cp, ok, err := tx.LastCheckpoint(ctx)
	if err != nil {
		return 0, err
	}
	now := s.cfg.Now()
	every := s.cfg.CheckpointEvery
	if len(records) == 0 {
		every = s.cfg.CheckpointQuiet
	}
	if !ok || (cp.Seq < head.Seq && (forceCheckpoint || now.Sub(cp.At) >= every)) {
		if err := s.checkBeforeSigning(ctx, tx, cp, ok); err != nil {
			return 0, err
		}
		if err := tx.AddCheckpoint(ctx, s.key.Sign(head.Seq, head.Hash, now)); err != nil {
			return 0, err
		}
		s.nextSigned = head.Seq
	}
	return len(records), nil
}

// checkBeforeSigning refuses to sign a chain that no longer holds the
// newest checkpoint, or from which a checkpoint this sealer signed has gone:
// signing it would vouch for whatever was done to it. The batch then fails,
// so sealing stops (loudly, every tick) until someone verifies the trail;
// nothing is lost, new events wait unsealed.
//
// Nor does it sign after a checkpoint that it cannot vouch for: one whose
// signature fails, or signed by a key that is neither its own nor one its
// key replaced. That is a forged checkpoint, or one signed by an instance
// holding a newer audit key (a rotation under way: this instance still has
// the old one), which a retired key must never sign after. Another
// instance, holding the newer key, signs instead.
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
	own := s.key.Public().Equal(last.PublicKey)
	previous := keyRank(s.cfg.PreviousKeys, last.PublicKey) >= 0
	switch {
	case !own && !previous:
		return fmt.Errorf("%w: the checkpoint at seq %d is signed by a key that is neither this server's audit key nor one it replaced "+
			"(another instance holds a newer key: restart this one with it; or the checkpoint is forged)", ErrTampered, last.Seq)
	case previous && s.lastSigned > 0:
		return fmt.Errorf("%w: the checkpoint at seq %d is signed by a retired audit key, after this server signed the one at seq %d", ErrTampered, last.Seq, s.lastSigned)
	case last.Verify() != nil:
		return fmt.Errorf("%w: the signature of the checkpoint at seq %d does not verify", ErrTampered, last.Seq)
	}
	return nil
}

// ErrTampered stops the sealer: the trail was changed behind its back.
var ErrTampered = errors.New("audit: refusing to seal (verify the trail: GET /api/v1/audit/verify)")
