package store

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/risk"
	"github.com/airlockhq/airlock/internal/testdb"
)

// mergeCall is one submit of TestMergedSubmitsDecideAsAlone.
type mergeCall struct {
	name   string
	agent  string
	status hitl.Status
	phrase string
	key    string
	tool   string
	job    bool
	token  string // "bot", "sus", "user" (a user's token named bot), or none
	guard  hitl.Guard
	conv   string
}

// The conversation grants of mergeFixture: one active, one revoked.
const (
	activeGrant  = "0190a0f0-0000-7000-8000-00000000a001"
	revokedGrant = "0190a0f0-0000-7000-8000-00000000a002"
)

// mergeFixture is a fresh database with the agents bot (policy version 1, an
// agent token), sus (suspended, with its token), other, planned (plan mode
// on) and full (one pending action already), a conversation grant for bot
// in conv-grant, and the tokens by name.
func mergeFixture(t *testing.T) (*Store, map[string]string) {
	t.Helper()
	s := New(testdb.New(t), nil)
	ctx := context.Background()
	for _, id := range []string{"bot", "sus", "other", "planned", "full"} {
		_, err := s.CreateAgent(ctx, Agent{ID: id, Name: id, CreatedBy: "admin"})
		require.NoError(t, err)
	}
	_, err := s.PutPolicy(ctx, "agent:bot", policy.Document{Rules: []policy.Rule{{ID: "r", Tool: "*", Effect: policy.Allow}}}, "admin")
	require.NoError(t, err)
	tokens := map[string]string{}
	for name, tok := range map[string]auth.Token{
		"bot":  {Kind: auth.KindAgent, Subject: "bot"},
		"sus":  {Kind: auth.KindAgent, Subject: "sus"},
		"user": {Kind: auth.KindUser, Subject: "bot"},
	} {
		tok.ID, tok.ExpiresAt = auth.NewTokenID(), time.Now().Add(time.Hour)
		require.NoError(t, s.RecordToken(ctx, tok, "admin", audit.Event{Kind: audit.KindTokenIssued, Actor: "admin"}))
		tokens[name] = tok.ID
	}
	_, err = s.SuspendAgent(ctx, "sus", "admin", "test")
	require.NoError(t, err)
	_, err = s.SetPlanMode(ctx, "agent:planned", true, "admin", "test", func(hitl.PlanMode) audit.Event {
		return audit.Event{Kind: hitl.KindPlanModeOn, Actor: "admin"}
	})
	require.NoError(t, err)
	first := mergeAction(mergeCall{agent: "bot", status: hitl.StatusApproved, tool: "email.send"})
	first.ConversationID = "conv-grant"
	require.NoError(t, s.InsertAction(ctx, first, nil, first.AuditEvent(audit.KindActionSubmitted, "agent:bot", nil), hitl.Guard{}))
	_, err = s.Pool().Exec(ctx, `INSERT INTO grants (id, agent_id, tool, conversation_id, action_id, granted_by, expires_at)
		VALUES ($2, 'bot', 'email.send', 'conv-grant', $1, 'rita', now() + interval '1 hour')`, first.ID, activeGrant)
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, `INSERT INTO grants (id, agent_id, tool, conversation_id, action_id, granted_by, expires_at, revoked_at, revoked_by)
		VALUES ($2, 'bot', 'email.send', 'conv-revoked', $1, 'rita', now() + interval '1 hour', now(), 'admin')`, first.ID, revokedGrant)
	require.NoError(t, err)
	full := mergeAction(mergeCall{agent: "full", status: hitl.StatusPending, phrase: "email.send FULL", tool: "email.send"})
	require.NoError(t, s.InsertAction(ctx, full, nil, full.AuditEvent(audit.KindActionSubmitted, "agent:full", nil), hitl.Guard{}))
	return s, tokens
}

func mergeAction(c mergeCall) *hitl.Action {
	now := time.Now().UTC().Truncate(time.Microsecond)
	id := uuid.Must(uuid.NewV7()).String()
	a := &hitl.Action{ID: id, AgentID: c.agent, CorrelationID: id, ConversationID: c.conv, Tool: c.tool, Args: map[string]any{"n": 1, "to": "a@example.com"},
		Status: c.status, Risk: risk.Assessment{Level: risk.Low, Reasons: []string{}}, Approvals: []hitl.Approval{}, RequiredApprovals: 1,
		Phrase: c.phrase, IdempotencyKey: c.key, Version: 1, CreatedAt: now, UpdatedAt: now,
		Decision: hitl.Decision{Effect: "allow", By: "policy", Reason: "rule r"}}
	if c.status == hitl.StatusPending {
		exp := now.Add(time.Hour)
		a.ExpiresAt = &exp
	}
	if c.key != "" {
		a.RequestHash = []byte(c.key)
	}
	return a
}

