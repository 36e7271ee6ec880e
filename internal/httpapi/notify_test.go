package httpapi_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// received is one request a test receiver got.
type received struct {
	header http.Header
	body   []byte
	at     time.Time
}

// receiver is an HTTP receiver on 127.0.0.1 for webhook and Slack
// deliveries. answer, when set, picks the status of the nth request
// (1-based) and may hold it (return after the request's context ends).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(n int, r *http.Request) int
}

func newReceiver(t *testing.T, answer func(n int, r *http.Request) int) *receiver {
	t.Helper()
	rc := &receiver{answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		n := len(rc.got) + 1
		rc.got = append(rc.got, received{header: r.Header.Clone(), body: body, at: time.Now()})
		rc.mu.Unlock()
		status := http.StatusOK
		if rc.answer != nil {
			status = rc.answer(n, r)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// eventually polls cond until it holds, failing after a generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// webhookEvent is a webhook delivery's body.
type webhookEvent struct {
	Type   string         `json:"type"`
	Action client.Action  `json:"action"`
	URL    string         `json:"url"`
	Raw    map[string]any `json:"-"`
}

// bodiesOf returns the deliveries of type typ (any when empty) rc got
// for action id.
func (rc *receiver) eventsFor(t *testing.T, id, typ string) []webhookEvent {
	t.Helper()
	var out []webhookEvent
	for _, r := range rc.requests() {
		var ev webhookEvent
		require.NoError(t, json.Unmarshal(r.body, &ev))
		if ev.Action.ID == id && (typ == "" || ev.Type == typ) {
			out = append(out, ev)
		}
	}
	return out
}

func createTarget(t *testing.T, env *apptest.Env, target map[string]any) map[string]any {
	t.Helper()
	var out map[string]any
	status, err := env.Admin.Do(env.Ctx(), http.MethodPost, "/api/v1/notify/targets", target, &out)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, status)
	return out
}

func createGroup(t *testing.T, env *apptest.Env, name string, members ...string) {
	t.Helper()
	status, err := env.Admin.Do(env.Ctx(), http.MethodPost, "/api/v1/groups", map[string]any{"name": name, "members": members}, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, status)
}

var loopbackOnly = []string{"127.0.0.0/8"}

func webhookTarget(name, url, secret string) map[string]any {
	return map[string]any{"name": name, "kind": "webhook", "url": url, "secret": secret, "allow_private": loopbackOnly}
}

func verifySignature(t *testing.T, r received, secret string) {
	t.Helper()
	ts := r.header.Get("Airlock-Timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	require.NoError(t, err, "Airlock-Timestamp is unix seconds")
	assert.InDelta(t, time.Now().Unix(), sec, 300, "inside the replay window")
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + string(r.body)))
	assert.Equal(t, "v1="+hex.EncodeToString(mac.Sum(nil)), r.header.Get("Airlock-Signature"))
}

type notifications struct {
	Escalations []struct {
		RuleID    string     `json:"rule_id"`
		Step      int        `json:"step"`
		Reviewers []string   `json:"reviewers"`
		Notify    []string   `json:"notify"`
		Reminder  bool       `json:"reminder"`
		FiredAt   *time.Time `json:"fired_at"`
	} `json:"escalations"`
	Deliveries []struct {
		Target   string `json:"target"`
		Event    string `json:"event"`
		Status   string `json:"status"`
		Attempts []struct {
			N          int    `json:"n"`
			OK         bool   `json:"ok"`
			StatusCode int    `json:"status_code"`
			Error      string `json:"error"`
		} `json:"attempts"`
	} `json:"deliveries"`
}

func notificationsOf(t *testing.T, c *client.Client, id string) notifications {
	t.Helper()
	var out notifications
	_, err := c.Do(context.Background(), http.MethodGet, "/api/v1/actions/"+id+"/notifications", nil, &out)
	require.NoError(t, err)
	return out
}

func TestWebhookAndSlackNotifiedOfPendingAndDecided(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	hook := newReceiver(t, nil)
	slack := newReceiver(t, nil)
	view := createTarget(t, env, webhookTarget("hook", hook.srv.URL+"/airlock", "s3cret-signing-key"))
	assert.Equal(t, "[redacted]", view["secret"], "the secret never comes back")
	createTarget(t, env, map[string]any{"name": "chat", "kind": "slack", "url": slack.srv.URL + "/services/T000/B000/XXXX", "allow_private": loopbackOnly})

	var list struct {
		Targets []map[string]any `json:"targets"`
	}
	_, err := env.Admin.Do(env.Ctx(), http.MethodGet, "/api/v1/notify/targets", nil, &list)
	require.NoError(t, err)
	require.Len(t, list.Targets, 2)
	for _, tg := range list.Targets {
		raw, _ := json.Marshal(tg)
		assert.NotContains(t, string(raw), "s3cret-signing-key")
		assert.NotContains(t, string(raw), "XXXX", "a slack URL's path is its credential")
	}

	agent := env.Agent("payer", map[string]any{"rules": []map[string]any{
		{"id": "pay", "tool": "payments.send", "effect": "approve", "timeout": "30m", "notify": []string{"hook", "chat"}},
	}})
	alice := env.Reviewer("alice")
	submitted := time.Now()
	a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "payments.send", Args: map[string]any{"amount": 250, "to": "acme"},
		Reason: "pay the invoice"})
	require.NoError(t, err)
	require.Equal(t, "pending", a.Status)

	eventually(t, "the webhook and the slack message", func() bool {
		return len(hook.eventsFor(t, a.ID, "action.pending")) == 1 && len(slack.requests()) == 1
	})
	t.Logf("webhook %v, slack %v after the submit", hook.requests()[0].at.Sub(submitted), slack.requests()[0].at.Sub(submitted))
	verifySignature(t, hook.requests()[0], "s3cret-signing-key")
	ev := hook.eventsFor(t, a.ID, "action.pending")[0]
	assert.Equal(t, "payments.send", ev.Action.Tool)
	assert.Equal(t, "pending", ev.Action.Status)
	assert.Empty(t, ev.Action.ConfirmationPhrase, "the action as an auditor sees it")
	assert.Equal(t, env.URL+"/ui/actions/"+a.ID, ev.URL)

	var msg struct {
		Text   string           `json:"text"`
		Blocks []map[string]any `json:"blocks"`
	}
	require.NoError(t, json.Unmarshal(slack.requests()[0].body, &msg))
	require.NotEmpty(t, msg.Blocks, "a Block Kit message")
	whole := string(slack.requests()[0].body)
	for _, want := range []string{"payments.send", "payer", "pay the invoice", `amount=250`, "left", "/ui/actions/" + a.ID} {
		assert.Contains(t, whole, want)
	}

	full, err := alice.Get(env.Ctx(), a.ID)
	require.NoError(t, err)
	_, err = alice.Approve(env.Ctx(), a.ID, full.ConfirmationPhrase, "")
	require.NoError(t, err)
	eventually(t, "the decision's webhook", func() bool { return len(hook.eventsFor(t, a.ID, "action.decided")) == 1 })
	assert.Equal(t, "approved", hook.eventsFor(t, a.ID, "action.decided")[0].Action.Status)

	n := notificationsOf(t, alice, a.ID)
	eventually(t, "every delivery recorded", func() bool {
		n = notificationsOf(t, alice, a.ID)
		done := 0
		for _, d := range n.Deliveries {
			if d.Status == "delivered" {
				done++
			}
		}
		return done == 4
	})
	require.Len(t, n.Deliveries, 4, "pending and decided, to each target")
}

