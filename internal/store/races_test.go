package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/eventbus"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/policy"
)

// ownConn is a connection to s's database outside s's pool (which the
// statements under test may need whole).
func ownConn(t *testing.T, s *Store) *pgx.Conn {
	t.Helper()
	c, err := pgx.ConnectConfig(context.Background(), s.pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// rowLockWaiters counts the backends of the database waiting for a row
// lock (advisory locks, which holdSubmitSlots takes, are not counted).
func rowLockWaiters(t *testing.T, c *pgx.Conn) int {
	t.Helper()
	var n int
	require.NoError(t, c.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event IN ('transactionid', 'tuple')`).Scan(&n))
	return n
}

// pendingOf counts agent's pending actions.
func pendingOf(t *testing.T, s *Store, agent string) int {
	t.Helper()
	var n int
	require.NoError(t, s.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM actions WHERE agent_id = $1 AND status = 'pending'`, agent).Scan(&n))
	return n
}

// hammer submits from workers goroutines, each call made by call(w, i)
// (i counts every call), until the returned stop is called; stop waits
// for them and returns how many calls were made. A call refused as
// suspended is expected; any other error fails the test.
func hammer(t *testing.T, ctx context.Context, s *Store, tokens map[string]string, workers int, call func(w int, i int64) mergeCall) (stop func() int64) {
	t.Helper()
	var done atomic.Bool
	var n atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for !done.Load() {
				if err := call(w, n.Add(1)).run(ctx, s, tokens); err != nil && !errors.Is(err, hitl.ErrAgentSuspended) {
					assert.NoError(t, err)
					return
				}
			}
		})
	}
	return func() int64 {
		done.Store(true)
		wg.Wait()
		return n.Load()
	}
}

// requireCountsTrue checks that each agent's pending count is its
// pending actions.
func requireCountsTrue(t *testing.T, s *Store, agents ...string) {
	t.Helper()
	for _, agent := range agents {
		var counted int
		require.NoError(t, s.pool.QueryRow(context.Background(), `SELECT pending FROM agent_pending WHERE agent_id = $1`, agent).Scan(&counted))
		assert.Equal(t, pendingOf(t, s, agent), counted, "agent %s's pending count", agent)
	}
}

// TestPendingSubmitRacingAStop: a pending submit whose statement began
// before a suspension of its agent, or a revocation of its token,
// committed (it read the agent and the token as active) is either stored
// before the stop looks for what to cancel, and cancelled by it, or
// refused: no pending action of a suspended agent, or of a revoked token,
// is left for a reviewer to approve. The interleaving is replayed: the
// test holds the agent's agent_pending row, so that the submit statement
// waits with its snapshot taken (and, now, the agent's row and its token's
// locked), then stops, then lets go. Before, the statement did not lock
// the agent's row, nor the token's: the stop went through without waiting
// and the submit then stored a pending action. Both forms of the
// statement: a call alone, and calls merged into one statement.
func TestPendingSubmitRacingAStop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		stop func(ctx context.Context, s *Store, tokens map[string]string) error
	}{
		{"suspension", func(ctx context.Context, s *Store, _ map[string]string) error {
			_, err := s.SuspendAgent(ctx, "bot", "admin", "race")
			return err
		}},
		{"revocation", func(ctx context.Context, s *Store, tokens map[string]string) error {
			return s.RevokeToken(ctx, tokens["bot"], "admin")
		}},
	} {
		for _, merged := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/merged=%v", tc.name, merged), func(t *testing.T) {
				t.Parallel()
				s, tokens := mergeFixture(t)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				watch := ownConn(t, s)
				hold, err := ownConn(t, s).Begin(ctx)
				require.NoError(t, err)
				defer func() { _ = hold.Rollback(context.Background()) }()
				_, err = hold.Exec(ctx, `SELECT FROM agent_pending WHERE agent_id = 'bot' FOR UPDATE`)
				require.NoError(t, err)

				calls := []mergeCall{{agent: "bot", status: hitl.StatusPending, tool: "email.send", token: "bot", phrase: "email.send RACE",
					guard: hitl.Guard{MaxPending: 10}}}
				if merged {
					calls = append(calls, mergeCall{agent: "other", status: hitl.StatusPending, tool: "email.send", phrase: "email.send OTHR"})
				}
				submitted := make(chan []error, 1)
				go func() {
					if merged {
						submitted <- holdSubmitSlots(t, s, func(i int) error { return calls[i].run(ctx, s, tokens) }, len(calls))
						return
					}
					submitted <- []error{calls[0].run(ctx, s, tokens)}
				}()
				require.Eventually(t, func() bool { return rowLockWaiters(t, watch) == 1 }, 30*time.Second, time.Millisecond,
					"the submit waits for the agent's count")

				stopped := make(chan error, 1)
				go func() { stopped <- tc.stop(ctx, s, tokens) }()
				// The stop waits for the submit's lock, or (as it did
				// before) goes through without it.
				var stopErr error
				returned := false
				require.Eventually(t, func() bool {
					select {
					case stopErr = <-stopped:
						returned = true
						return true
					default:
						return rowLockWaiters(t, watch) == 2
					}
				}, 30*time.Second, time.Millisecond)
				require.NoError(t, hold.Rollback(ctx))
				errs := <-submitted
				if !returned {
					stopErr = <-stopped
				}
				require.NoError(t, stopErr)

				assert.Zero(t, pendingOf(t, s, "bot"), "no pending action after the stop")
				for i, err := range errs {
					assert.NoError(t, err, "call %d", i)
				}
				var status string
				require.NoError(t, s.pool.QueryRow(ctx, `SELECT status FROM actions WHERE phrase = 'email.send RACE'`).Scan(&status))
				assert.Equal(t, string(hitl.StatusCancelled), status, "the submit that locked first was stored, then cancelled by the stop")
				if merged {
					assert.Equal(t, uint64(1), s.submits.merges.Load(), "the calls went out as one merged statement")
					assert.Equal(t, 1, pendingOf(t, s, "other"), "another agent's call in the same statement is stored")
				}
				requireCountsTrue(t, s, "bot", "other")
			})
		}
	}
}

