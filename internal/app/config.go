// Package app wires an Airlock server from its configuration: the database
// (embedded or external), migrations, the admin bootstrap, the services and
// the HTTP listener. cmd/server runs it; end-to-end tests boot it on :0.
package app

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/clientip"
	"github.com/airlockhq/airlock/internal/connlimit"
	"github.com/airlockhq/airlock/internal/mcp"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/sso"
	"github.com/airlockhq/airlock/internal/worker"
)

// Config is the server's configuration. Environment variables come first;
// flags of the same name (lowercase, dashes) override them.
type Config struct {
	Addr          string        // AIRLOCK_ADDR, default 127.0.0.1:8080
	DatabaseURL   string        // AIRLOCK_DATABASE_URL; empty = embedded cluster under DataDir/pg
	DataDir       string        // AIRLOCK_DATA_DIR, default ./.airlock
	AdminPassword string        // AIRLOCK_ADMIN_PASSWORD, used when no user exists yet
	JWTKeyFile    string        // AIRLOCK_JWT_KEY_FILE, default DataDir/jwt.key
	Worker        string        // AIRLOCK_WORKER: embedded (default) or off
	LogRequests   bool          // AIRLOCK_LOG_REQUESTS: one log line per request
	SecureCookies bool          // AIRLOCK_SECURE_COOKIES: cookies marked Secure even over plain HTTP (behind a TLS proxy)
	ExpiryEvery   time.Duration // how often pending actions and worker leases are checked for expiry
	LeaseTTL      time.Duration // worker lease length (default hitl.DefaultLeaseTTL)
	AuditKeyFile  string        // AIRLOCK_AUDIT_KEY_FILE: checkpoint signing key (Ed25519 seed), default DataDir/audit.key
	// AuditPreviousKeys are the public keys of the audit keys AuditKeyFile's
	// replaced, oldest first (AIRLOCK_AUDIT_PREVIOUS_KEYS, comma-separated
	// base64): the checkpoints they signed before the rotation still verify.
	AuditPreviousKeys []ed25519.PublicKey
	// AuditSealEvery is how often the audit sealer runs (0: 250ms; negative:
	// not at all, for benchmarks that measure what sealing costs).
	AuditSealEvery time.Duration
	// Workspaces are the embedded worker's workspaces (AIRLOCK_WORKSPACES,
	// name=/path,…); empty = one workspace "default" at DefaultWorkspace.
	Workspaces map[string]string
	// DefaultWorkspace is where the workspace "default" lives when
	// Workspaces is empty (AIRLOCK_DEFAULT_WORKSPACE). It is outside the
	// data dir, away from PostgreSQL's files: by default
	// <user cache dir>/airlock/workspaces/<hash of DataDir>/default.
	DefaultWorkspace string
	// Host bounds the embedded worker: jobs at once and each run's disk
	// (AIRLOCK_WORKER_CONCURRENCY, AIRLOCK_SANDBOX_DISK_MB,
	// AIRLOCK_SANDBOX_INODES); zero fields take the defaults.
	Host worker.HostSettings
	// Repos are the embedded worker's git repositories (AIRLOCK_REPOS);
	// their worktrees live under DataDir/worktrees.
	Repos map[string]string
	// ExecPolicy is the exec allowlist used to validate at submit and by
	// the embedded worker (AIRLOCK_EXEC_COMMANDS, AIRLOCK_EXEC_ALLOW_SHELL,
	// AIRLOCK_EXEC_ALLOW_NETWORK); nil = the default allowlist.
	ExecPolicy *sandbox.Policy
	// MetricsToken, when set, is the bearer token /metrics requires
	// (AIRLOCK_METRICS_TOKEN); empty leaves /metrics open.
	MetricsToken string
	// TrustedProxies are the proxies whose X-Forwarded-For names the client
	// (AIRLOCK_TRUSTED_PROXIES, comma-separated CIDRs); empty = the TCP peer
	// is always the client.
	TrustedProxies []netip.Prefix
	// MCPMaxResultBytes is the JSON size of a tool result beyond which the
	// MCP gateway truncates what the model gets (AIRLOCK_MCP_MAX_RESULT_BYTES;
	// 0 = mcp.DefaultMaxResultBytes; 1 KiB to mcp.MaxResultBytes).
	MCPMaxResultBytes int
	// PublicURL is where browsers reach the server (AIRLOCK_PUBLIC_URL,
	// e.g. https://airlock.example.com behind a proxy); empty = http:// and
	// the listen address. Single sign-on's redirect URL and the links in
	// notifications are built on it.
	PublicURL string
	// OIDC is single sign-on through an OpenID Connect provider
	// (AIRLOCK_OIDC_*); an empty Issuer leaves it off.
	OIDC sso.Config
	// PGSettings are extra postgresql.conf settings for the embedded cluster
	// (benchmarks use it to preload pg_stat_statements).
	PGSettings map[string]string
	// SMTPAddr is the SMTP server (host:port) email notifications are sent
	// through (AIRLOCK_SMTP_ADDR); empty = email targets fail.
	SMTPAddr string
	// SMTPFrom is their sender address (AIRLOCK_SMTP_FROM, default
	// airlock@<host of the public URL>).
	SMTPFrom string
	// NotifyEvery is how often the notification outbox is polled (0: 250ms).
	NotifyEvery time.Duration
	// MaxLongPolls is how many long polls one caller (an agent, a user, a
	// worker) may hold open at once on this instance: GET
	// /api/v1/actions/{id}?wait=, a worker's lease with wait, the MCP
	// gateway's gated calls (AIRLOCK_MAX_LONG_POLLS; 0: 64).
	MaxLongPolls int
	// MaxStreams is the same for streams: /api/v1/stream websockets and
	// the MCP gateway's GET event streams (AIRLOCK_MAX_STREAMS; 0: 32).
	MaxStreams int
}