func TestWebhookRetriedAfterServerError(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	hook := newReceiver(t, func(n int, _ *http.Request) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	createTarget(t, env, webhookTarget("hook", hook.srv.URL, "k"))
	agent := env.Agent("retry", map[string]any{"rules": []map[string]any{
		{"id": "r", "tool": "email.send", "effect": "approve", "notify": []string{"hook"}},
	}})
	a, err := agent.Submit(env.Ctx(), clientReq("email.send"))
	require.NoError(t, err)
	eventually(t, "the retry", func() bool { return len(hook.eventsFor(t, a.ID, "action.pending")) == 2 })
	eventually(t, "the delivery recorded", func() bool {
		n := notificationsOf(t, env.Admin, a.ID)
		return len(n.Deliveries) == 1 && n.Deliveries[0].Status == "delivered"
	})
	d := notificationsOf(t, env.Admin, a.ID).Deliveries[0]
	require.Len(t, d.Attempts, 2)
	assert.False(t, d.Attempts[0].OK)
	assert.Equal(t, 500, d.Attempts[0].StatusCode)
	assert.Contains(t, d.Attempts[0].Error, "500")
	assert.True(t, d.Attempts[1].OK)
	assert.Equal(t, 204, d.Attempts[1].StatusCode)
	for _, r := range hook.requests() {
		verifySignature(t, r, "k")
	}

	resp, err := env.HTTP.Get(env.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	assert.Contains(t, string(body), `airlock_notifications_total{kind="webhook",outcome="failed"} 1`)
	assert.Contains(t, string(body), `airlock_notifications_total{kind="webhook",outcome="delivered"} 1`)
}

func TestDeliverySurvivesRestartInTheMiddle(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	inFlight := make(chan struct{}, 1)
	hook := newReceiver(t, func(n int, r *http.Request) int {
		if n == 1 {
			inFlight <- struct{}{}
			<-r.Context().Done() // the server goes away in the middle of the delivery
			return http.StatusOK
		}
		return http.StatusOK
	})
	createTarget(t, env, webhookTarget("hook", hook.srv.URL, "k"))
	agent := env.Agent("durable", map[string]any{"rules": []map[string]any{
		{"id": "r", "tool": "email.send", "effect": "approve", "timeout": "1h", "notify": []string{"hook"}},
	}})
	a, err := agent.Submit(env.Ctx(), clientReq("email.send"))
	require.NoError(t, err)
	select {
	case <-inFlight:
	case <-time.After(60 * time.Second):
		t.Fatal("no delivery started")
	}
	env.Restart()
	eventually(t, "the delivery after the restart", func() bool { return len(hook.eventsFor(t, a.ID, "action.pending")) == 2 })
	reviewer := env.Reviewer("rita")
	eventually(t, "the delivery recorded", func() bool {
		n := notificationsOf(t, reviewer, a.ID)
		return len(n.Deliveries) == 1 && n.Deliveries[0].Status == "delivered"
	})
	d := notificationsOf(t, reviewer, a.ID).Deliveries[0]
	require.Len(t, d.Attempts, 1, "the attempt the restart cut is released, not counted")
	verifySignature(t, hook.requests()[1], "k")
}

// smtpBackend is an SMTP receiver for the test.
type smtpBackend struct {
	mu   sync.Mutex
	msgs []smtpMessage
}

type smtpMessage struct {
	from string
	to   []string
	data string
}

type smtpSession struct {
	be  *smtpBackend
	msg smtpMessage
}

func (b *smtpBackend) NewSession(*smtp.Conn) (smtp.Session, error) { return &smtpSession{be: b}, nil }

func (s *smtpSession) Reset()        { s.msg = smtpMessage{} }
func (s *smtpSession) Logout() error { return nil }
func (s *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	s.msg.from = from
	return nil
}
func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.msg.to = append(s.msg.to, to)
	return nil
}
func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.msg.data = string(b)
	s.be.mu.Lock()
	s.be.msgs = append(s.be.msgs, s.msg)
	s.be.mu.Unlock()
	return nil
}

