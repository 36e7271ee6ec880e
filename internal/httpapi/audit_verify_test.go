package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/testdb"
)

// sealed waits until the server has sealed every event in the database and
// returns the verification report.
func sealed(t *testing.T, env *apptest.Env, auditor *client.Client) *client.VerifyReport {
	t.Helper()
	ctx := env.Ctx()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var total int64
		require.NoError(t, env.App.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_events`).Scan(&total))
		r, err := auditor.VerifyAudit(ctx)
		require.NoError(t, err)
		require.True(t, r.OK, "%+v", r)
		if r.Checked >= total {
			return r
		}
		require.True(t, time.Now().Before(deadline), "sealing did not catch up: %d of %d", r.Checked, total)
		time.Sleep(100 * time.Millisecond)
	}
}

func ndjsonLines(t *testing.T, b []byte) []string {
	t.Helper()
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	require.NoError(t, sc.Err())
	return lines
}

func TestAuditVerifyExportAndCheckpoints(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("mailer", designPolicy)
	alice := env.Reviewer("alice")
	auditor := env.Auditor("audrey")

	var var1 string
	require.NoError(t, env.App.Pool().QueryRow(ctx, `SELECT current_user`).Scan(&var1))
	assert.Equal(t, "airlock_app", var1, "the server runs as the role that owns nothing")

	for i := range 3 {
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", CorrelationID: "corr-x",
			Args: map[string]any{"to": "x@example.com", "n": i, "amount": 12.50, "note": "token=abcdef0123456789"}})
		require.NoError(t, err)
		full, err := alice.Get(ctx, a.ID)
		require.NoError(t, err)
		_, err = alice.Approve(ctx, a.ID, full.ConfirmationPhrase, "")
		require.NoError(t, err)
	}
	r := sealed(t, env, auditor)
	assert.Greater(t, r.Head.Seq, int64(6))
	assert.Len(t, r.Head.Hash, 64)

	// Checkpoints: signed, the newest one at most the head.
	var cpBuf bytes.Buffer
	require.NoError(t, auditor.AuditCheckpoints(ctx, 0, &cpBuf))
	cpLines := ndjsonLines(t, cpBuf.Bytes())
	require.NotEmpty(t, cpLines)
	kept, err := audit.ParseCheckpoint(cpLines[len(cpLines)-1])
	require.NoError(t, err)
	assert.LessOrEqual(t, kept.Seq, r.Head.Seq)
	withKept, err := auditor.VerifyAudit(ctx, cpLines[len(cpLines)-1])
	require.NoError(t, err)
	assert.True(t, withKept.OK, withKept.Reason)

	// From a stored checkpoint (the events up to it archived, say): only
	// the events after it are walked.
	fromKept, err := auditor.VerifyAuditFrom(ctx, kept.Seq, cpLines[len(cpLines)-1])
	require.NoError(t, err)
	assert.True(t, fromKept.OK, fromKept.Reason)
	assert.Equal(t, kept.Seq, fromKept.From)
	assert.Equal(t, fromKept.Head.Seq-kept.Seq, fromKept.Checked)
	for _, from := range []string{"0", "-1", "x", "", "1e3", fmt.Sprint(r.Head.Seq + 1000)} {
		status, body := rawBody(t, "GET", env.URL+"/api/v1/audit/verify?from="+from, auditor.Token(), nil)
		assert.Equal(t, 400, status, "from=%q: %s", from, body)
		assert.Contains(t, string(body), `"code":"invalid"`, "from=%q", from)
	}

	// Export by correlation ID: the six action events, in id order, redacted.
	var exp bytes.Buffer
	require.NoError(t, auditor.ExportAudit(ctx, url.Values{"correlation_id": {"corr-x"}}, &exp))
	lines := ndjsonLines(t, exp.Bytes())
	require.Len(t, lines, 6)
	var prevID int64
	for _, l := range lines {
		var rec audit.Record
		require.NoError(t, json.Unmarshal([]byte(l), &rec))
		assert.Greater(t, rec.ID, prevID)
		prevID = rec.ID
		assert.Equal(t, "corr-x", rec.CorrelationID)
		assert.NotContains(t, l, "abcdef0123456789")
	}
	exp.Reset()
	require.NoError(t, auditor.ExportAudit(ctx, url.Values{"correlation_id": {"corr-x"}, "limit": {"2"}}, &exp))
	assert.Len(t, ndjsonLines(t, exp.Bytes()), 2)

	// Export in chain order: every sealed event, each hash recomputable.
	exp.Reset()
	require.NoError(t, auditor.ExportAudit(ctx, url.Values{"order": {"seq"}}, &exp))
	lines = ndjsonLines(t, exp.Bytes())
	require.GreaterOrEqual(t, int64(len(lines)), r.Head.Seq)
	var h audit.Hasher
	for i, l := range lines {
		var rec audit.Record
		require.NoError(t, json.Unmarshal([]byte(l), &rec))
		assert.EqualValues(t, i+1, rec.Seq)
		sum, err := h.Hash(rec.PrevHash, &rec)
		require.NoError(t, err)
		assert.Equal(t, []byte(rec.Hash), sum, "seq %d", rec.Seq)
	}

	// Bad parameters, and the auditor role only.
	for _, q := range []url.Values{{"order": {"time"}}, {"limit": {"0"}}, {"since": {"yesterday"}}} {
		err := auditor.ExportAudit(ctx, q, &bytes.Buffer{})
		assert.Equal(t, 400, client.StatusOf(err), q)
	}
	_, err = auditor.VerifyAudit(ctx, "not a checkpoint")
	assert.Equal(t, 400, client.StatusOf(err))
	_, err = alice.VerifyAudit(ctx)
	assert.Equal(t, 403, client.StatusOf(err))
	assert.Equal(t, 403, client.StatusOf(alice.ExportAudit(ctx, nil, &bytes.Buffer{})))
	assert.Equal(t, 403, client.StatusOf(agent.AuditCheckpoints(ctx, 0, &bytes.Buffer{})))
}

// TestAuditChainUnderConcurrentSubmitters: 32 agents submit at once through
// the API; after sealing the chain holds every event once, seq 1..n.
func TestAuditChainUnderConcurrentSubmitters(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	auditor := env.Auditor("audrey")
	const agents, each = 32, 8
	clients := make([]*client.Client, agents)
	for i := range agents {
		clients[i] = env.Agent(fmt.Sprintf("agent-%02d", i), designPolicy)
	}
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				tool := "fs.read"
				if j%2 == 1 {
					tool = "email.send" // pending: an action row and an event, like the allow path
				}
				_, err := c.Submit(ctx, client.SubmitRequest{Tool: tool, Args: map[string]any{"agent": i, "n": j}})
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	r := sealed(t, env, auditor)

	var total, sealedN, distinct, maxSeq, submitted int64
	require.NoError(t, env.App.Pool().QueryRow(ctx, `SELECT count(*), count(s.seq), count(DISTINCT s.seq), max(s.seq),
		count(*) FILTER (WHERE kind = 'action.submitted') FROM audit_events e LEFT JOIN audit_seals s ON s.id = e.id AND s.at = e.at`).Scan(&total, &sealedN, &distinct, &maxSeq, &submitted))
	assert.EqualValues(t, agents*each, submitted)
	assert.Equal(t, total, sealedN, "every event sealed")
	assert.Equal(t, total, distinct, "no seq twice")
	assert.Equal(t, total, maxSeq, "no gap")
	assert.Equal(t, total, r.Checked)
}

// TestAuditVerifySeesTampering: a superuser edits a sealed event behind the
// server's back; the verify endpoint names its seq.
func TestAuditVerifySeesTampering(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	auditor := env.Auditor("audrey")
	agent := env.Agent("mailer", designPolicy)
	submit(t, agent, "fs.read", map[string]any{"path": "/etc/motd"})
	before := sealed(t, env, auditor)

	dbName := env.App.Pool().Config().ConnConfig.Database
	su, err := pgx.Connect(ctx, testdb.Cluster(t).URL(dbName))
	require.NoError(t, err)
	defer su.Close(context.Background())
	_, err = su.Exec(ctx, `SET session_replication_role = replica`)
	require.NoError(t, err)
	_, err = su.Exec(ctx, `UPDATE audit_events SET args = '{"path": "/etc/shadow"}' WHERE kind = 'action.submitted'`)
	require.NoError(t, err)
	var seq int64
	require.NoError(t, su.QueryRow(ctx, `SELECT s.seq FROM audit_events e JOIN audit_seals s ON s.id = e.id WHERE kind = 'action.submitted'`).Scan(&seq))

	r, err := auditor.VerifyAudit(ctx)
	require.NoError(t, err)
	assert.False(t, r.OK)
	assert.Equal(t, seq, r.FirstBadSeq)
	assert.True(t, strings.HasPrefix(r.Reason, "hash mismatch"), r.Reason)
	assert.Equal(t, seq-1, r.Checked)
	assert.GreaterOrEqual(t, r.Head.Seq, before.Head.Seq)
}
