// Package apptest boots a real Airlock server for end-to-end tests: a fresh
// migrated Postgres database (internal/testdb), the whole app on 127.0.0.1:0,
// and Go clients for an admin, reviewers, an auditor and agents.
package apptest

import (
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/app"
	"github.com/airlockhq/airlock/internal/openapi/openapitest"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/sso"
	"github.com/airlockhq/airlock/internal/testdb"
	"github.com/airlockhq/airlock/internal/worker"
)

// AdminPassword is the bootstrap admin's password in tests.
const AdminPassword = "correct-horse-battery-staple"

// Env is one running server and what tests need to drive it.
type Env struct {
	T      testing.TB
	App    *app.App
	Config app.Config
	URL    string
	DBURL  string
	Admin  *client.Client
	Anon   *client.Client
	// HTTP is the HTTP client every client above uses; tests that send raw
	// requests use it too.
	HTTP    *http.Client
	Log     *slog.Logger
	dataDir string
}

// Options tune Start.
type Options struct {
	// DatabaseURL reuses a database (restart tests); empty = a fresh one.
	DatabaseURL string
	// DataDir reuses a data dir (same signing key); empty = a fresh one.
	DataDir string
	// ExpiryEvery overrides the expiry sweep interval.
	ExpiryEvery time.Duration
	// LeaseTTL overrides the worker lease length.
	LeaseTTL time.Duration
	// Addr overrides the listen address (restart tests that keep a port).
	Addr string
	// Worker is "embedded" to run the embedded worker (default "off").
	Worker string
	// Workspaces are the embedded worker's workspaces.
	Workspaces map[string]string
	// Repos are the embedded worker's repositories.
	Repos map[string]string
	// ExecPolicy is the exec allowlist (nil = default).
	ExecPolicy *sandbox.Policy
	// SecureCookies marks cookies Secure (a TLS proxy in front).
	SecureCookies bool
	// MetricsToken is the bearer token /metrics requires (empty: open).
	MetricsToken string
	// Host bounds the embedded worker (zero fields: the defaults).
	Host worker.HostSettings
	// TrustedProxies are the peers whose X-Forwarded-For is believed
	// (127.0.0.0/8: the test's own requests act as a proxy's).
	TrustedProxies []netip.Prefix
	// MCPMaxResultBytes is the MCP gateway's result limit (0: the default).
	MCPMaxResultBytes int
	// OIDC configures single sign-on (zero: off).
	OIDC sso.Config
	// SMTPAddr is the SMTP server email notifications go to (empty: none).
	SMTPAddr string
	// PublicURL is the console's base URL in notifications (empty: the
	// listen address).
	PublicURL string
	// AuditPreviousKeys are the audit keys the server's replaced
	// (AIRLOCK_AUDIT_PREVIOUS_KEYS).
	AuditPreviousKeys []ed25519.PublicKey
	// MaxLongPolls and MaxStreams are the per-caller caps
	// (AIRLOCK_MAX_LONG_POLLS, AIRLOCK_MAX_STREAMS; 0: the defaults).
	MaxLongPolls int
	MaxStreams   int
}