func (c mergeCall) run(ctx context.Context, s *Store, tokens map[string]string) error {
	a := mergeAction(c)
	g := c.guard
	g.TokenID = tokens[c.token]
	a.TokenID = g.TokenID // as hitl.Service records it
	var job *hitl.Job
	if c.job {
		job = &hitl.Job{ID: uuid.Must(uuid.NewV7()).String(), ActionID: a.ID, Kind: "exec", Target: "", MaxAttempts: 1}
	}
	return s.InsertAction(ctx, a, job, a.AuditEvent(audit.KindActionSubmitted, "agent:"+c.agent, map[string]any{"via": "test"}), g)
}

// mergeCalls are one of each way a plain submit is written or refused,
// none of which depends on another call of the same batch having been
// written first (a merged batch's calls do not see each other's pending
// counts; calls one after the other do).
var mergeCalls = []mergeCall{
	{name: "allowed", agent: "bot", status: hitl.StatusApproved, tool: "email.send", token: "bot", guard: hitl.Guard{Cached: true, AgentVersion: 1}},
	{name: "a key", agent: "bot", status: hitl.StatusApproved, tool: "email.send", token: "bot", key: "k1"},
	{name: "the key again", agent: "bot", status: hitl.StatusApproved, tool: "email.send", token: "bot", key: "k1"},
	{name: "pending", agent: "bot", status: hitl.StatusPending, tool: "email.send", token: "bot", phrase: "email.send AAAA"},
	{name: "its phrase again", agent: "bot", status: hitl.StatusPending, tool: "email.send", token: "bot", phrase: "email.send AAAA"},
	{name: "pending, a key", agent: "bot", status: hitl.StatusPending, tool: "email.send", token: "bot", phrase: "email.send BBBB", key: "k2",
		guard: hitl.Guard{MaxPending: 100}},
	{name: "with its job", agent: "bot", status: hitl.StatusApproved, tool: "exec", token: "bot", job: true},
	{name: "a read", agent: "bot", status: hitl.StatusApproved, tool: "fs.read", token: "bot", guard: hitl.Guard{Read: true}},
	{name: "no such agent", agent: "ghost", status: hitl.StatusApproved, tool: "email.send"},
	{name: "no such agent, a denial", agent: "ghost", status: hitl.StatusDenied, tool: "email.send"},
	{name: "another agent's token", agent: "other", status: hitl.StatusApproved, tool: "email.send", token: "bot"},
	{name: "a user's token", agent: "bot", status: hitl.StatusApproved, tool: "email.send", token: "user"},
	{name: "no token", agent: "other", status: hitl.StatusApproved, tool: "email.send"},
	{name: "policy changed", agent: "bot", status: hitl.StatusApproved, tool: "email.send", token: "bot", guard: hitl.Guard{Cached: true, AgentVersion: 2}},
	{name: "fleet policy changed", agent: "bot", status: hitl.StatusApproved, tool: "email.send", token: "bot", guard: hitl.Guard{Cached: true, AgentVersion: 1, FleetVersion: 3}},
	{name: "suspended", agent: "sus", status: hitl.StatusApproved, tool: "email.send", token: "sus"},
	{name: "suspended, a denial", agent: "sus", status: hitl.StatusDenied, tool: "email.send", token: "sus"},
	{name: "a grant covers it", agent: "bot", status: hitl.StatusPending, tool: "email.send", token: "bot", phrase: "email.send GGGG",
		conv: "conv-grant", guard: hitl.Guard{NoGrant: true}},
	{name: "no grant in this conversation", agent: "bot", status: hitl.StatusPending, tool: "email.send", token: "bot", phrase: "email.send HHHH",
		conv: "conv-other", guard: hitl.Guard{NoGrant: true}},
	{name: "a grant approved it", agent: "bot", status: hitl.StatusApproved, tool: "email.send", token: "bot", conv: "conv-grant",
		guard: hitl.Guard{Grant: activeGrant}},
	{name: "the grant that approved it was revoked", agent: "bot", status: hitl.StatusApproved, tool: "email.send", token: "bot",
		conv: "conv-revoked", guard: hitl.Guard{Grant: revokedGrant}},
	{name: "suspended, pending", agent: "sus", status: hitl.StatusPending, tool: "email.send", token: "sus", phrase: "email.send SSSS"},
	{name: "plan mode", agent: "planned", status: hitl.StatusApproved, tool: "email.send"},
	{name: "plan mode, a read", agent: "planned", status: hitl.StatusApproved, tool: "fs.read", guard: hitl.Guard{Read: true}},
	{name: "plan mode, a denial", agent: "planned", status: hitl.StatusDenied, tool: "email.send"},
	{name: "too many pending", agent: "full", status: hitl.StatusPending, tool: "email.send", phrase: "email.send IIII", guard: hitl.Guard{MaxPending: 1}},
	{name: "room for one more", agent: "full", status: hitl.StatusPending, tool: "email.send", phrase: "email.send JJJJ", guard: hitl.Guard{MaxPending: 2}},
}