func (b *smtpBackend) messages() []smtpMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]smtpMessage(nil), b.msgs...)
}

func TestEmailSentThroughSMTP(t *testing.T) {
	t.Parallel()
	be := &smtpBackend{}
	srv := smtp.NewServer(be)
	srv.Domain = "localhost"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	env := apptest.Start(t, apptest.Options{SMTPAddr: ln.Addr().String(), PublicURL: "https://airlock.example.test"})
	createTarget(t, env, map[string]any{"name": "oncall-mail", "kind": "email", "to": []string{"oncall@example.test", "lead@example.test"}})
	agent := env.Agent("mailer", map[string]any{"rules": []map[string]any{
		{"id": "r", "tool": "db.drop", "effect": "approve", "notify": []string{"oncall-mail"}},
	}})
	a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "db.drop", Args: map[string]any{"table": "users"}, Reason: "cleanup"})
	require.NoError(t, err)
	eventually(t, "the email", func() bool { return len(be.messages()) == 1 })
	m := be.messages()[0]
	assert.Equal(t, "airlock@test.invalid", m.from)
	assert.ElementsMatch(t, []string{"oncall@example.test", "lead@example.test"}, m.to)
	for _, want := range []string{"Subject: Waiting for approval: db.drop by mailer", `table="users"`, "cleanup",
		"https://airlock.example.test/ui/actions/" + a.ID} {
		assert.Contains(t, m.data, want)
	}
}