// Start boots a server for t and stops it when t ends.
func Start(t testing.TB, opts ...Options) *Env {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.DatabaseURL == "" {
		o.DatabaseURL = testdb.URL(t)
	}
	if o.DataDir == "" {
		o.DataDir = t.TempDir()
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("AIRLOCK_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.Worker == "" {
		o.Worker = "off"
	}
	cfg := app.Config{
		Addr: o.Addr, DatabaseURL: o.DatabaseURL, DataDir: o.DataDir,
		AdminPassword: AdminPassword, JWTKeyFile: filepath.Join(o.DataDir, "jwt.key"),
		Worker: o.Worker, ExpiryEvery: o.ExpiryEvery, LeaseTTL: o.LeaseTTL,
		Workspaces: o.Workspaces, Repos: o.Repos, ExecPolicy: o.ExecPolicy, SecureCookies: o.SecureCookies,
		MetricsToken: o.MetricsToken,
		Host:         o.Host, DefaultWorkspace: filepath.Join(t.TempDir(), "default-workspace"),
		TrustedProxies: o.TrustedProxies, MCPMaxResultBytes: o.MCPMaxResultBytes, OIDC: o.OIDC,
		SMTPAddr: o.SMTPAddr, SMTPFrom: "airlock@test.invalid", PublicURL: o.PublicURL,
		AuditPreviousKeys: o.AuditPreviousKeys, MaxLongPolls: o.MaxLongPolls, MaxStreams: o.MaxStreams,
	}
	e := &Env{T: t, Config: cfg, DBURL: o.DatabaseURL, Log: log, dataDir: o.DataDir}
	e.boot()
	t.Cleanup(e.Stop)
	return e
}

func (e *Env) boot() {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := app.Start(ctx, e.Config, e.Log)
	require.NoError(e.T, err)
	e.App = a
	e.URL = a.URL()
	// A restart listens on the same address, so clients and workers that
	// hold the URL keep working.
	e.Config.Addr = strings.TrimPrefix(e.URL, "http://")
	if e.HTTP == nil {
		e.HTTP = ValidatingClient(e.T)
	}
	e.Anon = client.New(e.URL, "").WithHTTPClient(e.HTTP)
	admin, _, err := e.Anon.Login(ctx, "admin", AdminPassword)
	require.NoError(e.T, err)
	e.Admin = admin
}

// ValidatingClient returns an HTTP client whose every response to an API
// path is checked against the served OpenAPI document
// (internal/openapi/openapitest); a status or shape the document does not
// describe fails t.
func ValidatingClient(t testing.TB) *http.Client {
	var mu sync.Mutex
	var failures []error
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, err := range failures {
			t.Errorf("response does not match the OpenAPI document: %v", err)
		}
	})
	report := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, err)
	}
	return &http.Client{Timeout: 90 * time.Second, Transport: openapitest.Transport(report, nil)}
}

// Stop shuts the server down (idempotent).
func (e *Env) Stop() {
	if e.App == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.App.Shutdown(ctx)
	e.App = nil
}

// Restart stops the server and starts a new one on the same database and
// data dir (same signing key).
func (e *Env) Restart() {
	e.T.Helper()
	e.Stop()
	e.boot()
}

// Ctx returns a context bounded for one test step.
func (e *Env) Ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	e.T.Cleanup(cancel)
	return ctx
}

// Agent registers an agent with policy doc (nil = none) and returns a client
// holding a fresh agent token.
func (e *Env) Agent(id string, doc any) *client.Client {
	e.T.Helper()
	ctx := e.Ctx()
	require.NoError(e.T, e.Admin.CreateAgent(ctx, id, "agent "+id))
	if doc != nil {
		_, err := e.Admin.PutAgentPolicy(ctx, id, doc)
		require.NoError(e.T, err)
	}
	tok, err := e.Admin.IssueAgentToken(ctx, id, 0)
	require.NoError(e.T, err)
	return e.Client(tok.Token)
}

// Client returns a client of the server holding token, sending through
// e.HTTP.
func (e *Env) Client(token string) *client.Client {
	return client.New(e.URL, token).WithHTTPClient(e.HTTP)
}

// User creates a user with roles and returns a client logged in as them.
func (e *Env) User(name string, roles ...string) *client.Client {
	e.T.Helper()
	ctx := e.Ctx()
	password := name + "-password-123"
	require.NoError(e.T, e.Admin.CreateUser(ctx, name, password, roles...))
	c, _, err := e.Anon.Login(ctx, name, password)
	require.NoError(e.T, err)
	return c
}

// Reviewer creates a reviewer.
func (e *Env) Reviewer(name string) *client.Client { return e.User(name, "reviewer") }

// Auditor creates an auditor.
func (e *Env) Auditor(name string) *client.Client { return e.User(name, "auditor") }

// Settled returns action id as c reads it once it is no longer approved
// or running: an agent may report its result just after it was answered
// (the MCP relays answer first when nothing could be withheld).
func (e *Env) Settled(c *client.Client, id string) *client.Action {
	e.T.Helper()
	ctx := e.Ctx()
	for {
		a, err := c.Get(ctx, id)
		require.NoError(e.T, err)
		if a.Status != "approved" && a.Status != "running" {
			return a
		}
		select {
		case <-ctx.Done():
			e.T.Fatalf("action %s is still %s", id, a.Status)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