// holdSubmitSlots takes every batch slot of s's submits with statements
// that wait for locks the test holds, runs each of calls from its own
// goroutine, one after the other into the queue (so that of two calls of
// one agent the earlier comes first in the batch too, as it would alone),
// and, once every call waits there, lets one slot go: the caller it is
// handed to takes every call into its batch. The other slots go after.
// It returns each call's error.
func holdSubmitSlots(t *testing.T, s *Store, calls func(i int) error, n int) []error {
	t.Helper()
	g := s.submits
	require.LessOrEqual(t, n, g.maxBatch)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lock, err := s.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer lock.Release()
	const key = 7014 // slot i's statement waits for key+i
	var blockers sync.WaitGroup
	for i := range g.maxLeaders {
		_, err = lock.Exec(ctx, `SELECT pg_advisory_lock($1)`, key+i)
		require.NoError(t, err)
		blockers.Go(func() {
			var one int
			assert.NoError(t, g.queryRow(ctx, `SELECT 1 FROM pg_advisory_xact_lock_shared($1)`, []any{key + i}, &one))
		})
	}
	queued := func() int { g.mu.Lock(); defer g.mu.Unlock(); return len(g.queue) }
	require.Eventually(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.leaders == g.maxLeaders }, 10*time.Second, time.Millisecond)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = calls(i) })
		require.Eventually(t, func() bool { return queued() == i+1 }, 10*time.Second, 100*time.Microsecond)
	}
	for i := range g.maxLeaders {
		_, err = lock.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key+i)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return queued() == 0 }, 10*time.Second, 100*time.Microsecond)
	}
	blockers.Wait()
	wg.Wait()
	return errs
}

// TestMergedSubmitsDecideAsAlone: a batch of plain submits that goes out as
// the one merged statement (insertManySQL) writes and refuses exactly what
// the same calls made one after the other do, each guard and conflict
// included, with the same rows, pending counts, jobs and audit events, and
// a chain that verifies (the events' digests are their contents').
func TestMergedSubmitsDecideAsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	alone, aloneTokens := mergeFixture(t)
	aloneErrs := make([]error, len(mergeCalls))
	for i, c := range mergeCalls {
		aloneErrs[i] = c.run(ctx, alone, aloneTokens)
	}
	merged, mergedTokens := mergeFixture(t)
	mergedErrs := holdSubmitSlots(t, merged, func(i int) error { return mergeCalls[i].run(ctx, merged, mergedTokens) }, len(mergeCalls))
	assert.Equal(t, uint64(1), merged.submits.merges.Load(), "the calls went out as one merged statement")

	for i, c := range mergeCalls {
		assert.Equal(t, fmt.Sprint(aloneErrs[i]), fmt.Sprint(mergedErrs[i]), "%s", c.name)
	}
	written := 0
	for _, err := range aloneErrs {
		if err == nil {
			written++
		}
	}
	assert.Equal(t, 13, written, "the cases write what they say (%v)", aloneErrs)
	assert.Equal(t, snapshot(t, alone), snapshot(t, merged))

	key := NewTestKey(t)
	require.NoError(t, audit.NewSealer(merged, key, audit.SealerConfig{}).Checkpoint(ctx))
	report, err := audit.Verify(ctx, merged, audit.VerifyOptions{Keys: []ed25519.PublicKey{key.Public()}})
	require.NoError(t, err)
	assert.True(t, report.OK, "%+v", report)
	RequireQuickPath(t, merged)
	require.NoError(t, audit.NewSealer(alone, key, audit.SealerConfig{}).Checkpoint(ctx))
	RequireQuickPath(t, alone)
}