func TestEscalationNotifiesTheSecondGroupWhichCanApprove(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	hook := newReceiver(t, nil)
	createTarget(t, env, webhookTarget("oncall-hook", hook.srv.URL, "k"))
	alice := env.Reviewer("alice")
	bob := env.Reviewer("bob")
	createGroup(t, env, "leads", "alice")
	createGroup(t, env, "oncall", "bob")
	agent := env.Agent("esc", map[string]any{"rules": []map[string]any{
		{"id": "r", "tool": "deploy.prod", "effect": "approve", "timeout": "1h", "reviewers": []string{"leads"},
			"escalate": []map[string]any{{"after": "1s", "notify": []string{"oncall-hook"}, "reviewers": []string{"oncall"}}}},
	}})
	a, err := agent.Submit(env.Ctx(), clientReq("deploy.prod"))
	require.NoError(t, err)
	_ = alice

	eventually(t, "the escalation's notification", func() bool { return len(hook.eventsFor(t, a.ID, "action.escalated")) == 1 })
	assert.Empty(t, hook.eventsFor(t, a.ID, "action.pending"), "the hook is only the escalation step's")
	full, err := bob.Get(env.Ctx(), a.ID)
	require.NoError(t, err)
	approved, err := bob.Approve(env.Ctx(), a.ID, full.ConfirmationPhrase, "")
	require.NoError(t, err, "oncall may approve once the step fired")
	assert.Equal(t, "approved", approved.Status)

	page, err := env.Admin.Audit(env.Ctx(), url.Values{"action_id": {a.ID}, "kind": {"action.escalated"}})
	require.NoError(t, err)
	require.Len(t, page.Events, 1, "the step fired once")
	n := notificationsOf(t, bob, a.ID)
	require.Len(t, n.Escalations, 2)
	assert.Equal(t, []string{"oncall"}, n.Escalations[1].Reviewers)
	assert.NotNil(t, n.Escalations[1].FiredAt)
}

func TestEscalatedActionStillExpiresAtExpiresAt(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	hook := newReceiver(t, nil)
	createTarget(t, env, webhookTarget("hook", hook.srv.URL, "k"))
	agent := env.Agent("slow", map[string]any{"rules": []map[string]any{
		{"id": "r", "tool": "deploy.prod", "effect": "approve", "timeout": "3s", "notify": []string{"hook"},
			"escalate": []map[string]any{{"after": "1s", "notify": []string{"hook"}}}},
	}})
	a, err := agent.Submit(env.Ctx(), clientReq("deploy.prod"))
	require.NoError(t, err)
	eventually(t, "the expiry's notification", func() bool { return len(hook.eventsFor(t, a.ID, "action.decided")) == 1 })
	got, err := env.Admin.Get(env.Ctx(), a.ID)
	require.NoError(t, err)
	assert.Equal(t, "expired", got.Status)
	assert.False(t, got.UpdatedAt.Before(*a.ExpiresAt), "expired at expires_at, not before")
	assert.Len(t, hook.eventsFor(t, a.ID, "action.escalated"), 1)
	assert.Equal(t, "expired", hook.eventsFor(t, a.ID, "action.decided")[0].Action.Status)
}

