package audittool

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/audit"
)

// readKept reads the file of kept checkpoints at path, in its order:
// every line strictly (parseCheckpoint), its signature checked. With key
// (base64, not empty) the lines must be signed by it from the first one
// it signed on (the lines before, by the keys it replaced), and it must
// have signed the last.
func readKept(path, key string) ([]audit.Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the kept checkpoints: %w", err)
	}
	defer f.Close()
	var kept []audit.Checkpoint
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		cp, err := parseCheckpoint(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s, line %d: %w", path, n, err)
		}
		kept = append(kept, cp)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the kept checkpoints: %w", err)
	}
	if key != "" {
		if err := signedFromFirst(kept, key); err != nil {
			return nil, err
		}
	}
	return kept, nil
}

// newestKept returns the checkpoint with the highest seq in the file of
// kept checkpoints at path (the last of several there), its signature
// checked; nil when the file is empty or missing. Every line is read
// strictly, but only the newest one's signature is checked: the file may
// be long, and this runs each time checkpoints are kept.
func newestKept(path string) (*audit.Checkpoint, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the kept checkpoints: %w", err)
	}
	defer f.Close()
	var newest *audit.Checkpoint
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var cp audit.Checkpoint
		if err := decodeStrict(sc.Bytes(), &cp); err != nil {
			return nil, fmt.Errorf("%s, line %d: %w", path, n, err)
		}
		if newest == nil || cp.Seq >= newest.Seq {
			newest = &cp
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the kept checkpoints: %w", err)
	}
	if newest != nil {
		if err := newest.Verify(); err != nil {
			return nil, fmt.Errorf("%s: the checkpoint at seq %d: %w", path, newest.Seq, err)
		}
	}
	return newest, nil
}

// signedFromFirst checks that key signed the kept checkpoints from the
// first one it signed on, and the last.
func signedFromFirst(kept []audit.Checkpoint, key string) error {
	pk, err := audit.ParsePublicKey(key)
	if err != nil {
		return fmt.Errorf("%w (%v)", ErrWrongKey, err)
	}
	first := slices.IndexFunc(kept, func(cp audit.Checkpoint) bool { return pk.Equal(cp.PublicKey) })
	if first < 0 {
		return fmt.Errorf("%w (it signed none of them)", ErrWrongKey)
	}
	for _, cp := range kept[first:] {
		if !pk.Equal(cp.PublicKey) {
			return fmt.Errorf("%w (the one at seq %d is signed by %s, after the key signed the one at seq %d)",
				ErrWrongKey, cp.Seq, base64.StdEncoding.EncodeToString(cp.PublicKey), kept[first].Seq)
		}
	}
	return nil
}

// held returns the kept checkpoints a verification from the checkpoint
// at seq from (0: the chain's start) holds against the chain: those at or
// after from, in seq order, each seq and hash once (two lines that say
// the same are one check).
func held(kept []audit.Checkpoint, from int64) []audit.Checkpoint {
	out := slices.DeleteFunc(slices.Clone(kept), func(cp audit.Checkpoint) bool { return cp.Seq < from })
	slices.SortStableFunc(out, func(a, b audit.Checkpoint) int {
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), bytes.Compare(a.Hash, b.Hash))
	})
	return slices.CompactFunc(out, func(a, b audit.Checkpoint) bool {
		return a.Seq == b.Seq && bytes.Equal(a.Hash, b.Hash)
	})
}

// maxQuery bounds the kept checkpoints one verification request carries
// (the bytes of their ?checkpoint= parameters, about 320 each): the
// server reads at most 64 KiB of request line and headers. A request
// refused as too long (414, 431: a proxy with a shorter limit) is sent
// again in halves.
var maxQuery = 32 << 10

// verifyOnline has the server walk the chain (from the stored checkpoint
// at seq from, 0: its start) holding every one of kept (held: in seq
// order) against it. They go a request's worth at a time, each request
// with the newest of them: its hash fixes every event up to its seq, so
// every walk holds its share against the same events, whatever the
// database shows from one request to the next. The answer is the walk
// that found the first fault (the lowest first_bad_seq), or the last one.
func verifyOnline(ctx context.Context, c *client.Client, from int64, kept []audit.Checkpoint) (*client.VerifyReport, error) {
	if len(kept) == 0 {
		return c.VerifyAuditFrom(ctx, from)
	}
	enc := make([]string, len(kept))
	for i := range kept {
		b, err := json.Marshal(&kept[i])
		if err != nil {
			return nil, err
		}
		enc[i] = base64.RawURLEncoding.EncodeToString(b) // as it is in a URL
	}
	newest, rest := enc[len(enc)-1], enc[:len(enc)-1]
	const param = len("&checkpoint=")
	limit := maxQuery
	var bad *client.VerifyReport
	for start := 0; ; {
		size, n := param+len(newest), 0
		for start+n < len(rest) && (n == 0 || size+param+len(rest[start+n]) <= limit) {
			size += param + len(rest[start+n])
			n++
		}
		r, err := c.VerifyAuditFrom(ctx, from, append(slices.Clip(rest[start:start+n]), newest)...)
		if s := client.StatusOf(err); (s == http.StatusRequestURITooLong || s == http.StatusRequestHeaderFieldsTooLarge) && n > 1 {
			limit = size / 2
			continue
		}
		if err != nil {
			return nil, err
		}
		start += n
		if !r.OK && (bad == nil || r.FirstBadSeq < bad.FirstBadSeq) {
			bad = r
		}
		// A fault at or below this request's checkpoints (but the newest)
		// is the first: those still to send are above them. One above
		// them (at the newest, say) may not be.
		if bad != nil && (start == len(rest) || bad.FirstBadSeq <= kept[start-1].Seq) {
			return bad, nil
		}
		if start == len(rest) {
			return r, nil
		}
	}
}

// keptAt returns the kept checkpoint at seq.
func keptAt(path string, kept []audit.Checkpoint, seq int64) (audit.Checkpoint, error) {
	i := slices.IndexFunc(kept, func(cp audit.Checkpoint) bool { return cp.Seq == seq })
	if i < 0 {
		return audit.Checkpoint{}, fmt.Errorf("%s holds no checkpoint at seq %d", path, seq)
	}
	return kept[i], nil
}
