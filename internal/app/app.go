package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/connlimit"
	"github.com/airlockhq/airlock/internal/eventbus"
	"github.com/airlockhq/airlock/internal/groups"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/httpapi"
	"github.com/airlockhq/airlock/internal/identity"
	"github.com/airlockhq/airlock/internal/metrics"
	"github.com/airlockhq/airlock/internal/notify"
	"github.com/airlockhq/airlock/internal/pgembed"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/web"
	"github.com/airlockhq/airlock/internal/worker"
	"github.com/airlockhq/airlock/internal/worktree"
)

// App is a running server.
type App struct {
	cfg      Config
	log      *slog.Logger
	cluster  *pgembed.Cluster
	pool     *pgxpool.Pool
	Store    *store.Store
	Service  *hitl.Service
	listener net.Listener
	http     *http.Server
	api      *httpapi.Server
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	// stopWorker stops the embedded worker and waits for it (nil: none).
	stopWorker func(context.Context)
	// CreatedAdmin reports that this start created the user admin (no user
	// existed); AdminPassword is then set if its password was generated.
	CreatedAdmin  bool
	AdminPassword string
	// Groups is the reviewer groups service (identity providers map their
	// groups to these with Groups.SyncMemberships).
	Groups *groups.Service
}

// Start brings the server up and serves until Shutdown.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (_ *App, err error) {
	if err := cfg.normalise(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	a := &App{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			a.Shutdown(context.WithoutCancel(ctx))
		}
	}()
	// The port first: a start that cannot serve must fail before it
	// creates anything (the data dir's database, the admin and its
	// password, shown only by the start that creates it).
	if a.listener, err = net.Listen("tcp", cfg.Addr); err != nil {
		return nil, fmt.Errorf("app: cannot listen on %s (is another server running there? set AIRLOCK_ADDR): %w", cfg.Addr, err)
	}
	if err := a.openDatabase(ctx); err != nil {
		return nil, err
	}
	if err := a.bootstrapAdmin(ctx); err != nil {
		return nil, err
	}
	key, err := auth.LoadOrCreateKey(cfg.JWTKeyFile)
	if err != nil {
		return nil, err
	}
	signer, err := auth.NewSigner(key)
	if err != nil {
		return nil, err
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.cancel = cancel
	bus := eventbus.New()
	notifier := store.NewNotifier(a.pool, bus, log)
	m := metrics.New(a.Store.CountPending)
	m.SubmitBatches(a.Store.SubmitBatches)
	m.NameTools(a.toolNamed)
	execPolicy := *cfg.ExecPolicy
	a.Service = hitl.NewService(hitl.Config{Store: a.Store, Bus: bus, Publisher: notifier, Metrics: m, Logger: log,
		LeaseTTL: cfg.LeaseTTL, Refuse: worker.SubmitValidator(execPolicy, worker.NewServedTargets(a.Store, 0)),
		DenyPaths: airlockOwnPaths(cfg), Home: userHome(), ExecOperands: worker.ExecOperands(execPolicy)})
	// Expire what timed out while no server was running before serving.
	if _, err := a.Service.SweepExpired(ctx); err != nil {
		return nil, err
	}
	a.goRun(func() { notifier.Run(runCtx) })
	a.goRun(func() { a.Service.RunExpirer(runCtx, cfg.ExpiryEvery) })
	// Notifications (issue 13): the outbox's deliverer, one per instance.
	publicURL := a.publicURL()
	smtpFrom := cfg.SMTPFrom
	if smtpFrom == "" {
		smtpFrom = "airlock@" + hostOf(publicURL)
	}
	deliverer := notify.NewDeliverer(notify.Config{Outbox: a.Store, Action: a.Store.Action, PublicURL: publicURL,
		SMTPAddr: cfg.SMTPAddr, SMTPFrom: smtpFrom, Metrics: m, Logger: log, Interval: cfg.NotifyEvery})
	a.goRun(func() { deliverer.Run(runCtx) })
	targets := notify.NewTargets(a.Store)
	reviewerGroups := groups.NewService(a.Store)
	a.Groups = reviewerGroups
	auditKeys, err := a.startSealer(ctx, runCtx, m)
	if err != nil {
		return nil, err
	}

	// Identity announces user changes on this bus and, through the
	// notifier, to every other instance: open streams of a disabled user
	// close at once everywhere.
	ident := identity.NewService(identity.Config{Store: a.Store, Signer: signer, Bus: bus, Publisher: notifier})
	ssoSvc, err := a.newSSO(ident, key, reviewerGroups)
	if err != nil {
		return nil, err
	}
	// What one caller may hold open at once on this instance.
	longPolls, streams := connlimit.NewLongPolls(cfg.MaxLongPolls), connlimit.NewStreams(cfg.MaxStreams)
	m.HeldRequests("long_poll", longPolls.Stats)
	m.HeldRequests("stream", streams.Stats)
	api := httpapi.New(httpapi.Config{Service: a.Service, Identity: ident, Store: a.Store, Signer: signer, Metrics: m, Logger: log, LogRequests: cfg.LogRequests, AuditKeys: auditKeys, SecureCookies: cfg.SecureCookies, MetricsToken: cfg.MetricsToken,
		TrustedProxies: cfg.TrustedProxies, MCPMaxResultBytes: cfg.MCPMaxResultBytes, SSO: ssoSvc, Targets: targets, Groups: reviewerGroups,
		LongPolls: longPolls, Streams: streams, Bus: bus, Publisher: notifier})
	a.api = api
	console := web.New(web.Config{Service: a.Service, Identity: ident, Store: a.Store, API: api, Signer: signer, Bus: bus, Key: key, Logger: log,
		SecureCookies: cfg.SecureCookies, SSO: ssoSvc, Targets: targets, Groups: reviewerGroups, Streams: streams})
	a.goRun(func() { console.Run(runCtx) })
	a.http = &http.Server{
		// The console at /, /ui/, /static/ and the stream; the API elsewhere.
		// No path or query holding NUL or invalid UTF-8 reaches either.
		Handler:           httpapi.CleanInput(console.Mount(api.Handler())),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      hitl.MaxWait + 15*time.Second, // long polls last up to MaxWait
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return runCtx },
	}
	a.goRun(func() {
		if err := a.http.Serve(a.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "err", err)
		}
	})
	if cfg.Worker == "embedded" {
		if err := a.startEmbeddedWorker(runCtx, api, signer, execPolicy); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// startEmbeddedWorker runs a worker host inside the server process. It
// talks to this server over HTTP like any other worker, with a token kept
// in the data dir across restarts (embeddedWorkerToken). Without
// AIRLOCK_WORKSPACES it serves one workspace, "default", outside the data
// dir (Config.DefaultWorkspace).
func (a *App) startEmbeddedWorker(ctx context.Context, api *httpapi.Server, signer *auth.Signer, pol sandbox.Policy) error {
	workspaces := maps.Clone(a.cfg.Workspaces)
	if len(workspaces) == 0 {
		workspaces = map[string]string{}
		dir := a.cfg.DefaultWorkspace
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("app: default workspace: %w", err)
		}
		workspaces["default"] = dir
	}
	if err := sandbox.Available(); err != nil {
		a.log.Warn("embedded worker: sandbox unavailable; exec actions will fail closed", "err", err)
	}
	// Its token serves exactly the workspaces and repositories it runs.
	tok, err := a.embeddedWorkerToken(ctx, api, signer, worker.TargetsOf(workspaces, a.cfg.Repos))
	if err != nil {
		return err
	}
	w, err := worker.New(worker.Config{
		Client:      client.New(a.URL(), tok),
		Workspaces:  workspaces,
		Repos:       a.cfg.Repos,
		Concurrency: a.cfg.Host.Concurrency,
		Executor: &worker.SandboxExecutor{Workspaces: workspaces, Policy: pol, Options: a.cfg.Host.Apply(sandbox.RunOptions{}),
			Worktrees: &worktree.Manager{Repos: a.cfg.Repos, Root: filepath.Join(a.cfg.DataDir, "worktrees")}},
		Logger: a.log.With("component", "embedded-worker"),
	})
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(wctx)
	}()
	a.stopWorker = func(ctx context.Context) {
		cancel()
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	a.log.Info("embedded worker running", "workspaces", workspaces, "concurrency", a.cfg.Host.Concurrency,
		"disk_mb", a.cfg.Host.DiskMB, "inodes", a.cfg.Host.Inodes)
	return nil
}

