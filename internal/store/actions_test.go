package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/risk"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

// newAction is a minimal action of agent for InsertAction.
func newAction(agent string, status hitl.Status, phrase, key string) *hitl.Action {
	now := time.Now().UTC().Truncate(time.Microsecond)
	id := uuid.Must(uuid.NewV7()).String()
	a := &hitl.Action{ID: id, AgentID: agent, CorrelationID: id, Tool: "email.send", Args: map[string]any{},
		Status: status, Risk: risk.Assessment{Level: risk.Low, Reasons: []string{}}, Approvals: []hitl.Approval{}, RequiredApprovals: 1, Phrase: phrase,
		IdempotencyKey: key, Version: 1, CreatedAt: now, UpdatedAt: now,
		Decision: hitl.Decision{Effect: "allow", By: "policy"}}
	if status == hitl.StatusPending {
		exp := now.Add(time.Hour)
		a.ExpiresAt = &exp
	}
	if key != "" {
		a.RequestHash = []byte(key)
	}
	return a
}

func insert(t *testing.T, s *store.Store, a *hitl.Action, g hitl.Guard) error {
	t.Helper()
	return s.InsertAction(ctxT(t), a, nil, a.AuditEvent(audit.KindActionSubmitted, "agent:"+a.AgentID, nil), g)
}

// count returns how many actions and submit events agent has.
func count(t *testing.T, s *store.Store, agent string) (actions, events int) {
	t.Helper()
	ctx := ctxT(t)
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM actions WHERE agent_id = $1`, agent).Scan(&actions))
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE agent_id = $1 AND kind = 'action.submitted'`, agent).Scan(&events))
	return actions, events
}