// TestMergedBatchRefusedRunsEachAlone: a merged batch the server refuses
// (one call breaks a check) is run again call by call: the others are
// written, the one refused gets its own error.
func TestMergedBatchRefusedRunsEachAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, tokens := mergeFixture(t)
	calls := []mergeCall{
		{agent: "bot", status: hitl.StatusApproved, tool: "email.send", token: "bot"},
		{agent: "bot", status: "bogus", tool: "email.send", token: "bot"},
		{agent: "other", status: hitl.StatusApproved, tool: "email.send"},
	}
	errs := holdSubmitSlots(t, s, func(i int) error { return calls[i].run(ctx, s, tokens) }, len(calls))
	assert.NoError(t, errs[0])
	assert.ErrorContains(t, errs[1], "actions_status_check")
	assert.NoError(t, errs[2])
	assert.Zero(t, s.submits.merges.Load(), "the merged statement did not commit")
	var n int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM actions WHERE status = 'approved'`).Scan(&n))
	assert.Equal(t, 3, n, "the fixture's one and the two good calls")
}

// snapshot is what the submits wrote, in a form two databases compare by.
func snapshot(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	for _, q := range []string{
		`SELECT agent_id, status, tool, coalesce(phrase, ''), coalesce(idempotency_key, ''), coalesce(token_id IS NOT NULL, false), conversation_id, count(*)
			FROM actions GROUP BY 1, 2, 3, 4, 5, 6, 7 ORDER BY 1, 2, 3, 4, 5, 6, 7`,
		`SELECT agent_id, pending FROM agent_pending ORDER BY 1`,
		`SELECT j.kind, a.agent_id, count(*) FROM jobs j JOIN actions a ON a.id = j.action_id GROUP BY 1, 2 ORDER BY 1, 2`,
		`SELECT e.kind, e.actor, e.agent_id, e.tool, e.args::text, e.data::text, e.digest IS NOT NULL, count(*) FROM audit_events e
			WHERE e.action_id IS NOT NULL GROUP BY 1, 2, 3, 4, 5, 6, 7 ORDER BY 1, 2, 3, 4, 5, 6, 7`,
		`SELECT count(*) FROM actions a WHERE NOT EXISTS (SELECT FROM audit_events e WHERE e.action_id = a.id AND e.kind = 'action.submitted')`,
	} {
		rows, err := s.Pool().Query(context.Background(), q)
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
			v, err := r.Values()
			return fmt.Sprint(v), err
		})
		require.NoError(t, err)
		out = append(out, lines...)
	}
	return out
}

// NewTestKey is a fresh audit signing key (exported for the store_test
// package's tests too).
func NewTestKey(t testing.TB) *audit.SigningKey {
	t.Helper()
	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	k, err := audit.NewSigningKey(seed)
	require.NoError(t, err)
	return k
}

// TestManyRowSaysWhatTheStatementWouldStore: a merged row carries each
// parameter as the one-call statement would have it stored: times to the
// microsecond, truncated (as pgx sends a time; PostgreSQL would round a
// longer text), bytes as bytea, JSON as itself; and no row for what JSON
// would change (a string that is not UTF-8) or a parameter that is not one
// JSON value (which could add keys to the row).
func TestManyRowSaysWhatTheStatementWouldStore(t *testing.T) {
	t.Parallel()
	params := func(change func([]any)) []any {
		p := make([]any, len(manyColumnTypes))
		for i := range p {
			p[i] = ""
		}
		change(p)
		return p
	}
	at := time.Date(2026, 12, 2, 3, 4, 5, 123456789, time.UTC)
	row := string(manyRow(params(func(p []any) {
		p[19], p[15] = at, &at
		p[17], p[7], p[22] = []byte{0xde, 0xad}, []byte(`{"a":[1,2]}`), []byte(nil)
	})))
	assert.Contains(t, row, `"p20":"2026-12-02T03:04:05.123456Z"`)
	assert.Contains(t, row, `"p16":"2026-12-02T03:04:05.123456Z"`)
	assert.Contains(t, row, `"p18":"\\xdead"`)
	assert.Contains(t, row, `"p8":{"a":[1,2]}`)
	assert.Contains(t, row, `"p23":null`)
	assert.Nil(t, manyRow(params(func(p []any) { p[2] = "bad \xff" })), "a string that is not UTF-8")
	assert.Nil(t, manyRow(params(func(p []any) { p[7] = []byte(`1,"p2":"other"`) })), "more than one JSON value")
}
