package web_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/testdb"
)

const invalidPolicy = `default: deny
rules:
  - id: reads
    tool: fs.read
    effect: allow
  - id: big-spend
    tool: payments.send
    effect: approve
    when: "args.amount >"
`

const policyV1 = `default: deny
rules:
  - id: reads
    tool: fs.read
    effect: allow
  - id: big-spend
    tool: payments.send
    effect: approve
    when: "args.amount > 100"
    approvals: 2
    timeout: 15m
  - id: spend
    tool: payments.send
    effect: allow
settings:
  amount_cap: 500
`

const policyV2 = `default: deny
rules:
  - id: reads
    tool: fs.read
    effect: allow
  - id: big-spend
    tool: payments.send
    effect: approve
    when: "args.amount > 250"
    approvals: 2
    timeout: 30m
  - id: spend
    tool: payments.send
    effect: allow
  - id: no-shell
    tool: "shell.*"
    effect: deny
settings:
  amount_cap: 500
`

// TestBrowserAdminConsole walks an admin through the console: register an
// agent, write its policy (a refused one first), compare two versions,
// issue and revoke a token, the fleet page with the agent's override,
// users, and the audit trail of what the agent then did.
func TestBrowserAdminConsole(t *testing.T) {
	env := apptest.Start(t)
	ctx := env.Ctx()
	c := startChrome(t)
	c.do(t, chromedp.Navigate(env.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#username")))
	c.screenshot(t, "login.png")
	c.signIn(t, env, "/ui/agents", "admin", apptest.AdminPassword, "#agent-form")

	c.do(t,
		chromedp.SendKeys(chromedp.CSS(`#agent-form input[name="id"]`), "treasury-bot"),
		chromedp.SendKeys(chromedp.CSS(`#agent-form input[name="name"]`), "Treasury bot"),
		chromedp.SendKeys(chromedp.CSS(`#agent-form input[name="description"]`), "Pays approved supplier invoices."),
		chromedp.Click(chromedp.CSS(`#agent-form button`)),
		chromedp.WaitVisible(chromedp.CSS("#issue-form")),
	)

	t.Run("a refused policy comes back with the error inline", func(t *testing.T) {
		c.do(t,
			chromedp.Navigate(env.URL+"/ui/agents/treasury-bot/policy/edit"),
			chromedp.WaitVisible(chromedp.CSS("#policy-document")),
			chromedp.SetValue(chromedp.CSS("#policy-document"), invalidPolicy),
			chromedp.Click(chromedp.CSS("#save-policy")),
			chromedp.WaitVisible(chromedp.CSS("#policy-error")),
		)
		msg := c.text(t, "#policy-error")
		assert.Contains(t, msg, "big-spend")
		assert.Contains(t, msg, "when")
		assert.Equal(t, invalidPolicy, run(t, c, chromedp.Value(chromedp.CSS("#policy-document"))), "the text is kept")
		c.screenshot(t, "policy-error.png")
	})

	t.Run("two versions and their diff", func(t *testing.T) {
		for _, doc := range []string{policyV1, policyV2} {
			c.do(t,
				chromedp.Navigate(env.URL+"/ui/agents/treasury-bot/policy/edit"),
				chromedp.WaitVisible(chromedp.CSS("#policy-document")),
				chromedp.SetValue(chromedp.CSS("#policy-document"), doc),
				chromedp.Click(chromedp.CSS("#save-policy")),
				chromedp.WaitVisible(chromedp.CSS("#policy-yaml")),
			)
		}
		c.do(t,
			chromedp.Click(chromedp.CSS("#versions .diff-link")),
			chromedp.WaitVisible(chromedp.CSS("#policy-diff")),
		)
		diff := c.text(t, "#policy-diff")
		assert.Contains(t, diff, "Changes from v1 to v2")
		assert.Contains(t, diff, "-     when: args.amount > 100")
		assert.Contains(t, diff, "+     when: args.amount > 250")
		assert.Contains(t, diff, "+   - id: no-shell")
		c.screenshot(t, "policy-diff.png")
	})

	var token string
	t.Run("a token is shown once and can be revoked", func(t *testing.T) {
		c.do(t,
			chromedp.Navigate(env.URL+"/ui/agents/treasury-bot"),
			chromedp.WaitVisible(chromedp.CSS("#issue-token")),
			chromedp.Click(chromedp.CSS("#issue-token")),
			chromedp.WaitVisible(chromedp.CSS("#token-value")),
		)
		token = c.text(t, "#token-value")
		c.screenshot(t, "agent-token.png")
		agent := env.Client(token)
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "fs.read", Args: map[string]any{"path": "ledger.csv"}})
		require.NoError(t, err)
		assert.Equal(t, "approved", a.Status)

		c.do(t,
			chromedp.Navigate(env.URL+"/ui/agents/treasury-bot"),
			chromedp.WaitVisible(chromedp.CSS("#tokens")),
		)
		assert.NotContains(t, c.text(t, "main"), token, "the token is never shown again")
		c.do(t,
			chromedp.Click(chromedp.CSS("#tokens button")),
			chromedp.WaitVisible(chromedp.CSS(".flash.notice")),
		)
		_, err = agent.Submit(ctx, client.SubmitRequest{Tool: "fs.read", Args: map[string]any{"path": "ledger.csv"}})
		assert.Equal(t, http.StatusUnauthorized, client.StatusOf(err), "revoked at once")
	})

	t.Run("the fleet page lists the agent's override", func(t *testing.T) {
		c.do(t,
			chromedp.Navigate(env.URL+"/ui/fleet/edit"),
			chromedp.WaitVisible(chromedp.CSS("#policy-document")),
			chromedp.SetValue(chromedp.CSS("#policy-document"), "default: deny\nrules:\n  - id: no-deletes\n    tool: \"*.delete\"\n    effect: deny\nsettings:\n  amount_cap: 1000\n  escalate_at: high\n"),
			chromedp.Click(chromedp.CSS("#save-policy")),
			chromedp.WaitVisible(chromedp.CSS("#overrides")),
		)
		overrides := c.text(t, "#overrides")
		assert.Contains(t, overrides, "treasury-bot")
		assert.Contains(t, overrides, "amount_cap")
		c.screenshot(t, "fleet.png")
	})

	t.Run("users", func(t *testing.T) {
		c.do(t,
			chromedp.Navigate(env.URL+"/ui/users"),
			chromedp.WaitVisible(chromedp.CSS("#user-form")),
			chromedp.SendKeys(chromedp.CSS(`#user-form input[name="username"]`), "rita"),
			chromedp.SendKeys(chromedp.CSS(`#user-form input[name="password"]`), "rita-password-123"),
			chromedp.Click(chromedp.CSS(`#user-form button`)),
			chromedp.WaitVisible(chromedp.CSS(".flash.notice")),
		)
		assert.Contains(t, c.text(t, "#users"), "rita")
		c.screenshot(t, "users.png")
		_, _, err := env.Anon.Login(ctx, "rita", "rita-password-123")
		assert.NoError(t, err, "the new reviewer can sign in")
	})

	t.Run("the audit trail and the timeline of one correlation", func(t *testing.T) {
		tok, err := env.Admin.IssueAgentToken(ctx, "treasury-bot", 0)
		require.NoError(t, err)
		agent := env.Client(tok.Token)
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "payments.send", CorrelationID: "invoice-2026-0042",
			ConversationID: "conv-ap-17", StepID: "pay", Args: map[string]any{"amount": 300, "to": "Northwind", "currency": "EUR"}})
		require.NoError(t, err)
		require.Equal(t, "pending", a.Status)
		full, err := env.Admin.Get(ctx, a.ID)
		require.NoError(t, err)
		_, err = env.Admin.Approve(ctx, a.ID, full.ConfirmationPhrase, "once")
		require.NoError(t, err)
		rita, _, err := env.Anon.Login(ctx, "rita", "rita-password-123")
		require.NoError(t, err)
		_, err = rita.Approve(ctx, a.ID, full.ConfirmationPhrase, "once")
		require.NoError(t, err, "the second of two approvals")

		c.do(t,
			chromedp.Navigate(env.URL+"/ui/audit?agent=treasury-bot"),
			chromedp.WaitVisible(chromedp.CSS("#audit-events")),
		)
		assert.Contains(t, c.text(t, "#audit-events"), "policy.updated")
		c.do(t,
			chromedp.Navigate(env.URL+"/ui/actions/"+a.ID),
			chromedp.WaitVisible(chromedp.CSS("#approvals")),
		)
		assert.Contains(t, c.text(t, "#approvals"), "2 of 2")
		c.do(t,
			chromedp.Click(chromedp.CSS(`a.id-link[href^="/ui/audit/correlation/"]`)),
			chromedp.WaitVisible(chromedp.CSS("#timeline")),
		)
		timeline := c.text(t, "#timeline")
		for _, kind := range []string{"action.submitted", "action.approval", "action.approved"} {
			assert.Contains(t, timeline, kind)
		}
		assert.Less(t, strings.Index(timeline, "action.submitted"), strings.Index(timeline, "action.approved"), "in order")

		// Once sealed (within a second), the badge vouches for these events.
		timelineURL := env.URL + "/ui/audit/correlation/invoice-2026-0042"
		deadline := time.Now().Add(15 * time.Second)
		for {
			c.do(t, chromedp.Navigate(timelineURL), chromedp.WaitVisible(chromedp.CSS("#chain-badge")))
			if badge := c.text(t, "#chain-badge"); strings.Contains(badge, "chain intact") && !strings.Contains(badge, "not sealed") {
				break
			}
			require.True(t, time.Now().Before(deadline), "the timeline's events were not sealed")
			time.Sleep(200 * time.Millisecond)
		}
		c.screenshot(t, "audit-timeline.png")
		c.do(t, chromedp.Click(chromedp.CSS("#verify-link")), chromedp.WaitVisible(chromedp.CSS("#verify-report")))
		assert.Contains(t, c.text(t, "#verify-report"), "verified")

		// A stored checkpoint covering the request's events, signed before
		// the edit below (the sealer makes one within a second of growth).
		var submittedSeq, cpSeq int64
		require.NoError(t, env.App.Pool().QueryRow(ctx, `SELECT s.seq FROM audit_seals s JOIN audit_events e ON e.id = s.id
			WHERE e.correlation_id = 'invoice-2026-0042' AND e.kind = 'action.submitted'`).Scan(&submittedSeq))
		require.Eventually(t, func() bool {
			require.NoError(t, env.App.Pool().QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM audit_checkpoints`).Scan(&cpSeq))
			return cpSeq >= submittedSeq
		}, 15*time.Second, 50*time.Millisecond)

		// Someone with the database's superuser rights edits the request.
		su, err := pgx.Connect(ctx, testdb.Cluster(t).URL(env.App.Pool().Config().ConnConfig.Database))
		require.NoError(t, err)
		defer su.Close(context.Background())
		_, err = su.Exec(ctx, `SET session_replication_role = replica`)
		require.NoError(t, err)
		_, err = su.Exec(ctx, `UPDATE audit_events SET args = '{"amount": 3, "to": "Northwind"}' WHERE correlation_id = 'invoice-2026-0042' AND kind = 'action.submitted'`)
		require.NoError(t, err)
		c.do(t, chromedp.Navigate(timelineURL), chromedp.WaitVisible(chromedp.CSS("#chain-badge")))
		assert.Contains(t, c.text(t, "#chain-badge"), "tampered")
		c.do(t, chromedp.Click(chromedp.CSS("#verify-link")), chromedp.WaitVisible(chromedp.CSS("#verify-report")))
		assert.Contains(t, c.text(t, "#verify-report"), "hash mismatch")

		// From that checkpoint (as if the events up to it had been
		// archived), what follows it is intact.
		c.do(t,
			chromedp.SetValue(chromedp.CSS(`#verify-from input[name="from"]`), strconv.FormatInt(cpSeq, 10)),
			chromedp.Click(chromedp.CSS(`#verify-from button[type="submit"]`)),
			chromedp.WaitVisible(chromedp.CSS("#verify-from-seq")),
		)
		report := c.text(t, "#verify-report")
		assert.Contains(t, report, "verified")
		assert.Contains(t, report, fmt.Sprintf("after the checkpoint at seq %d", cpSeq))
		// The key the checkpoints are signed with, to pin offline; no
		// previous keys on this server.
		var signer []byte
		require.NoError(t, env.App.Pool().QueryRow(ctx, `SELECT public_key FROM audit_checkpoints WHERE seq = $1`, cpSeq).Scan(&signer))
		assert.Equal(t, base64.StdEncoding.EncodeToString(signer), c.text(t, "#verify-key"))
		assert.Zero(t, run(t, c, chromedp.Evaluate[int](`document.querySelectorAll("#verify-previous-keys").length`)))
	})
}
