package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/notify"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

// routed stores n pending actions of agent, each with a route telling
// targets and one escalation step already due.
func routed(t *testing.T, s *store.Store, agent string, n int, targets ...string) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		a := newAction(agent, hitl.StatusPending, fmt.Sprintf("email.send %s%03d", agent[:2], i), "")
		now := a.CreatedAt
		route := &hitl.Route{Notify: targets, Steps: []hitl.RouteStep{
			{Step: 0, Due: now, Notify: targets, Reviewers: []string{}},
			{Step: 1, After: time.Millisecond, Due: now.Add(-time.Second), Notify: targets, Reviewers: []string{"oncall"}},
		}}
		require.NoError(t, insert(t, s, a, hitl.Guard{Route: route}))
		ids[i] = a.ID
	}
	return ids
}

// TestOutboxClaimsAreExclusive: deliverers of several instances claiming
// at once never get the same row, and every row is claimed.
func TestOutboxClaimsAreExclusive(t *testing.T) {
	t.Parallel()
	s := store.New(testdb.New(t), nil)
	ctx := ctxT(t)
	_, err := s.CreateAgent(ctx, store.Agent{ID: "claimer", Name: "claimer", CreatedBy: "admin"})
	require.NoError(t, err)
	routed(t, s, "claimer", 40, "a", "b")

	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				claims, err := s.ClaimDeliveries(ctx, 7, time.Hour)
				if !assert.NoError(t, err) || len(claims) == 0 {
					return
				}
				mu.Lock()
				for _, c := range claims {
					seen[c.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, 80, "one pending notification per action and target")
	for id, n := range seen {
		assert.Equal(t, 1, n, "row %d claimed %d times", id, n)
	}
}

// TestEscalationFiresOnce: schedulers of several instances firing at once
// fire each due step once, with one audit event and its outbox rows; a
// recorded attempt that lost its claim records nothing.
func TestEscalationFiresOnce(t *testing.T) {
	t.Parallel()
	s := store.New(testdb.New(t), nil)
	ctx := ctxT(t)
	_, err := s.CreateAgent(ctx, store.Agent{ID: "escalator", Name: "escalator", CreatedBy: "admin"})
	require.NoError(t, err)
	ids := routed(t, s, "escalator", 30, "pager")

	var wg sync.WaitGroup
	var mu sync.Mutex
	fired := map[string]int{}
	for range 5 {
		wg.Go(func() {
			got, err := s.FireEscalations(ctx, 100)
			assert.NoError(t, err)
			mu.Lock()
			for _, id := range got {
				fired[id]++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	got, err := s.FireEscalations(ctx, 100)
	require.NoError(t, err)
	for _, id := range got {
		fired[id]++
	}
	assert.Len(t, fired, len(ids))
	for id, n := range fired {
		assert.Equal(t, 1, n, "action %s escalated %d times", id, n)
	}
	var events, escalated int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_events WHERE kind = 'action.escalated'),
		(SELECT count(*) FROM notify_outbox WHERE event = 'action.escalated')`).Scan(&events, &escalated))
	assert.Equal(t, len(ids), events)
	assert.Equal(t, len(ids), escalated)
	// The events the statement composes (jsonb_build_object) are stored
	// as jsonb spells them: verification hashes them without parsing.
	require.NoError(t, audit.NewSealer(s, store.NewTestKey(t), audit.SealerConfig{}).Checkpoint(ctx))
	store.RequireQuickPath(t, s)

	acc, err := s.ReviewerAccess(ctx, ids[0], "nobody")
	require.NoError(t, err)
	assert.False(t, acc.Restricted, "the rule named no reviewers")
	assert.Equal(t, []string{"oncall"}, acc.Groups)

	claims, err := s.ClaimDeliveries(ctx, 1, time.Hour)
	require.NoError(t, err)
	require.Len(t, claims, 1)
	stale := claims[0]
	stale.Attempt++ // as if the claim had expired and been taken again
	require.NoError(t, s.RecordAttempt(ctx, stale, notify.Outcome{OK: true, Final: true}))
	var attempts int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM notify_attempts`).Scan(&attempts))
	assert.Zero(t, attempts)
	require.NoError(t, s.RecordAttempt(ctx, claims[0], notify.Outcome{OK: true, Final: true, StatusCode: 200}))
	ds, err := s.Deliveries(ctx, claims[0].ActionID)
	require.NoError(t, err)
	var delivered int
	for _, d := range ds {
		if d.Status == "delivered" {
			delivered++
			assert.Len(t, d.Attempts, 1)
		}
	}
	assert.Equal(t, 1, delivered)
}
