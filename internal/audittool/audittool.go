// Package audittool holds what the audit commands do: verify the chain
// (through the server, or offline from an export, trusting no server),
// export it, and keep the signed checkpoints in a file elsewhere.
// cmd/auditctl and `airlock audit` are two front ends of this one code.
package audittool

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"sync"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/audit"
)

// ErrNotIntact marks a verification that ran and found the chain broken.
var ErrNotIntact = errors.New("the audit chain is not intact")

// ErrWrongKey marks kept checkpoints not signed by the key pinned with
// VerifyOptions.Key: the last one, or one after the first it signed.
var ErrWrongKey = errors.New("the kept checkpoints are not signed by the given key")

// ErrKeyChanged marks checkpoints to keep that are signed by another key
// than those kept before, and not by the key given to change to.
var ErrKeyChanged = errors.New("the audit key changed")

// ErrBadKey marks a key given to change to that is not an audit public key,
// or given without a file to keep checkpoints in.
var ErrBadKey = errors.New("bad key to change to")

// Connect returns a client of the server, asked for only when one is
// needed (an offline verification needs none).
type Connect func() (*client.Client, error)

// VerifyOptions say what to verify against.
type VerifyOptions struct {
	// Offline is the path of an export made in chain order (order=seq) to
	// verify here; empty asks the server.
	Offline string
	// Checkpoints is the path of a file of checkpoints kept elsewhere
	// (NDJSON); every one of its lines in the range verified (at or after
	// From) is held against the chain.
	Checkpoints string
	// Key is the audit public key (base64) the kept checkpoints must be
	// signed with: from the first one it signed on (those before by the
	// keys it replaced), and the last.
	Key string
	// From is the seq of a checkpoint to start the walk after (0: the
	// chain's start): for a chain whose older events were archived. The
	// server starts from its stored checkpoint there; offline, from the
	// kept one there (in Checkpoints), and the export's events up to it are
	// skipped, so an export made after it (-cursor SEQ) will do.
	From int64
}

// ErrBadFrom marks a From that cannot be started from: not a positive
// seq, or offline without the kept checkpoints to find it in.
var ErrBadFrom = errors.New("from is the seq of a checkpoint to start after")

// ErrKeyWithoutCheckpoints marks a Key given without Checkpoints: the
// key pins the kept checkpoints' key, and there are none to pin it on.
var ErrKeyWithoutCheckpoints = errors.New("the key pins the key of the kept checkpoints: name their file")

// Report is what a verification found: the walk's report (the server's,
// or the one made here from an export), and what the kept checkpoints
// vouched for.
type Report struct {
	audit.Report
	// Kept counts the kept checkpoints held against the chain: those at or
	// after the one the walk started from, each seq and hash once.
	Kept int `json:"kept"`
	// CoveredThrough is the highest seq a kept checkpoint vouches for:
	// the events after it rest on nothing kept elsewhere. 0 for none.
	CoveredThrough int64 `json:"covered_through,omitempty"`
	// Anchored says that a kept checkpoint was held against the chain.
	// Without one, a verification shows a chain consistent in itself, not
	// the one the audit key signed: an export that anyone could have
	// written, or a database its owner could have rewritten with its
	// stored checkpoints.
	Anchored bool `json:"anchored"`
}

// Verify verifies the chain and returns the report. A chain found broken
// returns the report and ErrNotIntact.
func Verify(ctx context.Context, connect Connect, o VerifyOptions) (*Report, error) {
	switch {
	case o.From < 0:
		return nil, fmt.Errorf("%w: a positive number", ErrBadFrom)
	case o.From > 0 && o.Offline != "" && o.Checkpoints == "":
		return nil, fmt.Errorf("%w: offline, the checkpoint to start from is one of the kept checkpoints (name their file)", ErrBadFrom)
	case o.Key != "" && o.Checkpoints == "":
		return nil, ErrKeyWithoutCheckpoints
	}
	var kept []audit.Checkpoint
	if o.Checkpoints != "" {
		var err error
		if kept, err = readKept(o.Checkpoints, o.Key); err != nil {
			return nil, err
		}
	}
	hold := held(kept, o.From)
	var r audit.Report
	if o.Offline != "" {
		var anchor *audit.Checkpoint
		if o.From > 0 {
			cp, err := keptAt(o.Checkpoints, kept, o.From)
			if err != nil {
				return nil, err
			}
			anchor = &cp
		}
		var err error
		if r, err = VerifyOffline(ctx, o.Offline, hold, anchor); err != nil {
			return nil, err
		}
	} else {
		c, err := connect()
		if err != nil {
			return nil, err
		}
		cr, err := verifyOnline(ctx, c, o.From, hold)
		if err != nil {
			return nil, err
		}
		if r, err = fromServer(cr); err != nil {
			return nil, err
		}
	}
	rep := &Report{Report: r, Kept: len(hold), Anchored: len(hold) > 0}
	if len(hold) > 0 {
		rep.CoveredThrough = hold[len(hold)-1].Seq
	}
	if !r.OK {
		return rep, ErrNotIntact
	}
	return rep, nil
}

