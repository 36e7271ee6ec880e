package web_test

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/eventbus"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
	"github.com/airlockhq/airlock/internal/web"
)

// stack is the console's stream on its own, wired by hand so that tests can
// tune its buffer and timeouts: a fresh database, the service, the bus and
// web.Handler behind an httptest server.
type stack struct {
	url   string
	token string // a reviewer's token
	svc   *hitl.Service
}

func newStack(t *testing.T, clientBuffer int, writeTimeout, pingEvery time.Duration) *stack {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testdb.URL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := store.New(pool, log)
	bus := eventbus.New()
	svc := hitl.NewService(hitl.Config{Store: st, Bus: bus, Logger: log})
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	signer, err := auth.NewSigner(key)
	require.NoError(t, err)

	_, err = st.CreateUser(ctx, store.User{Username: "rita", PasswordHash: "x", Roles: []auth.Role{auth.RoleReviewer}}, "test")
	require.NoError(t, err)
	tok, err := signer.Issue(auth.KindUser, "rita", []auth.Role{auth.RoleReviewer}, time.Hour, time.Now())
	require.NoError(t, err)
	require.NoError(t, st.RecordToken(ctx, tok, "test", audit.Event{Kind: audit.KindLogin, Actor: "rita"}))
	_, err = st.CreateAgent(ctx, store.Agent{ID: "mailer", Name: "Mailer", CreatedBy: "test"})
	require.NoError(t, err)
	_, err = st.PutPolicy(ctx, store.AgentScope("mailer"), policy.Document{Rules: []policy.Rule{
		{ID: "ask", Tool: "email.send", Effect: policy.Approve}}}, "test")
	require.NoError(t, err)

	h := web.New(web.Config{Service: svc, Store: st, Signer: signer, Bus: bus, Key: key, Logger: log,
		ClientBuffer: clientBuffer, WriteTimeout: writeTimeout, PingEvery: pingEvery})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { h.Run(runCtx); close(done) }()
	srv := httptest.NewServer(h.Mount(http.NotFoundHandler()))
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	return &stack{url: srv.URL, token: tok.Raw, svc: svc}
}

// submit makes the agent ask for an email.send that needs approval.
func (s *stack) submit(t *testing.T, ctx context.Context, n int) *hitl.Action {
	t.Helper()
	a, _, err := s.svc.Submit(ctx, "mailer", "", hitl.SubmitRequest{Tool: "email.send", Args: map[string]any{"n": n}})
	require.NoError(t, err)
	require.Equal(t, hitl.StatusPending, a.Status)
	return a
}