func TestReviewerGroupsLimitWhoApprovesAndQuorumCountsMembers(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	alice, bob, carol := env.Reviewer("alice"), env.Reviewer("bob"), env.Reviewer("carol")
	createGroup(t, env, "payments", "alice", "Bob")
	agent := env.Agent("payer", map[string]any{"rules": []map[string]any{
		{"id": "big", "tool": "payments.send", "effect": "approve", "approvals": 2, "reviewers": []string{"payments"}},
		{"id": "small", "tool": "email.send", "effect": "approve"},
	}})
	a, err := agent.Submit(env.Ctx(), clientReq("payments.send"))
	require.NoError(t, err)
	other, err := agent.Submit(env.Ctx(), clientReq("email.send"))
	require.NoError(t, err)
	full, err := carol.Get(env.Ctx(), a.ID)
	require.NoError(t, err)

	_, err = carol.Approve(env.Ctx(), a.ID, full.ConfirmationPhrase, "")
	require.Equal(t, http.StatusForbidden, client.StatusOf(err))
	var ce *client.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "forbidden", ce.Code)
	assert.Contains(t, ce.Message, "payments")

	ids := func(c *client.Client, q url.Values) []string {
		page, err := c.ListActions(env.Ctx(), q)
		require.NoError(t, err)
		var out []string
		for _, x := range page.Actions {
			out = append(out, x.ID)
		}
		return out
	}
	mine := url.Values{"can_approve": {"me"}}
	assert.Equal(t, []string{other.ID}, ids(carol, mine), "carol can approve only the action without reviewers")
	assert.ElementsMatch(t, []string{a.ID, other.ID}, ids(alice, mine))
	assert.ElementsMatch(t, []string{a.ID, other.ID}, ids(carol, url.Values{"status": {"pending"}}), "all stays reachable")

	got, err := alice.Approve(env.Ctx(), a.ID, full.ConfirmationPhrase, "")
	require.NoError(t, err)
	assert.Equal(t, "pending", got.Status, "one member of two")
	assert.Equal(t, []string{other.ID}, ids(alice, mine), "approved by alice already")
	_, err = alice.Approve(env.Ctx(), a.ID, full.ConfirmationPhrase, "")
	require.Equal(t, http.StatusConflict, client.StatusOf(err), "the same member counts once")
	got, err = bob.Approve(env.Ctx(), a.ID, full.ConfirmationPhrase, "")
	require.NoError(t, err)
	assert.Equal(t, "approved", got.Status, "two distinct members")

	_, err = carol.ListActions(env.Ctx(), url.Values{"can_approve": {"carol"}})
	assert.Equal(t, http.StatusBadRequest, client.StatusOf(err))
}

