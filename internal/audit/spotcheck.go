package audit

import (
	"bytes"
	"context"
	"fmt"
)

// SpotReport is the result of SpotCheck.
type SpotReport struct {
	// Sealed counts the checked events that have their place in the chain;
	// Unsealed those the sealer has not reached yet (normal for about a
	// second after they were written).
	Sealed, Unsealed int
	// BadSeq is the first event found wrong (0: none) and Reason why.
	BadSeq int64
	Reason string
}

// OK reports whether nothing was found wrong.
func (r SpotReport) OK() bool { return r.BadSeq == 0 }

// SpotCheck checks a few events in place — one correlation ID's timeline —
// without walking the chain: each sealed event's hash is recomputed from
// its stored content, and its links to the events just before and after it
// in the chain are followed. An unsealed record with the id of a sealed
// one is a second row of that event (a seal names its event's id and
// time). It catches an edited, swapped or removed
// neighbour of these events cheaply; only Verify proves the whole chain and
// its signed checkpoints.
func SpotCheck(ctx context.Context, src ChainRanger, records []Record) (SpotReport, error) {
	var rep SpotReport
	var h Hasher
	sealed := map[int64]int64{} // id → seq of the sealed records
	for i := range records {
		if records[i].Seq != 0 {
			sealed[records[i].ID] = records[i].Seq
		}
	}
	for i := range records {
		r := &records[i]
		if r.Seq == 0 {
			if seq, ok := sealed[r.ID]; ok { // a row with the id, not the time, of a sealed event
				rep.BadSeq, rep.Reason = seq, fmt.Sprintf("duplicate: event %d has a second row besides the one sealed", r.ID)
				return rep, nil
			}
			rep.Unsealed++
			continue
		}
		rep.Sealed++
		bad := func(format string, a ...any) (SpotReport, error) {
			rep.BadSeq, rep.Reason = r.Seq, fmt.Sprintf(format, a...)
			return rep, nil
		}
		sum, err := h.Hash(r.PrevHash, r)
		if err != nil {
			return rep, err
		}
		if !bytes.Equal(sum, r.Hash) {
			return bad("hash mismatch: the stored event is not what was sealed")
		}
		around, err := src.ChainRange(ctx, max(r.Seq-2, 0), r.Seq+1)
		if err != nil {
			return rep, err
		}
		var prev, next *Record
		for j := range around {
			if around[j].Missing {
				continue // the seal is there, its event not: a gap
			}
			switch around[j].Seq {
			case r.Seq - 1:
				prev = &around[j]
			case r.Seq + 1:
				next = &around[j]
			}
		}
		switch {
		case r.Seq == 1 && !bytes.Equal(r.PrevHash, Genesis):
			return bad("broken link: the first event does not start the chain")
		case r.Seq > 1 && prev == nil:
			return bad("gap: event %d is missing", r.Seq-1)
		case prev != nil && !bytes.Equal(prev.Hash, r.PrevHash):
			return bad("broken link to event %d", r.Seq-1)
		case next != nil && !bytes.Equal(next.PrevHash, r.Hash):
			return bad("broken link from event %d", r.Seq+1)
		}
	}
	return rep, nil
}