// TestPendingSubmitsHammeredBySuspensions: goroutines submit pending calls
// for two agents as fast as they can (alone and merged, as the group
// commit batches them) while the test suspends and resumes one of them:
// whenever a suspension has returned, that agent has no pending action,
// and every submit is either stored or refused as suspended. Counts stay
// what the rows say.
func TestPendingSubmitsHammeredBySuspensions(t *testing.T) {
	t.Parallel()
	s, tokens := mergeFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stop := hammer(t, ctx, s, tokens, 12, func(w int, i int64) mergeCall {
		c := mergeCall{agent: "other", status: hitl.StatusPending, tool: "email.send", phrase: fmt.Sprintf("email.send %08d", i),
			guard: hitl.Guard{MaxPending: 1 << 20}}
		if w%2 == 0 {
			c.agent, c.token = "bot", "bot"
		}
		return c
	})
	for range 15 {
		require.Eventually(t, func() bool { return pendingOf(t, s, "bot") > 0 }, 30*time.Second, time.Millisecond)
		_, err := s.SuspendAgent(ctx, "bot", "admin", "hammer")
		require.NoError(t, err)
		assert.Zero(t, pendingOf(t, s, "bot"), "suspended: nothing of bot's is pending")
		_, err = s.ResumeAgent(ctx, "bot", "admin", "hammer")
		require.NoError(t, err)
	}
	stop()
	assert.Greater(t, s.submits.merges.Load(), uint64(0), "some submits went out merged")
	requireCountsTrue(t, s, "bot", "other")
}