// fromServer returns the server's report as an audit.Report.
func fromServer(r *client.VerifyReport) (audit.Report, error) {
	head, err := hex.DecodeString(r.Head.Hash)
	if err != nil {
		return audit.Report{}, fmt.Errorf("the server's report: head hash %q: %w", r.Head.Hash, err)
	}
	return audit.Report{OK: r.OK, Checked: r.Checked, Head: audit.Link{Seq: r.Head.Seq, Hash: head}, From: r.From,
		FirstBadSeq: r.FirstBadSeq, Reason: r.Reason, Unsealed: r.Unsealed}, nil
}

// VerifyOffline walks an export in chain order with the same code the
// server uses, holding the kept checkpoints against it (their signatures
// checked). With from (a kept checkpoint), the walk starts after it: the
// export's leading events up to its seq are skipped, and the next must
// follow from its hash.
func VerifyOffline(ctx context.Context, path string, kept []audit.Checkpoint, from *audit.Checkpoint) (audit.Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return audit.Report{}, fmt.Errorf("opening the export: %w", err)
	}
	defer f.Close()
	src := &fileChain{r: bufio.NewReaderSize(f, 1<<20)}
	if from != nil {
		src.skip = from.Seq
	}
	return audit.Verify(ctx, src, audit.VerifyOptions{External: kept, From: from})
}

// fileChain reads an export in chain order as an audit.ChainSource, one
// event a line, each decoded strictly (decodeStrict): what is verified is
// what jq or a SIEM reads from the same line. It has no stored
// checkpoints: offline, only the kept one counts.
type fileChain struct {
	r    *bufio.Reader
	line int        // the number of the line read last
	skip int64      // the leading events with a seq up to it are not read: a walk from a checkpoint there
	mu   sync.Mutex // guards last: Verify reads ahead in another goroutine
	last audit.Link
}

