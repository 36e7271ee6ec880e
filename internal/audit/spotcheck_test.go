package audit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chain is an in-memory ChainRanger over sealed records.
type chain []Record

func (c chain) ChainRange(_ context.Context, after, through int64) ([]Record, error) {
	var out []Record
	for _, r := range c {
		if r.Seq > after && r.Seq <= through {
			out = append(out, r)
		}
	}
	return out, nil
}

func sealedChain(t *testing.T, n int) chain {
	t.Helper()
	var h Hasher
	prev := Genesis
	c := make(chain, n)
	for i := range c {
		r := Record{ID: int64(i + 1), At: time.Date(2026, 11, 30, 10, 0, i, 0, time.UTC), Kind: "action.submitted",
			Actor: "agent:a", CorrelationID: "corr", Args: []byte(`{"n":1}`), Seq: int64(i + 1), PrevHash: prev}
		sum, err := h.Hash(prev, &r)
		require.NoError(t, err)
		r.Hash = sum
		c[i], prev = r, sum
	}
	return c
}

func TestSpotCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sealedChain(t, 5)
	rep, err := SpotCheck(ctx, c, []Record{c[1], c[3], {ID: 9}})
	require.NoError(t, err)
	assert.True(t, rep.OK())
	assert.Equal(t, 2, rep.Sealed)
	assert.Equal(t, 1, rep.Unsealed)

	edited := append(chain{}, c...)
	edited[3].Args = []byte(`{"n":2}`)
	rep, err = SpotCheck(ctx, edited, []Record{edited[3]})
	require.NoError(t, err)
	assert.Equal(t, int64(4), rep.BadSeq)
	assert.Contains(t, rep.Reason, "hash mismatch")

	gap := append(chain{}, c[:2]...)
	gap = append(gap, c[3:]...) // seq 3 deleted
	rep, err = SpotCheck(ctx, gap, []Record{c[3]})
	require.NoError(t, err)
	assert.Equal(t, int64(4), rep.BadSeq)
	assert.Contains(t, rep.Reason, "gap")

	// A second row of a sealed event (its id, another time) is unsealed:
	// not "not sealed yet", but a row the chain does not hold.
	second := c[1]
	second.At, second.Actor, second.Seq, second.PrevHash, second.Hash = second.At.Add(time.Microsecond), "reviewer:forged", 0, nil, nil
	rep, err = SpotCheck(ctx, c, []Record{c[0], c[1], second})
	require.NoError(t, err)
	assert.Equal(t, int64(2), rep.BadSeq)
	assert.Contains(t, rep.Reason, "duplicate: event 2 has a second row")

	relinked := append(chain{}, c...)
	relinked[4].PrevHash = make([]byte, HashSize) // the next event no longer points here
	rep, err = SpotCheck(ctx, relinked, []Record{c[3]})
	require.NoError(t, err)
	assert.Contains(t, rep.Reason, "broken link from event 5")
}