// TestMaxPendingHeldUnderConcurrentSubmits: pending submits of one agent
// from many goroutines at once never leave it more pending actions than
// settings.max_pending (read under the agent's lock; before, concurrent
// submits passed it by the few in flight). The calls carry a
// rate, so that none is merged into one statement with another (calls
// merged do not see each other's counts): batched or alone, each reads the
// count as the one before it left it.
func TestMaxPendingHeldUnderConcurrentSubmits(t *testing.T) {
	t.Parallel()
	s, tokens := mergeFixture(t)
	ctx := context.Background()
	const limit, calls = 3, 40
	var wg sync.WaitGroup
	var stored, refused atomic.Int64
	for i := range calls {
		wg.Go(func() {
			c := mergeCall{agent: "bot", token: "bot", status: hitl.StatusPending, tool: "email.send", phrase: fmt.Sprintf("email.send MAX%03d", i),
				guard: hitl.Guard{MaxPending: limit, RatePerMinute: 1000}}
			err := c.run(ctx, s, tokens)
			switch {
			case err == nil:
				stored.Add(1)
			case errors.Is(err, hitl.ErrTooManyPending):
				refused.Add(1)
			default:
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(limit), stored.Load())
	assert.Equal(t, int64(calls-limit), refused.Load())
	assert.Equal(t, limit, pendingOf(t, s, "bot"))
}

// revokingStore is the real store with one interleaving added: the grant
// ActiveGrant finds is revoked (for real, audited) before the caller gets
// its id, as a reviewer's revocation landing while a submit is decided.
type revokingStore struct {
	*Store
	revoke func(ctx context.Context, id string)
}

func (r revokingStore) ActiveGrant(ctx context.Context, k hitl.GrantKey) (string, error) {
	id, err := r.Store.ActiveGrant(ctx, k)
	if id != "" && r.revoke != nil {
		r.revoke(ctx, id)
	}
	return id, err
}

// TestGrantRevokedWhileASubmitIsDecided: a call a conversation grant
// approves is stored as approved only if that grant is still active when
// the action is written; a grant revoked in between sends the call to a
// reviewer (before, the insert checked grants only for pending calls, and
// the revoked grant approved it).
func TestGrantRevokedWhileASubmitIsDecided(t *testing.T) {
	t.Parallel()
	s, _ := mergeFixture(t)
	ctx := context.Background()
	_, err := s.PutPolicy(ctx, AgentScope("other"), policy.Document{Rules: []policy.Rule{{ID: "ask", Tool: "email.send", Effect: policy.Approve}}}, "admin")
	require.NoError(t, err)
	rs := &revokingStore{Store: s}
	svc := hitl.NewService(hitl.Config{Store: rs, Bus: eventbus.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	submit := func() *hitl.Action {
		t.Helper()
		a, _, err := svc.Submit(ctx, "other", "", hitl.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "a@example.com"}, ConversationID: "c1"})
		require.NoError(t, err)
		return a
	}
	first := submit()
	require.Equal(t, hitl.StatusPending, first.Status)
	_, err = svc.Approve(ctx, first.ID, "rita", hitl.ApproveRequest{Confirmation: first.Phrase, Scope: hitl.ScopeConversation})
	require.NoError(t, err)

	covered := submit()
	assert.Equal(t, hitl.StatusApproved, covered.Status, "the grant approves the next call")
	assert.Equal(t, "grant", covered.Decision.Source)

	var revoked string
	rs.revoke = func(ctx context.Context, id string) {
		revoked = id
		_, err := svc.RevokeGrant(ctx, id, "admin")
		require.NoError(t, err)
	}
	raced := submit()
	require.NotEmpty(t, revoked, "the grant was found, then revoked")
	assert.Equal(t, hitl.StatusPending, raced.Status, "a revoked grant approves nothing: a reviewer decides")
	assert.NotEqual(t, "grant", raced.Decision.Source)
	var events int
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE action_id = $1`, raced.ID).Scan(&events))
	assert.Equal(t, 1, events, "one submit event, for what was stored")
}

// TestSuspensionRacingATransition: a suspension and a transaction that
// moves one of the agent's actions out of pending (an approval, a denial,
// a cancel: each holds the action's row, and the pending-count trigger
// then locks agent_pending at the end of the statement that moved it) both
// commit. Replayed: the transition locks the action, the suspension
// starts and waits for it, then the transition moves the action. A
// suspension that locked agent_pending before the actions (as the first
// version of the race fix above did) deadlocked with it.
func TestSuspensionRacingATransition(t *testing.T) {
	t.Parallel()
	s, tokens := mergeFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := mergeAction(mergeCall{agent: "bot", status: hitl.StatusPending, tool: "email.send", phrase: "email.send TRAN"})
	require.NoError(t, s.InsertAction(ctx, a, nil, a.AuditEvent("action.submitted", "agent:bot", nil), hitl.Guard{TokenID: tokens["bot"]}))
	watch := ownConn(t, s)
	move, err := ownConn(t, s).Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = move.Rollback(context.Background()) }()
	_, err = move.Exec(ctx, `SELECT FROM actions WHERE id = $1 FOR UPDATE`, a.ID)
	require.NoError(t, err)

	suspended := make(chan error, 1)
	go func() {
		_, err := s.SuspendAgent(ctx, "bot", "admin", "race")
		suspended <- err
	}()
	require.Eventually(t, func() bool { return rowLockWaiters(t, watch) == 1 }, 30*time.Second, time.Millisecond,
		"the suspension waits for the action")
	_, err = move.Exec(ctx, `UPDATE actions SET status = 'denied', version = version + 1 WHERE id = $1`, a.ID)
	require.NoError(t, err, "the transition moves the action")
	require.NoError(t, move.Commit(ctx))
	require.NoError(t, <-suspended, "the suspension commits")
	got, err := s.Action(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, hitl.StatusDenied, got.Status, "moved first, so not the suspension's to cancel")
	requireCountsTrue(t, s, "bot")
}

// TestSubmitShapesHammeredTogether: allowed and pending submits of one
// agent, plain and under a rate (whose statement locks agent_pending
// through airlock_admit), from many goroutines while the agent is
// suspended and resumed: the group commit's batches, whose statements of
// one agent share a transaction, never deadlock (each statement takes the
// agent's row before agent_pending, the lock order of store.go; before,
// a batch holding a rated call's agent_pending and then a pending call's
// agent row deadlocked with one holding the other pending call's), and
// the pending count stays what the rows say.
func TestSubmitShapesHammeredTogether(t *testing.T) {
	t.Parallel()
	s, tokens := mergeFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stop := hammer(t, ctx, s, tokens, 16, func(w int, i int64) mergeCall {
		c := mergeCall{agent: "bot", token: "bot", status: hitl.StatusApproved, tool: "email.send"}
		if w%2 == 0 {
			c.status, c.phrase = hitl.StatusPending, fmt.Sprintf("email.send %08d", i)
		}
		if w%4 < 2 {
			c.guard.RatePerMinute = 1 << 30
		}
		return c
	})
	for range 10 {
		time.Sleep(50 * time.Millisecond)
		_, err := s.SuspendAgent(ctx, "bot", "admin", "hammer")
		require.NoError(t, err)
		_, err = s.ResumeAgent(ctx, "bot", "admin", "hammer")
		require.NoError(t, err)
	}
	assert.Greater(t, stop(), int64(100))
	assert.Zero(t, s.submits.deadlocks.Load(), "batches deadlocked")
	requireCountsTrue(t, s, "bot")
}

// TestSuspensionRacingAnApprovalWithAGrant: an approval that writes a
// conversation grant (whose foreign key share-locks the agent's row) and a
// suspension of the agent (single or the fleet stop) both commit. The
// approval has moved the action when the suspension starts and waits for
// it; then the approval writes its grant. A suspension that locked the
// agent's row FOR UPDATE (as it did) deadlocked with that key share.
func TestSuspensionRacingAnApprovalWithAGrant(t *testing.T) {
	t.Parallel()
	for _, fleet := range []bool{false, true} {
		t.Run(fmt.Sprintf("fleet=%v", fleet), func(t *testing.T) {
			t.Parallel()
			s, tokens := mergeFixture(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			a := mergeAction(mergeCall{agent: "bot", status: hitl.StatusPending, tool: "email.send", phrase: "email.send GRNT", conv: "c9"})
			require.NoError(t, s.InsertAction(ctx, a, nil, a.AuditEvent("action.submitted", "agent:bot", nil), hitl.Guard{TokenID: tokens["bot"]}))
			watch := ownConn(t, s)
			approve, err := ownConn(t, s).Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = approve.Rollback(context.Background()) }()
			_, err = approve.Exec(ctx, `UPDATE actions SET status = 'approved', version = version + 1 WHERE id = $1`, a.ID)
			require.NoError(t, err)

			suspended := make(chan error, 1)
			go func() {
				var err error
				if fleet {
					_, _, err = s.SuspendFleet(ctx, "admin", "race")
				} else {
					_, err = s.SuspendAgent(ctx, "bot", "admin", "race")
				}
				suspended <- err
			}()
			require.Eventually(t, func() bool { return rowLockWaiters(t, watch) == 1 }, 30*time.Second, time.Millisecond,
				"the suspension waits for the approved action")
			_, err = approve.Exec(ctx, `INSERT INTO grants (agent_id, tool, conversation_id, action_id, granted_by, expires_at)
				VALUES ('bot', 'email.send', 'c9', $1, 'rita', now() + interval '1 hour')`, a.ID)
			require.NoError(t, err, "the approval writes its grant")
			require.NoError(t, approve.Commit(ctx))
			require.NoError(t, <-suspended, "the suspension commits")
			got, err := s.Action(ctx, a.ID)
			require.NoError(t, err)
			assert.Equal(t, hitl.StatusCancelled, got.Status, "approved first, then stopped by the suspension")
		})
	}
}

// TestExpirySweepRacingABatch: the expiry sweep, expiring the pending
// actions of two agents in one statement, and a transaction that locks
// both agents' pending counts in id order (as a group-commit batch of
// pending submits does) both commit. Replayed: the batch holds the first
// agent's count, the sweep starts and waits, then the batch locks the
// second agent's. Before, the sweep's pending-count trigger locked the
// counts in the order the actions expired (the second agent's first) and
// deadlocked with the batch.
func TestExpirySweepRacingABatch(t *testing.T) {
	t.Parallel()
	s, _ := mergeFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// other's action expires first: the sweep moves it first.
	for i, agent := range []string{"other", "bot"} {
		a := mergeAction(mergeCall{agent: agent, status: hitl.StatusPending, tool: "email.send", phrase: "email.send EXP" + agent})
		exp := time.Now().Add(time.Duration(i-10) * time.Second)
		a.ExpiresAt = &exp
		require.NoError(t, s.InsertAction(ctx, a, nil, a.AuditEvent("action.submitted", "agent:"+agent, nil), hitl.Guard{}))
	}
	watch := ownConn(t, s)
	batch, err := ownConn(t, s).Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = batch.Rollback(context.Background()) }()
	_, err = batch.Exec(ctx, `SELECT FROM agent_pending WHERE agent_id = 'bot' FOR NO KEY UPDATE`)
	require.NoError(t, err)

	type swept struct {
		n   int
		err error
	}
	done := make(chan swept, 1)
	go func() {
		got, err := s.ExpireDue(ctx, 10)
		done <- swept{len(got), err}
	}()
	require.Eventually(t, func() bool { return rowLockWaiters(t, watch) == 1 }, 30*time.Second, time.Millisecond,
		"the sweep waits for bot's count")
	_, err = batch.Exec(ctx, `SELECT FROM agent_pending WHERE agent_id = 'other' FOR NO KEY UPDATE`)
	require.NoError(t, err, "the batch locks other's count")
	require.NoError(t, batch.Commit(ctx))
	got := <-done
	require.NoError(t, got.err, "the sweep commits")
	assert.Equal(t, 2, got.n, "both actions expired")
	requireCountsTrue(t, s, "bot", "other")
}

// TestRevocationRacingABatch: a token's revocation and a group-commit
// batch of one agent's submits (one transaction, one statement per call)
// whose first statement locked the agent's pending count and whose later
// pending call asks for the token's row both commit. Replayed: the test
// holds another token's row so that the batch stops between its
// statements; the revocation starts; the test lets go. Before, the
// revocation locked the token and then, cancelling an action of the
// token, waited for the pending count the batch held, while the batch's
// pending call waited for the token: deadlock. The revocation now takes
// the agent's row first, as a suspension does.
func TestRevocationRacingABatch(t *testing.T) {
	t.Parallel()
	s, tokens := mergeFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	second := auth.Token{ID: auth.NewTokenID(), Kind: auth.KindAgent, Subject: "bot", ExpiresAt: time.Now().Add(time.Hour)}
	require.NoError(t, s.RecordToken(ctx, second, "admin", audit.Event{Kind: audit.KindTokenIssued, Actor: "admin"}))
	tokens["second"] = second.ID
	open := mergeCall{agent: "bot", status: hitl.StatusPending, tool: "email.send", token: "bot", phrase: "email.send OPEN"}
	require.NoError(t, open.run(ctx, s, tokens))

	watch := ownConn(t, s)
	hold, err := ownConn(t, s).Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = hold.Rollback(context.Background()) }()
	_, err = hold.Exec(ctx, `SELECT FROM tokens WHERE id = $1 FOR UPDATE`, tokens["second"])
	require.NoError(t, err)

	routed := hitl.Guard{Route: &hitl.Route{Notify: []string{"ops"}}} // not merged: a statement of its own
	calls := []mergeCall{
		{agent: "bot", status: hitl.StatusPending, tool: "email.send", phrase: "email.send FRST", guard: routed},
		{agent: "bot", status: hitl.StatusPending, tool: "email.send", token: "second", phrase: "email.send SCND"},
		{agent: "bot", status: hitl.StatusPending, tool: "email.send", token: "bot", phrase: "email.send THRD"},
	}
	submitted := make(chan []error, 1)
	go func() {
		submitted <- holdSubmitSlots(t, s, func(i int) error { return calls[i].run(ctx, s, tokens) }, len(calls))
	}()
	require.Eventually(t, func() bool { return rowLockWaiters(t, watch) == 1 }, 30*time.Second, time.Millisecond,
		"the batch's second statement waits for its token")
	revoked := make(chan error, 1)
	go func() { revoked <- s.RevokeToken(ctx, tokens["bot"], "admin") }()
	require.Eventually(t, func() bool { return rowLockWaiters(t, watch) == 2 }, 30*time.Second, time.Millisecond,
		"the revocation waits for the batch")
	require.NoError(t, hold.Rollback(ctx))
	require.NoError(t, <-revoked, "the revocation commits")
	for i, err := range <-submitted {
		assert.NoError(t, err, "call %d", i)
	}
	assert.Zero(t, s.submits.deadlocks.Load(), "batches deadlocked")
	var left int
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*) FROM actions WHERE token_id = $1 AND status = 'pending'`, tokens["bot"]).Scan(&left))
	assert.Zero(t, left, "nothing of the revoked token left pending")
	requireCountsTrue(t, s, "bot")
}
