package app_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/app"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/testdb"
	"github.com/airlockhq/airlock/internal/worker"
)

func TestMain(m *testing.M) { testdb.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestEmbeddedDefault is what `make run` does: no database URL, so the
// server starts its own PostgreSQL under the data dir, creates admin with a
// generated password, and on the next start reuses both.
func TestEmbeddedDefault(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "airlock-app-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755)) // the postgres OS user must reach it
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx := context.Background()
	cfg := app.Config{Addr: "127.0.0.1:0", DataDir: dir, Worker: "embedded", DefaultWorkspace: filepath.Join(t.TempDir(), "default")}

	first, err := app.Start(ctx, cfg, quiet)
	require.NoError(t, err)
	password := first.AdminPassword
	require.NotEmpty(t, password, "a generated admin password is reported once")
	admin, _, err := client.New(first.URL(), "").Login(ctx, "admin", password)
	require.NoError(t, err)
	require.NoError(t, admin.CreateAgent(ctx, "kept", "survives restarts"))
	first.Shutdown(ctx)

	second, err := app.Start(ctx, cfg, quiet)
	require.NoError(t, err)
	defer second.Shutdown(ctx)
	assert.Empty(t, second.AdminPassword, "admin exists: no new password")
	admin, _, err = client.New(second.URL(), "").Login(ctx, "admin", password)
	require.NoError(t, err)
	_, err = admin.Do(ctx, http.MethodGet, "/api/v1/agents/kept", nil, nil)
	assert.NoError(t, err, "the cluster and its data were reused")
	resp, err := http.Get(second.URL() + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	// The server logs in to its own cluster as a plain member of
	// airlock_app, not as the cluster's superuser: SQL that drops the
	// assumed role gets no power over the audit trail.
	conn, err := second.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	var who, login string
	var super bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_user, session_user, rolsuper FROM pg_roles WHERE rolname = session_user`).
		Scan(&who, &login, &super))
	assert.Equal(t, "airlock_app", who)
	assert.Equal(t, app.ServerLogin, login)
	assert.False(t, super)
	_, err = conn.Exec(ctx, `RESET ROLE`)
	require.NoError(t, err)
	for _, stmt := range []string{`UPDATE audit_events SET actor = 'mallory'`, `DELETE FROM audit_events`,
		`ALTER TABLE audit_events DISABLE TRIGGER ALL`, `DELETE FROM audit_checkpoints`, `CREATE ROLE mallory SUPERUSER`} {
		_, err := conn.Exec(ctx, stmt)
		assert.Error(t, err, stmt)
	}
	conn.Conn().Close(ctx) // its role was reset: not back into the pool
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("AIRLOCK_ADDR", "127.0.0.1:9999")
	t.Setenv("AIRLOCK_WORKER", "off")
	t.Setenv("AIRLOCK_DATA_DIR", "/tmp/airlock-x")
	cfg, err := app.FromEnv([]string{"-addr", "127.0.0.1:7777"})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:7777", cfg.Addr, "flags override the environment")
	assert.Equal(t, "off", cfg.Worker)
	assert.Equal(t, "/tmp/airlock-x/jwt.key", cfg.JWTKeyFile)

	assert.False(t, cfg.SecureCookies)
	t.Setenv("AIRLOCK_SECURE_COOKIES", "true")
	cfg, err = app.FromEnv(nil)
	require.NoError(t, err)
	assert.True(t, cfg.SecureCookies)

	// The embedded worker's default workspace is outside the data dir,
	// away from PostgreSQL's files; its bounds have defaults, and flags.
	assert.False(t, strings.HasPrefix(cfg.DefaultWorkspace, "/tmp/airlock-x"), "default workspace %s", cfg.DefaultWorkspace)
	assert.True(t, filepath.IsAbs(cfg.DefaultWorkspace))
	assert.Equal(t, worker.HostSettings{Concurrency: 2, DiskMB: 1024, Inodes: 100000}, cfg.Host)
	assert.Equal(t, time.Hour, cfg.ExecPolicy.MaxTimeout)
	t.Setenv("AIRLOCK_WORKER_CONCURRENCY", "4")
	t.Setenv("AIRLOCK_MAX_TIMEOUT_S", "600")
	cfg, err = app.FromEnv([]string{"-sandbox-disk-mb", "64", "-default-workspace", "/srv/ws"})
	require.NoError(t, err)
	assert.Equal(t, worker.HostSettings{Concurrency: 4, DiskMB: 64, Inodes: 100000}, cfg.Host)
	assert.Equal(t, 10*time.Minute, cfg.ExecPolicy.MaxTimeout)
	assert.Equal(t, "/srv/ws", cfg.DefaultWorkspace)
	assert.Equal(t, 1<<20, cfg.MCPMaxResultBytes, "the MCP gateway's result limit has a default")
	t.Setenv("AIRLOCK_MCP_MAX_RESULT_BYTES", "4096")
	cfg, err = app.FromEnv(nil)
	require.NoError(t, err)
	assert.Equal(t, 4096, cfg.MCPMaxResultBytes)
	t.Setenv("AIRLOCK_MCP_MAX_RESULT_BYTES", "")
	for _, bad := range []string{"1000", "9000000", "lots"} {
		t.Setenv("AIRLOCK_MCP_MAX_RESULT_BYTES", bad)
		_, err = app.FromEnv(nil)
		assert.Error(t, err, "AIRLOCK_MCP_MAX_RESULT_BYTES=%s", bad)
	}
	t.Setenv("AIRLOCK_MCP_MAX_RESULT_BYTES", "")
	// The per-caller caps on long polls and streams: defaults, the
	// environment, flags over it; only positive whole numbers.
	assert.Equal(t, []int{64, 32}, []int{cfg.MaxLongPolls, cfg.MaxStreams})
	t.Setenv("AIRLOCK_MAX_LONG_POLLS", "10")
	t.Setenv("AIRLOCK_MAX_STREAMS", "5")
	cfg, err = app.FromEnv(nil)
	require.NoError(t, err)
	assert.Equal(t, []int{10, 5}, []int{cfg.MaxLongPolls, cfg.MaxStreams})
	cfg, err = app.FromEnv([]string{"-max-long-polls", "7", "-max-streams", "3"})
	require.NoError(t, err)
	assert.Equal(t, []int{7, 3}, []int{cfg.MaxLongPolls, cfg.MaxStreams})
	_, err = app.FromEnv([]string{"-max-streams", "-1"})
	assert.Error(t, err)
	for _, name := range []string{"AIRLOCK_MAX_LONG_POLLS", "AIRLOCK_MAX_STREAMS"} {
		for _, bad := range []string{"0", "-3", "lots"} {
			t.Setenv(name, bad)
			_, err = app.FromEnv(nil)
			assert.Error(t, err, "%s=%s", name, bad)
		}
		t.Setenv(name, "")
	}
	for name, bad := range map[string]string{"AIRLOCK_WORKER_CONCURRENCY": "0", "AIRLOCK_SANDBOX_DISK_MB": "lots", "AIRLOCK_MAX_TIMEOUT_S": "100000"} {
		t.Setenv(name, bad)
		_, err = app.FromEnv(nil)
		assert.Error(t, err, "%s=%s", name, bad)
		t.Setenv(name, "")
	}

	t.Setenv("AIRLOCK_WORKER", "sometimes")
	_, err = app.FromEnv(nil)
	assert.Error(t, err)
}

// TestSecureCookies: behind a TLS-terminating proxy the server sees plain
// HTTP, so AIRLOCK_SECURE_COOKIES marks every cookie it sets Secure: the
// API's session cookie and the console's login cookies. Without it, plain
// HTTP gets cookies a browser also sends over plain HTTP.
func TestSecureCookies(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{false, true} {
		env := apptest.Start(t, apptest.Options{SecureCookies: secure})
		var cookies []*http.Cookie
		resp, err := http.Post(env.URL+"/api/v1/auth/login", "application/json",
			strings.NewReader(`{"username":"admin","password":"`+apptest.AdminPassword+`"}`))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		cookies = append(cookies, resp.Cookies()...)
		resp, err = http.Get(env.URL + "/ui/login")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		cookies = append(cookies, resp.Cookies()...)
		require.Len(t, cookies, 2, "the session cookie and the console's login cookie")
		for _, c := range cookies {
			assert.Equal(t, secure, c.Secure, "cookie %s with SecureCookies %v", c.Name, secure)
			assert.True(t, c.HttpOnly, c.Name)
		}
	}
}

// TestShutdownAnswersLongPolls: a shutdown does not wait out long polls;
// they answer at once with the action as it is.
func TestShutdownAnswersLongPolls(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("waiter", map[string]any{"rules": []map[string]any{{"id": "ask", "tool": "email.send", "effect": "approve"}}})
	ctx := context.Background()
	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{}})
	require.NoError(t, err)

	got := make(chan int, 1)
	go func() {
		status, _ := agent.Do(ctx, http.MethodGet, "/api/v1/actions/"+a.ID+"?wait=60s", nil, nil)
		got <- status
	}()
	time.Sleep(200 * time.Millisecond)
	env.Stop()
	select {
	case status := <-got:
		assert.Equal(t, http.StatusOK, status)
	case <-time.After(30 * time.Second): // the poll asked for 60 s
		t.Fatal("the long poll held the shutdown")
	}
}

// TestSeveralInstances: two servers on one database and one signing key.
func TestSeveralInstances(t *testing.T) {
	t.Parallel()
	one := apptest.Start(t)
	two := apptest.Start(t, apptest.Options{DatabaseURL: one.DBURL, DataDir: one.Config.DataDir})
	ctx := one.Ctx()
	agentOne := one.Agent("fleet-bot", map[string]any{"rules": []map[string]any{{"id": "ask", "tool": "email.send", "effect": "approve"}}})
	aliceOne := one.Reviewer("alice")
	aliceTwo := client.New(two.URL, aliceOne.Token())
	bobTwo := two.Reviewer("bob")

	t.Run("a long poll on one instance wakes for a decision on the other", func(t *testing.T) {
		a, err := agentOne.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{}})
		require.NoError(t, err)
		full, err := aliceTwo.Get(ctx, a.ID)
		require.NoError(t, err, "a session from instance one works on instance two")
		done := make(chan *client.Action, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			got, err := agentOne.Wait(wctx, a.ID)
			assert.NoError(t, err)
			done <- got
		}()
		time.Sleep(200 * time.Millisecond)
		_, err = bobTwo.Approve(ctx, a.ID, full.ConfirmationPhrase, "")
		require.NoError(t, err)
		select {
		case got := <-done:
			assert.Equal(t, "approved", got.Status)
		case <-time.After(20 * time.Second): // unwoken, its poll would last its whole wait
			t.Fatal("the waiter on instance one was not woken")
		}
	})

	t.Run("concurrent approvals across instances: exactly one wins", func(t *testing.T) {
		a, err := agentOne.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"n": 2}})
		require.NoError(t, err)
		full, err := aliceOne.Get(ctx, a.ID)
		require.NoError(t, err)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 40 {
			c := aliceOne
			if i%2 == 1 {
				c = aliceTwo
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.Approve(ctx, a.ID, full.ConfirmationPhrase, ""); err == nil {
					wins.Add(1)
				} else {
					assert.Equal(t, http.StatusConflict, client.StatusOf(err))
				}
			}()
		}
		wg.Wait()
		assert.EqualValues(t, 1, wins.Load())
	})

	t.Run("a revocation on one instance holds on the other", func(t *testing.T) {
		tok, err := two.Admin.IssueAgentToken(ctx, "fleet-bot", 0)
		require.NoError(t, err)
		onOne := client.New(one.URL, tok.Token)
		_, err = onOne.Submit(ctx, client.SubmitRequest{Tool: "fs.read", Args: map[string]any{}})
		require.NoError(t, err)
		require.NoError(t, two.Admin.RevokeToken(ctx, tok.TokenID))
		_, err = onOne.Submit(ctx, client.SubmitRequest{Tool: "fs.read", Args: map[string]any{}})
		assert.Equal(t, http.StatusUnauthorized, client.StatusOf(err))
		_, err = onOne.Get(ctx, "00000000-0000-0000-0000-000000000000")
		assert.Equal(t, http.StatusUnauthorized, client.StatusOf(err))
	})

	t.Run("a logout on one instance holds on the other", func(t *testing.T) {
		carol := one.Reviewer("carol")
		carolTwo := client.New(two.URL, carol.Token())
		_, err := carolTwo.Do(ctx, http.MethodGet, "/api/v1/actions", nil, nil)
		require.NoError(t, err)
		_, err = carol.Do(ctx, http.MethodPost, "/api/v1/auth/logout", nil, nil)
		require.NoError(t, err)
		_, err = carolTwo.Do(ctx, http.MethodGet, "/api/v1/actions", nil, nil)
		assert.Equal(t, http.StatusUnauthorized, client.StatusOf(err))
	})
}

// TestExpiryWithSeveralInstances: two instances sweep the same database
// every few milliseconds; each action expires once, audited once.
func TestExpiryWithSeveralInstances(t *testing.T) {
	t.Parallel()
	one := apptest.Start(t, apptest.Options{ExpiryEvery: 3 * time.Millisecond})
	two := apptest.Start(t, apptest.Options{DatabaseURL: one.DBURL, DataDir: one.Config.DataDir, ExpiryEvery: 3 * time.Millisecond})
	ctx := one.Ctx()
	agent := one.Agent("brief", map[string]any{"rules": []map[string]any{{"id": "ask", "tool": "email.send", "effect": "approve", "timeout": "1s"}}})
	var ids []string
	for i := range 30 {
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"n": i}})
		require.NoError(t, err)
		ids = append(ids, a.ID)
	}
	onTwo := client.New(two.URL, agent.Token())
	for _, id := range ids {
		got, err := onTwo.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "expired", got.Status)
	}
	for _, id := range ids {
		page, err := one.Admin.Audit(ctx, url.Values{"action_id": {id}, "kind": {"action.expired"}})
		require.NoError(t, err)
		assert.Len(t, page.Events, 1, "action %s expired once", id)
	}
}

// TestShutdownReportsTheEmbeddedWorkersJob: a job the embedded worker is
// running when the server shuts down is stopped and its outcome recorded
// before the API goes away, not left leased until its lease runs out.
func TestShutdownReportsTheEmbeddedWorkersJob(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	pol := sandbox.DefaultPolicy()
	require.NoError(t, pol.Enable("sleep"))
	env := apptest.Start(t, apptest.Options{Worker: "embedded", ExecPolicy: &pol})
	agent := env.Agent("sleeper", map[string]any{
		"rules":    []map[string]any{{"id": "run", "tool": "exec", "effect": "allow"}},
		"settings": map[string]any{"escalate_at": "none"},
	})
	ctx := env.Ctx()
	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{"argv": []any{"sleep", "30"}, "workspace": "default"}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := agent.Get(ctx, a.ID)
		return err == nil && got.Status == "running"
	}, 30*time.Second, 20*time.Millisecond)

	env.Stop()
	env.Restart()
	got, err := agent.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, "failed", got.Status)
	assert.Contains(t, string(got.Result), "cancel", "stopped by the shutdown (during set-up or the run)")
	page, err := env.Admin.Audit(ctx, url.Values{"action_id": {a.ID}})
	require.NoError(t, err)
	var kinds []string
	for _, e := range page.Events {
		kinds = append(kinds, e.Kind)
	}
	assert.Equal(t, []string{"action.submitted", "action.running", "action.result"}, kinds, "recorded at shutdown, not expired later")
}

// TestEmbeddedWorkerTokenIsReused: the embedded worker keeps its token in
// the data dir (mode 0600) and reuses it across restarts while it is
// active and serves the same targets; when the targets change it mints a
// new one and revokes the old, so restarts never pile up live tokens.
func TestEmbeddedWorkerTokenIsReused(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	ws := t.TempDir()
	require.NoError(t, os.Chmod(ws, 0o755))
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Workspaces: map[string]string{"main": ws}})
	path := filepath.Join(env.Config.DataDir, "worker.token")
	kept := func() string {
		t.Helper()
		fi, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		var k struct{ ID string }
		require.NoError(t, json.Unmarshal(b, &k))
		require.NotEmpty(t, k.ID)
		return k.ID
	}
	type tokenRow struct {
		id      string
		active  bool
		targets []string
	}
	tokens := func() []tokenRow {
		t.Helper()
		rows, err := env.App.Pool().Query(env.Ctx(), `SELECT id, revoked_at IS NULL AND expires_at > now(), targets
			FROM tokens WHERE kind = 'worker' AND subject = 'embedded' ORDER BY issued_at, id`)
		require.NoError(t, err)
		defer rows.Close()
		var out []tokenRow
		for rows.Next() {
			var r tokenRow
			require.NoError(t, rows.Scan(&r.id, &r.active, &r.targets))
			out = append(out, r)
		}
		require.NoError(t, rows.Err())
		return out
	}
	agent := env.Agent("runner", map[string]any{
		"rules":    []map[string]any{{"id": "run", "tool": "exec", "effect": "allow"}},
		"settings": map[string]any{"escalate_at": "none"},
	})
	runs := func(workspace string) {
		t.Helper()
		a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "exec", Args: map[string]any{"argv": []any{"ls"}, "workspace": workspace}})
		require.NoError(t, err)
		require.Equal(t, "approved", a.Status, "%+v", a.Decision)
		require.Eventually(t, func() bool {
			got, err := agent.Get(env.Ctx(), a.ID)
			return err == nil && got.Status == "succeeded"
		}, 60*time.Second, 20*time.Millisecond, "the embedded worker runs the exec")
	}

	first := kept()
	runs("main")
	env.Restart()
	assert.Equal(t, first, kept(), "the same token after a restart")
	assert.Equal(t, []tokenRow{{first, true, []string{"workspace:main"}}}, tokens())
	runs("main") // the reused token still leases

	env.Config.Workspaces = map[string]string{"main": ws, "docs": ws}
	env.Restart()
	second := kept()
	assert.NotEqual(t, first, second, "other targets: a new token")
	assert.Equal(t, []tokenRow{{first, false, []string{"workspace:main"}}, {second, true, []string{"workspace:docs", "workspace:main"}}}, tokens(),
		"the previous token is revoked")
	runs("docs")
}

// TestTrustedProxiesConfig: AIRLOCK_TRUSTED_PROXIES is a list of CIDRs, the
// flag overrides it, and a bad entry stops the start.
func TestTrustedProxiesConfig(t *testing.T) {
	t.Setenv("AIRLOCK_DATA_DIR", t.TempDir())
	cfg, err := app.FromEnv(nil)
	require.NoError(t, err)
	assert.Empty(t, cfg.TrustedProxies, "none by default: the peer is the client")

	t.Setenv("AIRLOCK_TRUSTED_PROXIES", "10.0.0.0/8, 127.0.0.1")
	cfg, err = app.FromEnv(nil)
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}, cfg.TrustedProxies)

	cfg, err = app.FromEnv([]string{"-trusted-proxies", "192.168.0.0/16"})
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}, cfg.TrustedProxies, "the flag overrides")

	t.Setenv("AIRLOCK_TRUSTED_PROXIES", "10.0.0.0/40")
	_, err = app.FromEnv(nil)
	assert.ErrorContains(t, err, "AIRLOCK_TRUSTED_PROXIES")
}

// TestAuditPreviousKeysConfig: AIRLOCK_AUDIT_PREVIOUS_KEYS is a list of
// base64 public keys, oldest first; a malformed or repeated one stops the
// start, and so does the current key listed as a previous one.
func TestAuditPreviousKeysConfig(t *testing.T) {
	t.Setenv("AIRLOCK_DATA_DIR", t.TempDir())
	cfg, err := app.FromEnv(nil)
	require.NoError(t, err)
	assert.Empty(t, cfg.AuditPreviousKeys)

	newKey := func() (ed25519.PublicKey, []byte) {
		seed := make([]byte, ed25519.SeedSize)
		_, _ = rand.Read(seed)
		return ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey), seed
	}
	k1, _ := newKey()
	k2, _ := newKey()
	b64 := base64.StdEncoding.EncodeToString
	t.Setenv("AIRLOCK_AUDIT_PREVIOUS_KEYS", b64(k1)+", "+b64(k2))
	cfg, err = app.FromEnv(nil)
	require.NoError(t, err)
	assert.Equal(t, []ed25519.PublicKey{k1, k2}, cfg.AuditPreviousKeys, "in the order given")
	cfg, err = app.FromEnv([]string{"-audit-previous-keys", b64(k2)})
	require.NoError(t, err)
	assert.Equal(t, []ed25519.PublicKey{k2}, cfg.AuditPreviousKeys, "the flag overrides")

	for _, bad := range []string{"AAAA", b64(k1) + "," + b64(k1), "not base64!"} {
		t.Setenv("AIRLOCK_AUDIT_PREVIOUS_KEYS", bad)
		_, err = app.FromEnv(nil)
		assert.ErrorContains(t, err, "AIRLOCK_AUDIT_PREVIOUS_KEYS", bad)
	}

	// The current key listed as a previous one: the server does not start.
	current, seed := newKey()
	keyFile := filepath.Join(t.TempDir(), "audit.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(hex.EncodeToString(seed)), 0o600))
	t.Setenv("AIRLOCK_AUDIT_PREVIOUS_KEYS", b64(k1)+","+b64(current))
	t.Setenv("AIRLOCK_AUDIT_KEY_FILE", keyFile)
	t.Setenv("AIRLOCK_DATABASE_URL", testdb.URL(t))
	t.Setenv("AIRLOCK_WORKER", "off")
	t.Setenv("AIRLOCK_ADDR", "127.0.0.1:0")
	cfg, err = app.FromEnv(nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := app.Start(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if a != nil {
		a.Shutdown(ctx)
	}
	require.ErrorContains(t, err, "AIRLOCK_AUDIT_PREVIOUS_KEYS lists the current audit key")
}