// TestEveryMatchingRulesReviewersApply: when several approve rules hold an
// action, an approver must be in a group of each one that names reviewers,
// whichever rule names the decision (an earlier rule of the agent's, or a
// fleet rule): on the approve endpoint and in "actions I can approve". An
// escalation step widens its own rule's reviewers only.
func TestEveryMatchingRulesReviewersApply(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	carol, lena, fred := env.Reviewer("carol"), env.Reviewer("lena"), env.Reviewer("fred")
	olga, otto := env.Reviewer("olga"), env.Reviewer("otto")
	createGroup(t, env, "leads", "lena", "fred")
	createGroup(t, env, "finance", "fred", "olga")
	createGroup(t, env, "oncall", "olga", "otto")
	_, err := env.Admin.PutFleetPolicy(ctx, map[string]any{"rules": []map[string]any{
		{"id": "baseline", "tool": "deploy.*", "effect": "approve"},
	}})
	require.NoError(t, err)
	agent := env.Agent("crm", map[string]any{"rules": []map[string]any{
		{"id": "writes", "tool": "crm.update", "effect": "approve"},
		{"id": "vip", "tool": "crm.update", "effect": "approve", "when": "args.account == 'vip'", "reviewers": []string{"leads"},
			"escalate": []map[string]any{{"after": "1s", "reviewers": []string{"oncall"}}}},
		{"id": "money", "tool": "crm.update", "effect": "approve", "when": "args.limit > 100", "reviewers": []string{"finance"}},
		{"id": "prod", "tool": "deploy.prod", "effect": "approve", "reviewers": []string{"leads"}},
	}})
	forbidden := func(c *client.Client, id string, names ...string) {
		t.Helper()
		_, err := approveWith(t, c, id, "once")
		require.Equal(t, http.StatusForbidden, client.StatusOf(err), "%v", err)
		for _, n := range names {
			assert.Contains(t, err.Error(), n)
		}
	}
	canApprove := func(c *client.Client) []string {
		page, err := c.ListActions(ctx, url.Values{"can_approve": {"me"}})
		require.NoError(t, err)
		var out []string
		for _, x := range page.Actions {
			out = append(out, x.ID)
		}
		return out
	}

	// An earlier agent rule names the decision; the later rule's
	// reviewers still apply.
	vip := submitIn(t, agent, "", "crm.update", map[string]any{"account": "vip", "limit": 1})
	require.Equal(t, "pending", vip.Status)
	assert.Equal(t, "writes", vip.Decision.RuleID)
	assert.Equal(t, []client.HeldRule{{Source: "agent", RuleID: "writes"}, {Source: "agent", RuleID: "vip", Reviewers: []string{"leads"}}},
		vip.Decision.Rules)
	forbidden(carol, vip.ID, "leads", "rule vip")

	// A fleet rule names the decision; the agent's rule's reviewers apply.
	prod := submitIn(t, agent, "", "deploy.prod", map[string]any{"service": "api"})
	require.Equal(t, "pending", prod.Status)
	assert.Equal(t, "fleet", prod.Decision.Source)
	assert.Equal(t, "baseline", prod.Decision.RuleID)
	forbidden(carol, prod.ID, "leads", "rule prod")
	assert.NotContains(t, canApprove(carol), prod.ID)
	assert.Contains(t, canApprove(lena), prod.ID)
	got, err := approveWith(t, lena, prod.ID, "once")
	require.NoError(t, err)
	assert.Equal(t, "approved", got.Status)
	got, err = approveWith(t, lena, vip.ID, "once")
	require.NoError(t, err)
	assert.Equal(t, "approved", got.Status)

	// Two rules name reviewers: an approver must be in a group of each.
	both := submitIn(t, agent, "", "crm.update", map[string]any{"account": "vip", "limit": 999})
	require.Equal(t, "pending", both.Status)
	forbidden(lena, both.ID, "finance", "rule money")
	forbidden(carol, both.ID, "leads", "finance")
	assert.NotContains(t, canApprove(lena), both.ID)
	assert.Contains(t, canApprove(fred), both.ID)

	// vip's escalation step widens vip's reviewers, not money's.
	eventually(t, "vip's escalation step", func() bool {
		for _, st := range notificationsOf(t, env.Admin, both.ID).Escalations {
			if st.RuleID == "vip" && st.Step == 1 && st.FiredAt != nil {
				return true
			}
		}
		return false
	})
	var steps []string
	for _, st := range notificationsOf(t, env.Admin, both.ID).Escalations {
		steps = append(steps, fmt.Sprintf("%s/%d %v", st.RuleID, st.Step, st.Reviewers))
	}
	assert.Equal(t, []string{"vip/0 [leads]", "vip/1 [oncall]", "money/0 [finance]"}, steps)
	forbidden(otto, both.ID, "finance", "rule money")
	assert.NotContains(t, canApprove(otto), both.ID)
	got, err = approveWith(t, olga, both.ID, "once")
	require.NoError(t, err, "olga is in oncall, which vip's step added, and in finance")
	assert.Equal(t, "approved", got.Status)
}

