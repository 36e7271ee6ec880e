package store_test

import (
	"testing"
	"time"

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
	require.NoError(t, s.ResumeAgent(ctx, "bob", "admin"))
	for _, g := range []hitl.Guard{{}, {TokenID: before}, {TokenID: during}, {TokenID: bobToken()}} {
		require.NoError(t, insert(t, s, newAction("bob", hitl.StatusApproved, "", ""), g), "%+v", g)
	}
	assert.Equal(t, apperr.CodeNotFound, apperr.CodeOf(s.ResumeAgent(ctx, "nobody", "admin")))
}