// ChainPage reads the next limit records of the export.
func (f *fileChain) ChainPage(_ context.Context, _ int64, limit int) ([]audit.Record, error) {
	var page []audit.Record
	for len(page) < limit {
		line, err := f.r.ReadSlice('\n') // valid until the next read: decoding copies what it keeps
		if err == bufio.ErrBufferFull {
			long := slices.Clone(line)
			for err == bufio.ErrBufferFull {
				line, err = f.r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("reading the export: %w", err)
		}
		if len(line) > 0 {
			f.line++
		}
		if len(bytes.TrimSpace(line)) == 0 {
			if err == io.EOF {
				break
			}
			continue
		}
		var r audit.Record
		if err := decodeStrict(line, &r); err != nil {
			return nil, fmt.Errorf("line %d of the export: %w", f.line, err)
		}
		if r.Seq == 0 {
			return nil, fmt.Errorf("event %d in the export is not sealed: export in chain order (order=seq)", r.ID)
		}
		f.mu.Lock()
		f.last = audit.Link{Seq: r.Seq, Hash: r.Hash}
		f.mu.Unlock()
		if r.Seq <= f.skip {
			continue
		}
		f.skip = 0 // only a leading run: after it, every event counts (a repeated seq is a fault)
		page = append(page, r)
	}
	return page, nil
}

// CheckpointPage returns none: an export carries no checkpoints.
func (f *fileChain) CheckpointPage(context.Context, int64, int) ([]audit.Checkpoint, error) {
	return nil, nil
}

// Head is the last record read.
func (f *fileChain) Head(context.Context) (audit.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last, nil
}

// ExportFilters are the audit query's filters an export takes, plus order.
var ExportFilters = []string{"order", "correlation_id", "agent", "conversation_id", "action_id", "kind", "since", "until", "cursor", "limit"}

// Export writes the NDJSON export of the events matching q to the file at
// path, or to stdout when path is empty.
func Export(ctx context.Context, c *client.Client, q url.Values, path string, stdout io.Writer) error {
	w := stdout
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("creating the export: %w", err)
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	if err := c.ExportAudit(ctx, q, bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing the export: %w", err)
	}
	return nil
}

// Checkpoints writes every signed checkpoint to stdout, or, with appendTo,
// adds to that file only those after its newest (the one with the
// highest seq), in seq order, after checking that they are signed by the
// key that signed what was kept before, and that the chain still holds
// the newest kept checkpoint and leads from it to each of them (a walk
// from it: the events after it). After a key rotation, acceptKey (base64,
// as a checkpoint's public_key) is the new key: the kept checkpoints may
// change to it once, and never back. The first checkpoints kept, in an
// empty file, are taken as they come, like the key that signed them.
func Checkpoints(ctx context.Context, c *client.Client, appendTo, acceptKey string, stdout io.Writer) error {
	var accept ed25519.PublicKey
	if acceptKey != "" {
		var err error
		if accept, err = audit.ParsePublicKey(acceptKey); err != nil {
			return fmt.Errorf("%w: %w", ErrBadKey, err)
		}
	}
	if appendTo == "" {
		if accept != nil {
			return fmt.Errorf("%w: the key to change to is for keeping checkpoints in a file (-append)", ErrBadKey)
		}
		return c.AuditCheckpoints(ctx, 0, stdout)
	}
	newest, err := newestKept(appendTo)
	if err != nil {
		return err
	}
	var after int64
	var signer ed25519.PublicKey // the key the next checkpoint must be signed with, nil for any
	if newest != nil {
		after, signer = newest.Seq, newest.PublicKey
	}
	var buf bytes.Buffer
	if err := c.AuditCheckpoints(ctx, after, &buf); err != nil {
		return err
	}
	// Check what is about to be kept: well signed, each after the one
	// before (a server that sends an older one again would move the kept
	// file's newest back, below a tail it may then cut), and by the key
	// that signed what was kept before (a new key means a new data dir,
	// or somebody else signing: look before appending), or by the key it
	// was rotated to, after which the old one signs nothing.
	var fresh []audit.Checkpoint
	var out bytes.Buffer
	for _, line := range bytes.Split(buf.Bytes(), []byte("\n")) {
		if line = bytes.TrimSpace(line); len(line) == 0 {
			continue
		}
		cp, err := parseCheckpoint(line)
		if err != nil {
			return fmt.Errorf("a checkpoint from the server: %w", err)
		}
		if cp.Seq <= after {
			return fmt.Errorf("the server sent the checkpoint at seq %d after the one at seq %d: nothing appended", cp.Seq, after)
		}
		after = cp.Seq
		switch {
		case signer == nil || signer.Equal(cp.PublicKey):
		case accept != nil && accept.Equal(cp.PublicKey) && !signer.Equal(accept):
			signer = accept
		default:
			return fmt.Errorf("%w: checkpoint %d is signed by another key than %s's (%s): nothing appended", ErrKeyChanged, cp.Seq, appendTo,
				base64.StdEncoding.EncodeToString(cp.PublicKey))
		}
		if signer == nil {
			signer = cp.PublicKey
		}
		fresh = append(fresh, cp)
		out.Write(line)
		out.WriteByte('\n')
	}
	if len(fresh) == 0 {
		return nil
	}
	if newest != nil {
		// The new checkpoints must follow from the newest kept one: a
		// chain rewritten at or below it, and signed again, does not.
		r, err := verifyOnline(ctx, c, newest.Seq, append([]audit.Checkpoint{*newest}, fresh...))
		if err != nil {
			return fmt.Errorf("checking that the chain holds the newest kept checkpoint (seq %d): %w: nothing appended", newest.Seq, err)
		}
		if !r.OK {
			return fmt.Errorf("%w: from the newest kept checkpoint (seq %d) to the server's: first bad seq %d: %s: nothing appended",
				ErrNotIntact, newest.Seq, r.FirstBadSeq, r.Reason)
		}
	}
	f, err := os.OpenFile(appendTo, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("opening %s: %w", appendTo, err)
	}
	if _, err := f.Write(out.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("appending to %s: %w", appendTo, err)
	}
	return f.Close()
}
