package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

func kinds(events []client.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Kind
	}
	return out
}

func TestAuditTrailByCorrelationID(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("mailer", designPolicy)
	alice := env.Reviewer("alice")
	auditor := env.Auditor("audrey")

	a, err := agent.Submit(ctx, client.SubmitRequest{
		Tool:           "email.send",
		Args:           map[string]any{"to": "x@example.com", "api_key": "sk-live-should-not-be-stored", "body": "Authorization: Bearer abcdefghijklmnopqrstuvwxyz"},
		AgentInstance:  "pod-7",
		ConversationID: "conv-1",
		StepID:         "step-3",
		CorrelationID:  "corr-42",
	})
	require.NoError(t, err)
	assert.Equal(t, "[REDACTED]", a.Args["api_key"], "secrets are redacted before storage")
	assert.NotContains(t, a.Args["body"], "abcdefghijklmnop")
	full, err := alice.Get(ctx, a.ID)
	require.NoError(t, err)
	_, err = alice.Approve(ctx, a.ID, full.ConfirmationPhrase, "")
	require.NoError(t, err)
	_, err = agent.ReportResult(ctx, a.ID, client.Result{Outcome: "succeeded", Output: map[string]any{"password": "p4ss"}})
	require.NoError(t, err)

	page, err := auditor.Audit(ctx, url.Values{"correlation_id": {"corr-42"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"action.submitted", "action.approved", "action.result"}, kinds(page.Events))
	for _, ev := range page.Events {
		assert.Equal(t, "mailer", ev.AgentID)
		assert.Equal(t, "conv-1", ev.ConversationID)
		assert.Equal(t, a.ID, ev.ActionID)
		assert.Equal(t, "email.send", ev.Tool)
		assert.Equal(t, "[REDACTED]", ev.Args["api_key"])
	}
	assert.Equal(t, "agent:mailer", page.Events[0].Actor)
	assert.Equal(t, "mail", page.Events[0].Decision["rule_id"])
	assert.Equal(t, "alice", page.Events[1].Actor)
	assert.NotContains(t, page.Events[2].Data["result"], "p4ss")

	// The raw database holds no secret either.
	conn, err := pgx.Connect(ctx, env.DBURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var leaks int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE args::text LIKE '%sk-live%' OR data::text LIKE '%p4ss%'`).Scan(&leaks))
	assert.Zero(t, leaks)
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM actions WHERE args::text LIKE '%sk-live%' OR result::text LIKE '%p4ss%'`).Scan(&leaks))
	assert.Zero(t, leaks)
}