func TestGroupsAPI(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	env.Reviewer("alice")
	env.Reviewer("bob")
	ctx := env.Ctx()
	createGroup(t, env, "ops", "alice")
	_, err := env.Admin.Do(ctx, http.MethodPost, "/api/v1/groups", map[string]any{"name": "ops", "members": []string{}}, nil)
	assert.Equal(t, http.StatusConflict, client.StatusOf(err))
	_, err = env.Admin.Do(ctx, http.MethodPost, "/api/v1/groups", map[string]any{"name": "x", "members": []string{"nobody"}}, nil)
	assert.Equal(t, http.StatusUnprocessableEntity, client.StatusOf(err))
	_, err = env.Admin.Do(ctx, http.MethodPost, "/api/v1/groups", map[string]any{"name": "Bad Name", "members": []string{}}, nil)
	assert.Equal(t, http.StatusBadRequest, client.StatusOf(err))

	var g struct {
		Name    string   `json:"name"`
		Members []string `json:"members"`
	}
	_, err = env.Admin.Do(ctx, http.MethodPut, "/api/v1/groups/ops", map[string]any{"members": []string{"bob", "ALICE"}}, &g)
	require.NoError(t, err)
	assert.Equal(t, []string{"alice", "bob"}, g.Members, "stored spellings, sorted")
	_, err = env.Admin.Do(ctx, http.MethodGet, "/api/v1/groups/ops", nil, &g)
	require.NoError(t, err)
	assert.Equal(t, "ops", g.Name)
	var list struct {
		Groups []map[string]any `json:"groups"`
	}
	_, err = env.Admin.Do(ctx, http.MethodGet, "/api/v1/groups", nil, &list)
	require.NoError(t, err)
	assert.Len(t, list.Groups, 1)

	// A policy naming a group or a target that does not exist is refused.
	for _, rule := range []map[string]any{
		{"id": "r", "tool": "x.y", "effect": "approve", "reviewers": []string{"nope"}},
		{"id": "r", "tool": "x.y", "effect": "approve", "notify": []string{"nope"}},
		{"id": "r", "tool": "x.y", "effect": "approve", "escalate": []map[string]any{{"after": "1m", "notify": []string{"nope"}}}},
	} {
		_, err = env.Admin.PutFleetPolicy(ctx, map[string]any{"rules": []map[string]any{rule}})
		assert.Equal(t, http.StatusUnprocessableEntity, client.StatusOf(err), "%v", rule)
	}
	_, err = env.Admin.PutFleetPolicy(ctx, map[string]any{"rules": []map[string]any{}, "settings": map[string]any{"notify": []string{"nope"}}})
	assert.Equal(t, http.StatusUnprocessableEntity, client.StatusOf(err))

	status, err := env.Admin.Do(ctx, http.MethodDelete, "/api/v1/groups/ops", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusNoContent, status)
	_, err = env.Admin.Do(ctx, http.MethodDelete, "/api/v1/groups/ops", nil, nil)
	assert.Equal(t, http.StatusNotFound, client.StatusOf(err))
	_, err = env.Reviewer("rita").Do(ctx, http.MethodGet, "/api/v1/groups", nil, nil)
	assert.Equal(t, http.StatusForbidden, client.StatusOf(err), "admins only")
}