// FromEnv reads the configuration from the environment and args.
func FromEnv(args []string) (Config, error) {
	c := Config{
		Addr:          env("AIRLOCK_ADDR", "127.0.0.1:8080"),
		DatabaseURL:   os.Getenv("AIRLOCK_DATABASE_URL"),
		DataDir:       env("AIRLOCK_DATA_DIR", ".airlock"),
		AdminPassword: os.Getenv("AIRLOCK_ADMIN_PASSWORD"),
		JWTKeyFile:    os.Getenv("AIRLOCK_JWT_KEY_FILE"),
		AuditKeyFile:  os.Getenv("AIRLOCK_AUDIT_KEY_FILE"),
		Worker:        env("AIRLOCK_WORKER", "embedded"),
		LogRequests:   os.Getenv("AIRLOCK_LOG_REQUESTS") == "true",
		SecureCookies: os.Getenv("AIRLOCK_SECURE_COOKIES") == "true",
		MetricsToken:  os.Getenv("AIRLOCK_METRICS_TOKEN"),
		ExpiryEvery:   time.Second,
		PublicURL:     os.Getenv("AIRLOCK_PUBLIC_URL"),
		SMTPAddr:      os.Getenv("AIRLOCK_SMTP_ADDR"),
		SMTPFrom:      os.Getenv("AIRLOCK_SMTP_FROM"),

		DefaultWorkspace: os.Getenv("AIRLOCK_DEFAULT_WORKSPACE"),
	}
	oidcCfg, err := sso.ConfigFromEnv()
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	c.OIDC = oidcCfg
	host, err := worker.HostSettingsFromEnv()
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	c.Host = host
	pol, err := worker.PolicyFromEnv()
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	maxTimeout := int(pol.MaxTimeout / time.Second)
	fs := flag.NewFlagSet("airlock-server", flag.ContinueOnError)
	fs.StringVar(&c.Addr, "addr", c.Addr, "listen address (AIRLOCK_ADDR)")
	fs.StringVar(&c.DatabaseURL, "database-url", c.DatabaseURL, "Postgres URL; empty starts an embedded cluster (AIRLOCK_DATABASE_URL)")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "data directory (AIRLOCK_DATA_DIR)")
	fs.StringVar(&c.JWTKeyFile, "jwt-key-file", c.JWTKeyFile, "token signing key, generated when absent (AIRLOCK_JWT_KEY_FILE)")
	fs.StringVar(&c.AuditKeyFile, "audit-key-file", c.AuditKeyFile, "audit checkpoint signing key, generated when absent (AIRLOCK_AUDIT_KEY_FILE)")
	fs.StringVar(&c.Worker, "worker", c.Worker, "embedded or off (AIRLOCK_WORKER)")
	fs.BoolVar(&c.LogRequests, "log-requests", c.LogRequests, "log every request (AIRLOCK_LOG_REQUESTS)")
	fs.BoolVar(&c.SecureCookies, "secure-cookies", c.SecureCookies, "mark cookies Secure: the console is reached over HTTPS through a proxy (AIRLOCK_SECURE_COOKIES)")
	fs.StringVar(&c.PublicURL, "public-url", c.PublicURL, "where browsers reach the server, for single sign-on's redirect URL and the links in notifications (AIRLOCK_PUBLIC_URL)")
	fs.StringVar(&c.DefaultWorkspace, "default-workspace", c.DefaultWorkspace, "the embedded worker's workspace \"default\" when AIRLOCK_WORKSPACES is empty (AIRLOCK_DEFAULT_WORKSPACE)")
	fs.IntVar(&c.Host.Concurrency, "worker-concurrency", c.Host.Concurrency, "jobs the embedded worker runs at once (AIRLOCK_WORKER_CONCURRENCY)")
	fs.Int64Var(&c.Host.DiskMB, "sandbox-disk-mb", c.Host.DiskMB, "size bound of a run's workspace, MiB (AIRLOCK_SANDBOX_DISK_MB)")
	fs.Int64Var(&c.Host.Inodes, "sandbox-inodes", c.Host.Inodes, "file count bound of a run's workspace (AIRLOCK_SANDBOX_INODES)")
	fs.IntVar(&maxTimeout, "max-timeout-s", maxTimeout, "longest timeout_s an exec may ask for; more is denied at submit (AIRLOCK_MAX_TIMEOUT_S)")
	if v := os.Getenv("AIRLOCK_MCP_MAX_RESULT_BYTES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return c, fmt.Errorf("config: AIRLOCK_MCP_MAX_RESULT_BYTES: %w", err)
		}
		c.MCPMaxResultBytes = n
	}
	fs.IntVar(&c.MCPMaxResultBytes, "mcp-max-result-bytes", c.MCPMaxResultBytes, "JSON size of an MCP tool result beyond which the gateway truncates it (AIRLOCK_MCP_MAX_RESULT_BYTES)")
	for _, v := range []struct {
		name string
		to   *int
	}{{"AIRLOCK_MAX_LONG_POLLS", &c.MaxLongPolls}, {"AIRLOCK_MAX_STREAMS", &c.MaxStreams}} {
		if s := os.Getenv(v.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return c, fmt.Errorf("config: %s must be a positive whole number, not %q", v.name, s)
			}
			*v.to = n
		}
	}
	fs.IntVar(&c.MaxLongPolls, "max-long-polls", c.MaxLongPolls, "long polls one caller may hold open at once on this instance (AIRLOCK_MAX_LONG_POLLS, default 64)")
	fs.IntVar(&c.MaxStreams, "max-streams", c.MaxStreams, "streams (websockets, MCP event streams) one caller may hold open at once on this instance (AIRLOCK_MAX_STREAMS, default 32)")
	fs.StringVar(&c.SMTPAddr, "smtp-addr", c.SMTPAddr, "SMTP server host:port for email notifications (AIRLOCK_SMTP_ADDR)")
	fs.StringVar(&c.SMTPFrom, "smtp-from", c.SMTPFrom, "sender address of email notifications (AIRLOCK_SMTP_FROM)")
	previousKeys := os.Getenv("AIRLOCK_AUDIT_PREVIOUS_KEYS")
	fs.StringVar(&previousKeys, "audit-previous-keys", previousKeys, "public keys (base64, comma-separated, oldest first) of the audit keys the current one replaced: their checkpoints still verify (AIRLOCK_AUDIT_PREVIOUS_KEYS)")
	proxies := os.Getenv("AIRLOCK_TRUSTED_PROXIES")
	fs.StringVar(&proxies, "trusted-proxies", proxies, "comma-separated CIDRs of proxies whose X-Forwarded-For is believed (AIRLOCK_TRUSTED_PROXIES)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if maxTimeout < 1 || maxTimeout > 86400 {
		return c, fmt.Errorf("config: max-timeout-s must be between 1 and 86400")
	}
	pol.MaxTimeout = time.Duration(maxTimeout) * time.Second
	if c.AuditPreviousKeys, err = audit.ParsePublicKeys(previousKeys); err != nil {
		return c, fmt.Errorf("config: AIRLOCK_AUDIT_PREVIOUS_KEYS: %w", err)
	}
	tp, err := clientip.ParsePrefixes(proxies)
	if err != nil {
		return c, fmt.Errorf("config: AIRLOCK_TRUSTED_PROXIES: %w", err)
	}
	c.TrustedProxies = tp
	ws, err := worker.ParseDirs(os.Getenv("AIRLOCK_WORKSPACES"))
	if err != nil {
		return c, fmt.Errorf("config: AIRLOCK_WORKSPACES: %w", err)
	}
	c.Workspaces = ws
	if c.Repos, err = worker.ParseDirs(os.Getenv("AIRLOCK_REPOS")); err != nil {
		return c, fmt.Errorf("config: AIRLOCK_REPOS: %w", err)
	}
	c.ExecPolicy = &pol
	return c, c.normalise()
}

