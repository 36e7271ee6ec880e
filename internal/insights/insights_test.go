package insights

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRows: counts, rates, nearest-rank percentiles, quick approvals and
// identical runs, per grouping, from decisions in time order.
func TestRows(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	opened := func(d time.Duration) *time.Time { at := t0.Add(d); return &at }
	dec := func(kind, actor string, args map[string]any, decideS int, open *time.Time) Decision {
		return Decision{Kind: kind, Actor: actor, AgentID: "payer", Tool: "payments.send", Args: args,
			CreatedAt: t0, DecidedAt: t0.Add(time.Duration(decideS) * time.Second), OpenedAt: open}
	}
	same := map[string]any{"to": "a"}
	ds := []Decision{
		dec(KindApproved, "alice", same, 1, opened(0)),                                 // quick: 1 s after opening
		dec(KindApproved, "alice", same, 2, opened(-time.Hour)),                        // opened long before
		dec(KindApproved, "alice", same, 3, nil),                                       // never opened
		dec(KindDenied, "alice", same, 4, nil),                                         // breaks the run
		dec(KindApproved, "alice", same, 5, nil),                                       // a new run of 1
		dec(KindApproved, "bob", map[string]any{"to": "b"}, 10, opened(9*time.Second)), // quick
		dec(KindApproved, "bob", map[string]any{"to": "c"}, 20, nil),                   // not identical
		dec(KindExpired, "system", same, 30, nil),                                      // no reviewer's
		dec(KindApproved, "system", map[string]any{"to": "d"}, 0, opened(0)),           // Airlock's own
	}
	rows := Rows(ds, ByReviewer)
	require.Len(t, rows, 2)
	a, b := rows[0], rows[1]
	assert.Equal(t, Row{Key: "alice", Approvals: 4, Denials: 1, ApprovalRate: 0.8, MedianDecideMs: 3000, P90DecideMs: 5000,
		QuickApprovals: 1, LongestIdenticalRun: 3}, a)
	assert.Equal(t, Row{Key: "bob", Approvals: 2, ApprovalRate: 1, MedianDecideMs: 10000, P90DecideMs: 20000,
		QuickApprovals: 1, LongestIdenticalRun: 1}, b)

	byAgent := Rows(ds, ByAgent)
	require.Len(t, byAgent, 1)
	assert.Equal(t, 7, byAgent[0].Approvals)
	assert.Equal(t, 1, byAgent[0].Expiries)
	assert.InDelta(t, 7.0/8.0, byAgent[0].ApprovalRate, 1e-9)

	assert.Equal(t, int64(0), percentile(nil, 50))
	assert.Equal(t, int64(9), percentile([]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90))
	assert.Equal(t, int64(5), percentile([]int64{10, 1, 5, 3, 8, 2, 7, 4, 9, 6}, 50))
}