func (a *App) goRun(fn func()) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		fn()
	}()
}

// openPool connects to Postgres. Without an explicit pool_max_conns the pool
// is sized for concurrent agents rather than pgx's CPU-count default.
func openPool(ctx context.Context, url, role string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("app: database url: %w", err)
	}
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "airlock"
	if role != "" {
		cfg.ConnConfig.RuntimeParams["role"] = role // SET ROLE for every connection
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = 40
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("app: connecting to postgres: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("app: connecting to postgres: %w", err)
	}
	return pool, nil
}

// bootstrapAdmin creates the user admin (roles admin, reviewer, auditor)
// when no user exists, with AIRLOCK_ADMIN_PASSWORD or a generated password.
func (a *App) bootstrapAdmin(ctx context.Context) error {
	has, err := a.Store.HasUsers(ctx)
	if err != nil || has {
		return err
	}
	password := a.cfg.AdminPassword
	if password == "" {
		password = auth.RandomPassword()
		a.AdminPassword = password
	}
	hash, err := auth.HashPassword(ctx, password)
	if err != nil {
		return err
	}
	_, err = a.Store.CreateUser(ctx, store.User{Username: identity.AdminName, PasswordHash: hash,
		Roles: identity.AdminRoles()}, "system")
	switch {
	case apperr.CodeOf(err) == apperr.CodeConflict:
		a.AdminPassword = "" // another instance created it first
		return nil
	case err != nil:
		return err
	}
	a.CreatedAdmin = true
	return nil
}

// URL returns the server's base URL.
func (a *App) URL() string { return "http://" + a.listener.Addr().String() }

// Pool returns the database pool.
func (a *App) Pool() *pgxpool.Pool { return a.pool }

// Shutdown stops accepting requests, lets in-flight ones finish (long polls
// included, up to ctx's deadline), then stops background work and the
// embedded database.
func (a *App) Shutdown(ctx context.Context) {
	if a.Service != nil {
		a.Service.Drain() // long polls answer now instead of holding shutdown
	}
	if a.stopWorker != nil {
		// While the API still serves it: a job it stops is reported now
		// rather than left to its lease, and it does not retry a server
		// that is gone.
		a.stopWorker(ctx)
	}
	if a.api != nil {
		a.api.StopStreams()
	}
	if a.http != nil {
		if err := a.http.Shutdown(ctx); err != nil {
			a.log.Warn("http shutdown", "err", err)
		}
	} else if a.listener != nil {
		a.listener.Close() // a start that failed before serving
	}
	if a.api != nil {
		a.api.Drain() // tool results the MCP gateway reports after answering
	}
	if a.cancel != nil {
		a.cancel()
	}
	a.wg.Wait()
	if a.pool != nil {
		a.pool.Close()
	}
	if a.cluster != nil {
		if err := a.cluster.Stop(ctx); err != nil {
			a.log.Warn("stopping embedded postgres", "err", err)
		}
	}
}

// hostOf returns the host name of a URL ("localhost" when it has none).
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return "localhost"
}