func (c *Config) normalise() error {
	if c.DataDir == "" {
		return fmt.Errorf("config: data dir is empty")
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return fmt.Errorf("config: data dir: %w", err)
	}
	c.DataDir = abs
	if c.JWTKeyFile == "" {
		c.JWTKeyFile = filepath.Join(c.DataDir, "jwt.key")
	}
	if c.AuditKeyFile == "" {
		c.AuditKeyFile = filepath.Join(c.DataDir, "audit.key")
	}
	switch c.Worker {
	case "embedded", "off":
	default:
		return fmt.Errorf("config: AIRLOCK_WORKER must be embedded or off, not %q", c.Worker)
	}
	if c.ExpiryEvery <= 0 {
		c.ExpiryEvery = time.Second
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("config: AIRLOCK_PUBLIC_URL must be an http(s) URL such as https://airlock.example.com, not %q", c.PublicURL)
		}
		c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	}
	if c.ExecPolicy == nil {
		pol := sandbox.DefaultPolicy()
		c.ExecPolicy = &pol
	}
	if c.Host.Concurrency <= 0 {
		c.Host.Concurrency = worker.DefaultConcurrency
	}
	if c.Host.DiskMB <= 0 {
		c.Host.DiskMB = worker.DefaultDiskMB
	}
	if c.Host.Inodes <= 0 {
		c.Host.Inodes = worker.DefaultInodes
	}
	if c.MCPMaxResultBytes == 0 {
		c.MCPMaxResultBytes = mcp.DefaultMaxResultBytes
	}
	if c.MaxLongPolls == 0 {
		c.MaxLongPolls = connlimit.DefaultMaxLongPolls
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = connlimit.DefaultMaxStreams
	}
	if c.MaxLongPolls < 0 || c.MaxStreams < 0 {
		return fmt.Errorf("config: AIRLOCK_MAX_LONG_POLLS and AIRLOCK_MAX_STREAMS must be positive")
	}
	if err := mcp.CheckMaxResultBytes(c.MCPMaxResultBytes); err != nil {
		return fmt.Errorf("config: AIRLOCK_MCP_MAX_RESULT_BYTES %w", err)
	}
	if c.DefaultWorkspace == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		sum := sha256.Sum256([]byte(c.DataDir))
		c.DefaultWorkspace = filepath.Join(cache, "airlock", "workspaces", hex.EncodeToString(sum[:6]), "default")
	}
	if !filepath.IsAbs(c.DefaultWorkspace) {
		return fmt.Errorf("config: the default workspace must be an absolute path")
	}
	return nil
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}
