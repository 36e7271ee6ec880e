package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/notify"
	"github.com/airlockhq/airlock/internal/risk"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// setup returns a store on a fresh database with one agent, "bot".
func setup(t *testing.T) (*store.Store, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	s := store.New(testdb.New(t), nil)
	_, err := s.CreateAgent(ctx, store.Agent{ID: "bot", Name: "bot", CreatedBy: "admin"})
	require.NoError(t, err)
	return s, ctx
}

// deliverer delivers from s's outbox.
func deliverer(s *store.Store, c notify.Config) *notify.Deliverer {
	c.Outbox, c.Action, c.PublicURL = s, s.Action, "https://airlock.example"
	c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return notify.NewDeliverer(c)
}

// pendingAction stores a pending action of bot whose route tells targets
// (one action.pending outbox row each).
func pendingAction(t *testing.T, ctx context.Context, s *store.Store, targets ...string) *hitl.Action {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	exp := now.Add(time.Hour)
	id := uuid.Must(uuid.NewV7()).String()
	a := &hitl.Action{ID: id, AgentID: "bot", CorrelationID: id, Tool: "email.send", Args: map[string]any{"to": "x@example.com"},
		Status: hitl.StatusPending, Risk: risk.Assessment{Level: risk.Low, Reasons: []string{}}, Approvals: []hitl.Approval{},
		RequiredApprovals: 1, Phrase: "email.send " + id[len(id)-4:], Version: 1, CreatedAt: now, UpdatedAt: now, ExpiresAt: &exp,
		Decision: hitl.Decision{Effect: "approve", By: "policy"}}
	route := &hitl.Route{Notify: targets, Steps: []hitl.RouteStep{{Step: 0, Due: now, Notify: targets, Reviewers: []string{}}}}
	require.NoError(t, s.InsertAction(ctx, a, nil, a.AuditEvent(audit.KindActionSubmitted, "agent:bot", nil), hitl.Guard{Route: route}))
	return a
}

// approve decides a as the service does: the decision queues
// action.decided for every target told of it.
func approve(t *testing.T, ctx context.Context, s *store.Store, a *hitl.Action) {
	t.Helper()
	prev := a.Version
	a.Status, a.Version, a.UpdatedAt = hitl.StatusApproved, a.Version+1, time.Now().UTC()
	a.Decision.By = "lead"
	require.NoError(t, s.UpdateAction(ctx, a, prev, hitl.Effects{Decided: true}, a.AuditEvent(audit.KindActionApproved, "lead", nil)))
}

// hookReceiver is a webhook receiver on 127.0.0.1 recording the type of
// each delivery; answer picks the status of the nth (1-based).
type hookReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	types []string
}

func newHookReceiver(t *testing.T, answer func(n int) int) *hookReceiver {
	t.Helper()
	rc := &hookReceiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Type string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		rc.mu.Lock()
		rc.types = append(rc.types, body.Type)
		n := len(rc.types)
		rc.mu.Unlock()
		w.WriteHeader(answer(n))
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *hookReceiver) got() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.types...)
}

// deliveries returns the deliveries of action id by event.
func deliveries(t *testing.T, ctx context.Context, s *store.Store, id string) map[string]hitl.Delivery {
	t.Helper()
	ds, err := s.Deliveries(ctx, id)
	require.NoError(t, err)
	out := map[string]hitl.Delivery{}
	for _, d := range ds {
		out[d.Event] = d
	}
	return out
}

// TestRetryOfAnActionNoLongerWaitingIsNotSent: a pending delivery whose
// retry comes after the action was decided is not sent (it would tell
// reviewers the action waits for them); it ends, recorded with why, and
// the target hears the decision instead.
func TestRetryOfAnActionNoLongerWaitingIsNotSent(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	rc := newHookReceiver(t, func(n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	_, err := notify.NewTargets(s).Create(ctx, "admin", notify.Target{Name: "hook", Kind: notify.KindWebhook, URL: rc.srv.URL,
		Secret: "k", AllowPrivate: []string{"127.0.0.0/8"}})
	require.NoError(t, err)
	a := pendingAction(t, ctx, s, "hook")
	d := deliverer(s, notify.Config{})

	n, err := d.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "queued", deliveries(t, ctx, s, a.ID)[notify.EventPending].Status, "the first attempt failed: retried")

	approve(t, ctx, s, a)
	// Its backoff over, the retry is due with the decision's delivery.
	_, err = s.Pool().Exec(ctx, `UPDATE notify_outbox SET next_at = now() WHERE action_id = $1`, a.ID)
	require.NoError(t, err)
	n, err = d.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)

	assert.Equal(t, []string{notify.EventPending, notify.EventDecided}, rc.got(), "the retry of action.pending is not sent")
	ds := deliveries(t, ctx, s, a.ID)
	pending := ds[notify.EventPending]
	assert.Equal(t, "failed", pending.Status, "not retried again")
	require.Len(t, pending.Attempts, 2)
	assert.False(t, pending.Attempts[1].OK)
	assert.Contains(t, pending.Attempts[1].Error, "approved")
	assert.Equal(t, pending.Attempts[1].Error, pending.LastError)
	assert.Equal(t, "delivered", ds[notify.EventDecided].Status)
}