// TestInsertActionOutcomes: each way an insert can be refused writes
// nothing and says why.
func TestInsertActionOutcomes(t *testing.T) {
	t.Parallel()
	s := store.New(testdb.New(t), nil)
	ctx := ctxT(t)
	_, err := s.CreateAgent(ctx, store.Agent{ID: "bot", Name: "bot", CreatedBy: "admin"})
	require.NoError(t, err)
	_, err = s.PutPolicy(ctx, "agent:bot", policy.Document{Rules: []policy.Rule{{ID: "r", Tool: "*", Effect: policy.Allow}}}, "admin")
	require.NoError(t, err)
	tok := auth.Token{ID: auth.NewTokenID(), Kind: auth.KindAgent, Subject: "bot", ExpiresAt: time.Now().Add(time.Hour)}
	require.NoError(t, s.RecordToken(ctx, tok, "admin", audit.Event{Kind: audit.KindTokenIssued, Actor: "admin"}))
	good := hitl.Guard{TokenID: tok.ID, Cached: true, AgentVersion: 1}

	require.NoError(t, insert(t, s, newAction("bot", hitl.StatusPending, "email.send AAAA", "k1"), good))
	assert.ErrorIs(t, insert(t, s, newAction("bot", hitl.StatusApproved, "", "k1"), good), hitl.ErrDuplicateKey)
	assert.ErrorIs(t, insert(t, s, newAction("bot", hitl.StatusPending, "email.send CCCC", "k1"), good), hitl.ErrDuplicateKey)
	assert.ErrorIs(t, insert(t, s, newAction("bot", hitl.StatusPending, "email.send AAAA", ""), good), hitl.ErrPhraseTaken)
	assert.ErrorIs(t, insert(t, s, newAction("bot", hitl.StatusPending, "email.send AAAA", "k2"), good), hitl.ErrPhraseTaken,
		"a new key with a taken phrase is a phrase conflict, not a replay")
	assert.ErrorIs(t, insert(t, s, newAction("bot", hitl.StatusApproved, "", ""), hitl.Guard{TokenID: tok.ID, Cached: true, AgentVersion: 2}),
		hitl.ErrPolicyChanged)
	assert.ErrorIs(t, insert(t, s, newAction("bot", hitl.StatusApproved, "", ""), hitl.Guard{TokenID: tok.ID, Cached: true, AgentVersion: 1, FleetVersion: 1}),
		hitl.ErrPolicyChanged)
	require.NoError(t, insert(t, s, newAction("bot", hitl.StatusApproved, "", ""), hitl.Guard{TokenID: tok.ID, AgentVersion: 7}),
		"a policy read during the request is not re-checked")
	assert.Equal(t, apperr.CodeUnauthorized, apperr.CodeOf(insert(t, s, newAction("bot", hitl.StatusApproved, "", ""),
		hitl.Guard{TokenID: "no-such-token", Cached: true, AgentVersion: 1})))
	// actions has no foreign key to agents: the guard stands for it. A
	// token writes only for its own agent; without a token, only for an
	// agent that exists, even a denial (which a suspension lets through).
	_, err = s.CreateAgent(ctx, store.Agent{ID: "other", Name: "other", CreatedBy: "admin"})
	require.NoError(t, err)
	assert.Equal(t, apperr.CodeUnauthorized, apperr.CodeOf(insert(t, s, newAction("other", hitl.StatusApproved, "", ""), hitl.Guard{TokenID: tok.ID})),
		"bot's token for another agent")
	assert.Equal(t, apperr.CodeUnauthorized, apperr.CodeOf(insert(t, s, newAction("ghost", hitl.StatusApproved, "", ""), hitl.Guard{TokenID: tok.ID})),
		"bot's token for an agent that does not exist")
	userTok := auth.Token{ID: auth.NewTokenID(), Kind: auth.KindUser, Subject: "bot", ExpiresAt: time.Now().Add(time.Hour)}
	require.NoError(t, s.RecordToken(ctx, userTok, "admin", audit.Event{Kind: audit.KindTokenIssued, Actor: "admin"}))
	assert.Equal(t, apperr.CodeUnauthorized, apperr.CodeOf(insert(t, s, newAction("bot", hitl.StatusApproved, "", ""), hitl.Guard{TokenID: userTok.ID})),
		"a user's token named like the agent")
	for _, status := range []hitl.Status{hitl.StatusApproved, hitl.StatusDenied} {
		assert.Equal(t, apperr.CodeNotFound, apperr.CodeOf(insert(t, s, newAction("ghost", status, "", ""), hitl.Guard{})), "no agent ghost, %s", status)
	}
	require.NoError(t, insert(t, s, newAction("other", hitl.StatusApproved, "", ""), hitl.Guard{}), "no token, an agent that exists")
	var n int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM actions WHERE agent_id IN ('ghost', 'other')`).Scan(&n))
	assert.Equal(t, 1, n, "only the call for an existing agent, with no token, was written")
	// A pending action that assumed no conversation grant, while one is
	// active for its agent, tool and conversation.
	first := newAction("bot", hitl.StatusApproved, "", "")
	first.ConversationID = "conv-1"
	require.NoError(t, insert(t, s, first, good))
	_, err = s.Pool().Exec(ctx, `INSERT INTO grants (agent_id, tool, conversation_id, action_id, granted_by, expires_at)
		VALUES ('bot', 'email.send', 'conv-1', $1, 'rita', now() + interval '1 hour')`, first.ID)
	require.NoError(t, err)
	covered := newAction("bot", hitl.StatusPending, "email.send GGGG", "")
	covered.ConversationID = "conv-1"
	noGrant := good
	noGrant.NoGrant = true
	assert.ErrorIs(t, insert(t, s, covered, noGrant), hitl.ErrGrantFound)
	covered.ConversationID = "conv-2"
	require.NoError(t, insert(t, s, covered, noGrant), "no grant for another conversation")

	require.NoError(t, s.RevokeToken(ctx, tok.ID, "admin"))
	assert.Equal(t, apperr.CodeUnauthorized, apperr.CodeOf(insert(t, s, newAction("bot", hitl.StatusApproved, "", ""), good)))

	actions, events := count(t, s, "bot")
	assert.Equal(t, 4, actions)
	assert.Equal(t, 4, events)
}

// TestInsertActionConcurrentBatches submits from many goroutines at once,
// some of them with a status the table's check refuses (a statement the
// server fails, failing whatever batch it shares), some for an agent that
// does not exist (refused by the statement's guard), some replaying one
// key and some pending: every other insert lands once with its event,
// every refusal is its own, and the pending counts are right.
func TestInsertActionConcurrentBatches(t *testing.T) {
	t.Parallel()
	s := store.New(testdb.New(t), nil)
	ctx := ctxT(t)
	for i := range 4 {
		_, err := s.CreateAgent(ctx, store.Agent{ID: fmt.Sprintf("a%d", i), Name: "a", CreatedBy: "admin"})
		require.NoError(t, err)
	}
	const n = 200
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			agent, key, status, phrase := fmt.Sprintf("a%d", i%4), "", hitl.StatusApproved, ""
			switch {
			case i%25 == 7:
				agent = "ghost"
			case i%25 == 11:
				status = "bogus"
			case i%10 == 3:
				key = "same"
			case i%10 == 5:
				status, phrase = hitl.StatusPending, fmt.Sprintf("email.send P%03d", i)
			}
			errs[i] = insert(t, s, newAction(agent, status, phrase, key), hitl.Guard{})
		}()
	}
	wg.Wait()
	created, dup := map[string]int{}, map[string]int{}
	for i, err := range errs {
		agent := fmt.Sprintf("a%d", i%4)
		switch {
		case i%25 == 7:
			assert.Equal(t, apperr.CodeNotFound, apperr.CodeOf(err), "insert %d: %v", i, err)
		case i%25 == 11:
			assert.ErrorContains(t, err, "actions_status_check", "insert %d", i)
		case err == nil:
			created[agent]++
		case i%10 == 3:
			assert.ErrorIs(t, err, hitl.ErrDuplicateKey, "insert %d", i)
			dup[agent]++
		default:
			t.Errorf("insert %d: %v", i, err)
		}
	}
	total := 0
	for i := range 4 {
		agent := fmt.Sprintf("a%d", i)
		actions, events := count(t, s, agent)
		assert.Equal(t, created[agent], actions, agent)
		assert.Equal(t, actions, events, "one submit event per action of %s", agent)
		total += actions
	}
	assert.Equal(t, n-2*n/25-dup["a1"]-dup["a3"], total)
	var wrong int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM agent_pending p
		WHERE pending <> (SELECT count(*) FROM actions a WHERE a.agent_id = p.agent_id AND a.status = 'pending')`).Scan(&wrong))
	assert.Zero(t, wrong, "every agent's pending count is its pending actions")
	writes, commits := s.SubmitBatches()
	t.Logf("%d statements in %d commits, %d of them merged", writes, commits, s.MergedSubmitBatches())
}
