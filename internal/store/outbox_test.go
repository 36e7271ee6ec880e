package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/groups"
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
	assert.Empty(t, acc.Rules, "the rule named no reviewers: a fired step's groups restrict nothing")

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

// TestReviewerAccessIsPerRule: each rule of an action's route that names
// reviewers (its clause) must let the reviewer in, through its own groups
// or those its fired steps add; a route stored before clauses (one row,
// no clause or rule id) means what it meant.
func TestReviewerAccessIsPerRule(t *testing.T) {
	t.Parallel()
	s := store.New(testdb.New(t), nil)
	ctx := ctxT(t)
	_, err := s.CreateAgent(ctx, store.Agent{ID: "gated", Name: "gated", CreatedBy: "admin"})
	require.NoError(t, err)
	for _, u := range []string{"lena", "olga", "fred"} {
		_, err := s.CreateUser(ctx, store.User{Username: u, PasswordHash: "x", Roles: []auth.Role{auth.RoleReviewer}}, "admin")
		require.NoError(t, err)
	}
	for name, members := range map[string][]string{"leads": {"lena", "fred"}, "finance": {"olga", "fred"}} {
		_, err := s.CreateGroup(ctx, "admin", groups.Group{Name: name, Members: members})
		require.NoError(t, err)
	}
	type access struct {
		rule   string
		groups []string
		member bool
	}
	accessOf := func(id, reviewer string) []access {
		acc, err := s.ReviewerAccess(ctx, id, reviewer)
		require.NoError(t, err)
		out := []access{}
		for _, r := range acc.Rules {
			out = append(out, access{r.RuleID, r.Groups, r.Member})
		}
		return out
	}
	canApprove := func(reviewer string) []string {
		list, _, err := s.ListActions(ctx, hitl.ListFilter{Statuses: []hitl.Status{hitl.StatusPending}, CanApprove: reviewer, Limit: 50})
		require.NoError(t, err)
		var ids []string
		for _, a := range list {
			ids = append(ids, a.ID)
		}
		return ids
	}

	two := newAction("gated", hitl.StatusPending, "email.send tw001", "")
	now := two.CreatedAt
	require.NoError(t, insert(t, s, two, hitl.Guard{Route: &hitl.Route{Steps: []hitl.RouteStep{
		{Clause: 0, RuleID: "vip", Step: 0, Due: now, Notify: []string{}, Reviewers: []string{"leads"}},
		{Clause: 1, RuleID: "money", Step: 0, Due: now, Notify: []string{}, Reviewers: []string{"finance"}},
	}}}))
	assert.Equal(t, []access{{"vip", []string{"leads"}, true}, {"money", []string{"finance"}, false}}, accessOf(two.ID, "lena"))
	assert.Equal(t, []access{{"vip", []string{"leads"}, true}, {"money", []string{"finance"}, true}}, accessOf(two.ID, "Fred"))

	// A route row as stored before clauses: the columns' defaults.
	old := newAction("gated", hitl.StatusPending, "email.send ol001", "")
	require.NoError(t, insert(t, s, old, hitl.Guard{}))
	_, err = s.Pool().Exec(ctx, `INSERT INTO action_routes (action_id, step, due_at, notify, reviewers, fired_at)
		VALUES ($1, 0, now(), '{}', '{leads}', now())`, old.ID)
	require.NoError(t, err)
	assert.Equal(t, []access{{"", []string{"leads"}, false}}, accessOf(old.ID, "olga"))

	assert.ElementsMatch(t, []string{two.ID, old.ID}, canApprove("fred"))
	assert.Equal(t, []string{old.ID}, canApprove("lena"), "lena is in no group of money")
	assert.Empty(t, canApprove("olga"), "olga is in no group of vip, nor of the old route's rule")
}