// TestSlackURLQueryNeverShown: a Slack URL's credential in its query
// string is redacted, whatever its path, in the answer, the list and the
// audit event of its creation, as one in its path is.
func TestSlackURLQueryNeverShown(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	targets := notify.NewTargets(s)
	for name, raw := range map[string]string{
		"no-path":    "https://hooks.example.com?token=credential",
		"root-path":  "https://hooks.example.com/?token=credential",
		"with-path":  "https://hooks.example.com/services/credential",
		"path-query": "https://hooks.example.com/in?token=credential",
	} {
		view, err := targets.Create(ctx, "admin", notify.Target{Name: name, Kind: notify.KindSlack, URL: raw})
		require.NoError(t, err)
		assert.Equal(t, "https://hooks.example.com/"+notify.Redacted, view.URL, name)
	}
	list, err := targets.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 4)
	for _, tg := range list {
		assert.NotContains(t, tg.URL, "credential", tg.Name)
	}
	rows, err := s.Pool().Query(ctx, `SELECT data::text FROM audit_events WHERE kind = $1`, audit.KindNotifyTargetCreated)
	require.NoError(t, err)
	events, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Len(t, events, 4)
	for _, ev := range events {
		assert.NotContains(t, ev, "credential")
	}
	stored, err := s.Targets(ctx)
	require.NoError(t, err)
	assert.Contains(t, stored[0].URL, "credential", "the deliverer still has it")
}

// smtpReceiver is an SMTP server on 127.0.0.1 for one connection: it
// greets, holds its answer to EHLO until hold is closed (nil: at once)
// and accepts what follows. onQuit, when set, runs on QUIT before the
// answer. done gets whether a whole message was accepted once the
// connection ends.
type smtpReceiver struct {
	addr   string
	hold   chan struct{}
	onQuit func()
	done   chan bool
}

func newSMTPReceiver(t *testing.T, hold chan struct{}, onQuit func()) *smtpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	rc := &smtpReceiver{addr: ln.Addr().String(), hold: hold, onQuit: onQuit, done: make(chan bool, 1)}
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			rc.done <- false
			return
		}
		defer conn.Close()
		rc.done <- rc.serve(textproto.NewConn(conn))
	}()
	return rc
}

func (rc *smtpReceiver) serve(c *textproto.Conn) (accepted bool) {
	if c.PrintfLine("220 127.0.0.1 ESMTP test") != nil {
		return false
	}
	for {
		line, err := c.ReadLine()
		if err != nil {
			return accepted
		}
		switch cmd := strings.ToUpper(strings.SplitN(line, " ", 2)[0]); cmd {
		case "EHLO", "HELO":
			if rc.hold != nil {
				<-rc.hold
			}
			err = c.PrintfLine("250 127.0.0.1")
		case "DATA":
			if err = c.PrintfLine("354 go ahead"); err == nil {
				if _, err = c.ReadDotBytes(); err == nil {
					accepted = true
					err = c.PrintfLine("250 queued")
				}
			}
		case "QUIT":
			if rc.onQuit != nil {
				rc.onQuit()
			}
			_ = c.PrintfLine("221 bye")
			return accepted
		default:
			err = c.PrintfLine("250 ok")
		}
		if err != nil {
			return accepted
		}
	}
}

// wait returns whether the receiver accepted a message, once its
// connection ended.
func (rc *smtpReceiver) wait(t *testing.T, ctx context.Context) bool {
	t.Helper()
	select {
	case ok := <-rc.done:
		return ok
	case <-ctx.Done():
		t.Fatal("the SMTP connection never ended")
		return false
	}
}

// TestEmailCutByItsTimeoutIsNotSentLater: an email attempt that timed out
// (a failure, retried later) stops there: its connection is closed, so the
// email cannot go out after all and again with the retry.
func TestEmailCutByItsTimeoutIsNotSentLater(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	hold := make(chan struct{})
	rc := newSMTPReceiver(t, hold, nil)
	_, err := notify.NewTargets(s).Create(ctx, "admin", notify.Target{Name: "mail", Kind: notify.KindEmail, To: []string{"lead@example.com"}})
	require.NoError(t, err)
	a := pendingAction(t, ctx, s, "mail")
	d := deliverer(s, notify.Config{SMTPAddr: rc.addr, SMTPFrom: "airlock@example.com", Timeout: 100 * time.Millisecond})

	n, err := d.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	pending := deliveries(t, ctx, s, a.ID)[notify.EventPending]
	assert.Equal(t, "queued", pending.Status, "timed out: retried later")
	assert.Contains(t, pending.LastError, "deadline exceeded")

	close(hold) // the server answers at last
	assert.False(t, rc.wait(t, ctx), "the attempt that timed out sent nothing after all")
}

// TestDeliverySentAsTheServerStopsIsNotReleased: a delivery that went out
// while the server was stopping is recorded as delivered: released (due
// again at once), the next instance to look would send it again.
func TestDeliverySentAsTheServerStopsIsNotReleased(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	rc := newSMTPReceiver(t, nil, stop) // the server stops once the email is taken
	_, err := notify.NewTargets(s).Create(ctx, "admin", notify.Target{Name: "mail", Kind: notify.KindEmail, To: []string{"lead@example.com"}})
	require.NoError(t, err)
	a := pendingAction(t, ctx, s, "mail")
	d := deliverer(s, notify.Config{SMTPAddr: rc.addr, SMTPFrom: "airlock@example.com"})

	n, err := d.RunOnce(runCtx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.True(t, rc.wait(t, ctx), "the email was sent")
	require.Error(t, runCtx.Err(), "the server stopped during the attempt")

	pending := deliveries(t, ctx, s, a.ID)[notify.EventPending]
	assert.Equal(t, "delivered", pending.Status)
	require.Len(t, pending.Attempts, 1)
	assert.True(t, pending.Attempts[0].OK)
	claims, err := s.ClaimDeliveries(ctx, 10, time.Minute)
	require.NoError(t, err)
	assert.Empty(t, claims, "nothing is due to be sent again")
}