func TestAuditFiltersAndPagination(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	a := env.Agent("agent-a", designPolicy)
	b := env.Agent("agent-b", designPolicy)
	auditor := env.Auditor("audrey")
	start := time.Now().Add(-time.Second)
	for i := range 7 {
		_, err := a.Submit(ctx, client.SubmitRequest{Tool: "fs.read", Args: map[string]any{"n": i}, ConversationID: "conv-a"})
		require.NoError(t, err)
	}
	_, err := b.Submit(ctx, client.SubmitRequest{Tool: "fs.read", Args: map[string]any{}, ConversationID: "conv-b"})
	require.NoError(t, err)

	var all []client.Event
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		q := url.Values{"agent": {"agent-a"}, "kind": {"action.submitted"}, "limit": {"3"}, "since": {start.UTC().Format(time.RFC3339Nano)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		page, err := auditor.Audit(ctx, q)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(page.Events), 3)
		all = append(all, page.Events...)
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	assert.Len(t, all, 7)
	for i := 1; i < len(all); i++ {
		assert.Greater(t, all[i].ID, all[i-1].ID, "ascending, no repeats")
	}
	page, err := auditor.Audit(ctx, url.Values{"conversation_id": {"conv-b"}})
	require.NoError(t, err)
	assert.Len(t, page.Events, 1)
	page, err = auditor.Audit(ctx, url.Values{"until": {start.UTC().Format(time.RFC3339Nano)}, "agent": {"agent-a"}, "kind": {"action.submitted"}})
	require.NoError(t, err)
	assert.Empty(t, page.Events)

	// Administrative events are audited too.
	for _, kind := range []string{"agent.created", "policy.updated", "token.issued", "auth.login", "user.created"} {
		page, err := auditor.Audit(ctx, url.Values{"kind": {kind}})
		require.NoError(t, err)
		assert.NotEmpty(t, page.Events, kind)
	}
}

func TestAuditRowsAreAppendOnly(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, env.DBURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, stmt := range []string{
		`UPDATE audit_events SET actor = 'mallory'`,
		`DELETE FROM audit_events`,
		`TRUNCATE audit_events`,
	} {
		_, err := conn.Exec(ctx, stmt)
		assert.ErrorContains(t, err, "append-only", stmt)
	}
}

func TestListActionsForReviewers(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("lister", designPolicy)
	rev := env.Reviewer("rita")
	var ids []string
	for i := range 5 {
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"n": i}})
		require.NoError(t, err)
		ids = append(ids, a.ID)
	}
	_, err := agent.Submit(ctx, client.SubmitRequest{Tool: "fs.read", Args: map[string]any{}})
	require.NoError(t, err)

	var got []string
	cursor := ""
	for {
		q := url.Values{"status": {"pending"}, "agent": {"lister"}, "limit": {"2"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		page, err := rev.ListActions(ctx, q)
		require.NoError(t, err)
		for _, a := range page.Actions {
			assert.NotEmpty(t, a.ConfirmationPhrase, "reviewers see the phrase of pending actions")
			got = append(got, a.ID)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	want := []string{ids[4], ids[3], ids[2], ids[1], ids[0]}
	assert.Equal(t, want, got, "newest first, each once")

	page, err := rev.ListActions(ctx, url.Values{"risk": {"low"}, "agent": {"lister"}})
	require.NoError(t, err)
	for _, a := range page.Actions {
		assert.Equal(t, "low", a.Risk.Level)
	}

	page, err = rev.ListActions(ctx, url.Values{"tool": {"FS.Read"}, "agent": {"lister"}})
	require.NoError(t, err)
	require.Len(t, page.Actions, 1, "tool= filters, in any spelling of the name")
	assert.Equal(t, "fs.read", page.Actions[0].Tool)
	_, err = rev.ListActions(ctx, url.Values{"tool": {"fs/read"}})
	assert.Equal(t, http.StatusBadRequest, client.StatusOf(err), "a name no tool can have is refused")

	// Several statuses, who decided, and a time range.
	first, err := rev.Get(ctx, ids[0])
	require.NoError(t, err)
	_, err = rev.Approve(ctx, ids[0], first.ConfirmationPhrase, "")
	require.NoError(t, err)
	_, err = rev.Deny(ctx, ids[1], "no")
	require.NoError(t, err)
	page, err = rev.ListActions(ctx, url.Values{"status": {"approved,denied"}, "agent": {"lister"}, "tool": {"email.send"}})
	require.NoError(t, err)
	assert.Len(t, page.Actions, 2)
	page, err = rev.ListActions(ctx, url.Values{"decided_by": {"rita"}, "status": {"approved"}})
	require.NoError(t, err)
	require.Len(t, page.Actions, 1)
	assert.Equal(t, ids[0], page.Actions[0].ID)
	created := page.Actions[0].CreatedAt
	page, err = rev.ListActions(ctx, url.Values{"agent": {"lister"}, "until": {created.Add(time.Microsecond).Format(time.RFC3339Nano)}})
	require.NoError(t, err)
	require.Len(t, page.Actions, 1, "until is exclusive, since inclusive")
	page, err = rev.ListActions(ctx, url.Values{"agent": {"lister"}, "since": {created.Format(time.RFC3339Nano)}})
	require.NoError(t, err)
	assert.Len(t, page.Actions, 6)
	for q, want := range map[string]int{"status=pending,bogus": 400, "since=yesterday": 400,
		"since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z": 400} {
		v, _ := url.ParseQuery(q)
		_, err = rev.ListActions(ctx, v)
		assert.Equal(t, want, client.StatusOf(err), q)
	}
}

func TestOperationalEndpoints(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("m", designPolicy)
	submit(t, agent, "email.send", map[string]any{"to": "x@example.com"})
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := env.HTTP.Get(env.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
	resp, err := env.HTTP.Get(env.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	text := string(body)
	assert.Contains(t, text, `airlock_actions_submitted_total{effect="approve",risk=`)
	assert.Contains(t, text, "airlock_actions_pending 1")
	assert.Contains(t, text, "airlock_http_request_duration_seconds_bucket")
	assert.Contains(t, text, "airlock_submit_writes_total 1")
	assert.Contains(t, text, "airlock_submit_commits_total 1")
}