func TestNotifyTargetsAPIRefusesBadTargets(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	for name, body := range map[string]map[string]any{
		"plain http off loopbackOnly":        {"name": "a", "kind": "webhook", "url": "http://example.com/x", "secret": "k"},
		"loopbackOnly without allow_private": {"name": "a", "kind": "webhook", "url": "http://127.0.0.1:9/x", "secret": "k"},
		"webhook without secret":             {"name": "a", "kind": "webhook", "url": "https://example.com/x"},
		"unknown kind":                       {"name": "a", "kind": "pager", "url": "https://example.com/x"},
		"email without to":                   {"name": "a", "kind": "email"},
		"email with a bad address":           {"name": "a", "kind": "email", "to": []string{"Bob <b@example.com>"}},
		"bad name":                           {"name": "A B", "kind": "slack", "url": "https://example.com/x"},
	} {
		_, err := env.Admin.Do(ctx, http.MethodPost, "/api/v1/notify/targets", body, nil)
		assert.Equal(t, http.StatusBadRequest, client.StatusOf(err), name)
	}
	_, err := env.Admin.Do(ctx, http.MethodPost, "/api/v1/notify/targets", map[string]any{"name": "a", "kind": "slack", "url": "https://example.com/x", "extra": 1}, nil)
	assert.Equal(t, http.StatusBadRequest, client.StatusOf(err), "unknown fields")
	createTarget(t, env, map[string]any{"name": "a", "kind": "slack", "url": "https://example.com/x"})
	_, err = env.Admin.Do(ctx, http.MethodPost, "/api/v1/notify/targets", map[string]any{"name": "a", "kind": "slack", "url": "https://example.com/y"}, nil)
	assert.Equal(t, http.StatusConflict, client.StatusOf(err))
	status, err := env.Admin.Do(ctx, http.MethodDelete, "/api/v1/notify/targets/a", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusNoContent, status)
	_, err = env.Admin.Do(ctx, http.MethodDelete, "/api/v1/notify/targets/a", nil, nil)
	assert.Equal(t, http.StatusNotFound, client.StatusOf(err))
}

func TestUnconfiguredSubmitWritesNoRoute(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("plain", map[string]any{"rules": []map[string]any{{"id": "r", "tool": "email.send", "effect": "approve"}}})
	a, err := agent.Submit(env.Ctx(), clientReq("email.send"))
	require.NoError(t, err)
	var routes, outbox int
	require.NoError(t, env.App.Pool().QueryRow(env.Ctx(), `SELECT (SELECT count(*) FROM action_routes), (SELECT count(*) FROM notify_outbox)`).Scan(&routes, &outbox))
	assert.Zero(t, routes)
	assert.Zero(t, outbox)
	n := notificationsOf(t, env.Admin, a.ID)
	assert.Empty(t, n.Escalations)
	assert.Empty(t, n.Deliveries)
	assert.True(t, strings.HasPrefix(a.ID, ""))
}

func TestFleetNotifyRemindsAtHalfTheTimeout(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	hook := newReceiver(t, nil)
	createTarget(t, env, webhookTarget("fleet-hook", hook.srv.URL, "k"))
	_, err := env.Admin.PutFleetPolicy(env.Ctx(), map[string]any{"rules": []map[string]any{}, "settings": map[string]any{"notify": []string{"fleet-hook"}}})
	require.NoError(t, err)
	agent := env.Agent("reminded", map[string]any{"rules": []map[string]any{
		{"id": "r", "tool": "email.send", "effect": "approve", "timeout": "6s"},
	}})
	a, err := agent.Submit(env.Ctx(), clientReq("email.send"))
	require.NoError(t, err)
	eventually(t, "the pending notification and the reminder", func() bool {
		return len(hook.eventsFor(t, a.ID, "action.pending")) == 1 && len(hook.eventsFor(t, a.ID, "action.escalated")) == 1
	})
	n := notificationsOf(t, env.Admin, a.ID)
	require.Len(t, n.Escalations, 2)
	assert.True(t, n.Escalations[1].Reminder)
	assert.Equal(t, []string{"fleet-hook"}, n.Escalations[1].Notify)

	// remind: false turns it off; the targets are still told of the action.
	_, err = env.Admin.PutAgentPolicy(env.Ctx(), "reminded", map[string]any{"rules": []map[string]any{
		{"id": "q", "tool": "sms.send", "effect": "approve", "timeout": "2s"},
	}, "settings": map[string]any{"remind": false}})
	require.NoError(t, err)
	b, err := agent.Submit(env.Ctx(), clientReq("sms.send"))
	require.NoError(t, err)
	eventually(t, "the expiry's notification", func() bool { return len(hook.eventsFor(t, b.ID, "action.decided")) == 1 })
	assert.Len(t, hook.eventsFor(t, b.ID, "action.pending"), 1)
	assert.Empty(t, hook.eventsFor(t, b.ID, "action.escalated"), "no reminder")
}
