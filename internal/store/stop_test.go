package store_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

// TestInsertGuardsSuspensionAndWorktrees: the submit statement stores only
// a denial for a suspended agent, refuses a worktree the agent does not
// own, and records the token the action was submitted with.
func TestInsertGuardsSuspensionAndWorktrees(t *testing.T) {
	t.Parallel()
	s := store.New(testdb.New(t), nil)
	ctx := ctxT(t)
	for _, id := range []string{"alice", "bob"} {
		_, err := s.CreateAgent(ctx, store.Agent{ID: id, Name: id, CreatedBy: "admin"})
		require.NoError(t, err)
	}
	tok := auth.Token{ID: auth.NewTokenID(), Kind: auth.KindAgent, Subject: "alice", ExpiresAt: time.Now().Add(time.Hour)}
	require.NoError(t, s.RecordToken(ctx, tok, "admin", audit.Event{Kind: audit.KindTokenIssued, Actor: "admin"}))

	a := newAction("alice", hitl.StatusApproved, "", "")
	a.TokenID = tok.ID
	require.NoError(t, insert(t, s, a, hitl.Guard{TokenID: tok.ID}))
	got, err := s.Action(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, tok.ID, got.TokenID, "actions.token_id is filled at submit")

	// A worktree is alice's once her worktree.create recorded it.
	_, err = s.Pool().Exec(ctx, `INSERT INTO worktrees (name, agent_id, action_id) VALUES ('app/wt-1', 'alice', $1)`, a.ID)
	require.NoError(t, err)
	err = insert(t, s, newAction("bob", hitl.StatusApproved, "", ""), hitl.Guard{Worktree: "app/wt-1"})
	assert.Equal(t, apperr.CodeNotFound, apperr.CodeOf(err))
	err = insert(t, s, newAction("bob", hitl.StatusDenied, "", ""), hitl.Guard{Worktree: "app/wt-1"})
	assert.Equal(t, apperr.CodeNotFound, apperr.CodeOf(err), "not even a denial names another agent's worktree")
	require.NoError(t, insert(t, s, newAction("alice", hitl.StatusApproved, "", ""), hitl.Guard{Worktree: "app/wt-1"}))
	n, _ := count(t, s, "bob")
	assert.Zero(t, n)

	bobToken := func() string {
		tok := auth.Token{ID: auth.NewTokenID(), Kind: auth.KindAgent, Subject: "bob", ExpiresAt: time.Now().Add(time.Hour)}
		require.NoError(t, s.RecordToken(ctx, tok, "admin", audit.Event{Kind: audit.KindTokenIssued, Actor: "admin"}))
		return tok.ID
	}
	before := bobToken()
	_, err = s.SuspendAgent(ctx, "bob", "admin", "test")
	require.NoError(t, err)
	during := bobToken()
	// The statement reads the suspension from the token's row, or from the
	// agent's for a caller without a token.
	for _, g := range []hitl.Guard{{}, {TokenID: before}, {TokenID: during}} {
		assert.ErrorIs(t, insert(t, s, newAction("bob", hitl.StatusApproved, "", ""), g), hitl.ErrAgentSuspended, "%+v", g)
		assert.ErrorIs(t, insert(t, s, newAction("bob", hitl.StatusPending, "email.send BBBB", ""), g), hitl.ErrAgentSuspended, "%+v", g)
	}
	require.NoError(t, insert(t, s, newAction("bob", hitl.StatusDenied, "", ""), hitl.Guard{TokenID: before}), "a denial is stored")
	n, _ = count(t, s, "bob")
	assert.Equal(t, 1, n)
	// A submit that raced the suspension (read the agent as active just
	// before it committed) left an approved action: it is never leased
	// while suspended, and resuming cancels it rather than run it.
	_, err = s.Pool().Exec(ctx, `UPDATE agents SET suspended_at = NULL WHERE id = 'bob'`) // the race, replayed
	require.NoError(t, err)
	raced := newAction("bob", hitl.StatusApproved, "", "")
	raced.Tool = hitl.ToolExec
	require.NoError(t, s.InsertAction(ctx, raced, &hitl.Job{ID: uuid.Must(uuid.NewV7()).String(), ActionID: raced.ID, Kind: hitl.ToolExec,
		Target: "workspace:w", MaxAttempts: 1}, raced.AuditEvent(audit.KindActionSubmitted, "agent:bob", nil), hitl.Guard{}))
	_, err = s.Pool().Exec(ctx, `UPDATE agents SET suspended_at = now() WHERE id = 'bob'`)
	require.NoError(t, err)
	wtok := auth.Token{ID: auth.NewTokenID(), Kind: auth.KindWorker, Subject: "host", ExpiresAt: time.Now().Add(time.Hour), Targets: []string{"workspace:w"}}
	require.NoError(t, s.RecordToken(ctx, wtok, "admin", audit.Event{Kind: audit.KindTokenIssued, Actor: "admin"}))
	w := hitl.Worker{Name: "host", TokenID: wtok.ID, Kinds: []string{hitl.ToolExec}, Targets: []string{"workspace:w"}}
	l, err := s.LeaseJob(ctx, w, time.Minute)
	require.NoError(t, err)
	assert.Nil(t, l, "a suspended agent's job is never leased")
	resumed, err := s.ResumeAgent(ctx, "bob", "admin", "raced")
	require.NoError(t, err)
	require.Len(t, resumed, 1, "resuming cancels what the race left rather than run it")
	assert.Equal(t, raced.ID, resumed[0].ID)
	assert.Equal(t, hitl.StatusCancelled, resumed[0].Status)
	for _, g := range []hitl.Guard{{}, {TokenID: before}, {TokenID: during}, {TokenID: bobToken()}} {
		require.NoError(t, insert(t, s, newAction("bob", hitl.StatusApproved, "", ""), g), "%+v", g)
	}
	l, err = s.LeaseJob(ctx, w, time.Minute)
	require.NoError(t, err)
	assert.Nil(t, l, "the raced job was retired, not run")
	_, err = s.ResumeAgent(ctx, "nobody", "admin", "x")
	assert.Equal(t, apperr.CodeNotFound, apperr.CodeOf(err))
	// Every event written here, the cancellations the statement composes
	// among them, is stored as jsonb spells it.
	require.NoError(t, audit.NewSealer(s, store.NewTestKey(t), audit.SealerConfig{}).Checkpoint(ctx))
	store.RequireQuickPath(t, s)
}
