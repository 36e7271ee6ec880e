// Package testdb gives each test a fresh PostgreSQL database with every
// migration applied, cloned from a template database by pgtestdb (a clone
// takes milliseconds; the migrations run once per test binary).
//
// The databases live in one embedded cluster per test binary ([pgembed],
// Durable=false), started lazily on first use in a temporary directory. A
// package using testdb should stop it at exit from TestMain:
//
//	func TestMain(m *testing.M) { testdb.Main(m) }
//
// Without that, the cluster still shuts down when the test process exits
// (parent-death signal), but its temporary directory is left behind.
//
// When AIRLOCK_TEST_DATABASE_URL is set (a postgres:// URL of a role allowed
// to create roles and databases), that server is used instead and no cluster
// is started.
package testdb

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver pgtestdb uses
	"github.com/peterldowns/pgtestdb"

	"github.com/airlockhq/airlock/internal/pgembed"
	"github.com/airlockhq/airlock/migrations"
)

// EnvURL names the environment variable that points the tests at an external
// PostgreSQL server instead of an embedded cluster.
const EnvURL = "AIRLOCK_TEST_DATABASE_URL"

var (
	once     sync.Once
	baseConf pgtestdb.Config
	setupErr error

	mu         sync.Mutex // guards cluster and clusterDir
	cluster    *pgembed.Cluster
	clusterDir string
)

func sharedCluster() (*pgembed.Cluster, string) {
	mu.Lock()
	defer mu.Unlock()
	return cluster, clusterDir
}

// setup resolves the server to use, starting the embedded cluster the first
// time it is called.
func setup() (pgtestdb.Config, error) {
	once.Do(func() {
		// The migrations create the role the server runs as (airlock_app):
		// the test role may create roles, as the role migrating a real
		// database must (README "Audit trail").
		defer func() {
			baseConf.TestRole = &pgtestdb.Role{Username: pgtestdb.DefaultRoleUsername,
				Password: pgtestdb.DefaultRolePassword, Capabilities: "NOSUPERUSER NOCREATEDB CREATEROLE"}
		}()
		if raw := os.Getenv(EnvURL); raw != "" {
			baseConf, setupErr = configFromURL(raw)
			if setupErr != nil {
				setupErr = fmt.Errorf("testdb: %s: %w", EnvURL, setupErr)
			}
			return
		}
		var c *pgembed.Cluster
		if c, setupErr = startCluster(); setupErr == nil {
			baseConf = pgtestdb.Config{
				DriverName: "pgx",
				User:       pgembed.SuperUser,
				Database:   "postgres",
				Options:    socketOptions(c),
			}
		}
	})
	return baseConf, setupErr
}

func startCluster() (*pgembed.Cluster, error) {
	base := clusterBaseDir()
	removeStaleClusters(base)
	dir, err := os.MkdirTemp(base, clusterDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("testdb: %w", err)
	}
	// Traversable by the unprivileged user PostgreSQL runs as under root.
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("testdb: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgembed.Start(ctx, pgembed.Options{Dir: dir, Durable: false})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("testdb: starting the embedded PostgreSQL cluster "+
			"(needs the PostgreSQL server binaries, or set %s): %w", EnvURL, err)
	}
	mu.Lock()
	cluster, clusterDir = c, dir
	mu.Unlock()
	return c, nil
}

const clusterDirPrefix = "airlock-testdb-"

// clusterBaseDir is where test clusters live: /dev/shm when it is a tmpfs
// with room to spare, because cloning a database creates ~300 files and on
// a disk file system that dominates the cost of every New (about 10x slower
// than on tmpfs, even with fsync off); otherwise the temporary directory.
func clusterBaseDir() string {
	const tmpfsMagic = 0x01021994
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err == nil && st.Type == tmpfsMagic &&
		st.Bavail*uint64(st.Bsize) >= 1<<30 && syscall.Access("/dev/shm", 0o2 /* W_OK */) == nil {
		return "/dev/shm"
	}
	return os.TempDir()
}

// removeStaleClusters deletes test cluster directories left behind by test
// binaries that exited without Main (their postmaster is gone). Recent
// directories are spared: another binary may be initialising one.
func removeStaleClusters(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), clusterDirPrefix) {
			continue
		}
		if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < 10*time.Minute {
			continue
		}
		dir := filepath.Join(base, e.Name())
		if b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid")); err == nil {
			line, _, _ := strings.Cut(string(b), "\n")
			if pid, err := strconv.Atoi(strings.TrimSpace(line)); err == nil && pid > 0 &&
				!errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
				continue // still running
			}
		}
		_ = os.RemoveAll(dir)
	}
}

// socketOptions returns the URL query that makes pgtestdb's connection URLs
// (postgres://user:pass@:/db?Options, empty host and port) reach the
// cluster's unix socket: pgx, like libpq, takes host and port from the query.
func socketOptions(c *pgembed.Cluster) string {
	u, _ := url.Parse(c.URL("postgres"))
	return u.RawQuery
}

// configFromURL turns a postgres:// URL into a pgtestdb.Config. Host and
// port go into Options (the query), so unix-socket and multi-host URLs
// survive pgtestdb's URL formatting.
func configFromURL(raw string) (pgtestdb.Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return pgtestdb.Config{}, err
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return pgtestdb.Config{}, fmt.Errorf("want a postgres:// URL, got scheme %q", u.Scheme)
	}
	q := u.Query()
	conf := pgtestdb.Config{DriverName: "pgx", Database: strings.TrimPrefix(u.Path, "/")}
	if u.User != nil {
		conf.User = u.User.Username()
		conf.Password, _ = u.User.Password()
	}
	if v := q.Get("user"); v != "" {
		conf.User = v
	}
	if v := q.Get("password"); v != "" {
		conf.Password = v
	}
	if v := q.Get("dbname"); v != "" {
		conf.Database = v
	}
	q.Del("user")
	q.Del("password")
	q.Del("dbname")
	if conf.Database == "" {
		conf.Database = "postgres"
	}
	if h := u.Hostname(); h != "" && !q.Has("host") {
		q.Set("host", h)
	}
	if p := u.Port(); p != "" && !q.Has("port") {
		q.Set("port", p)
	}
	// pgtestdb pastes User and Password into the URL verbatim.
	conf.User = url.User(conf.User).String()
	conf.Password = url.User(conf.Password).String()
	conf.Options = q.Encode()
	return conf, nil
}

// migrator provisions pgtestdb's template database.
type migrator struct{}

// Hash identifies the migrated schema: a hash of the name and contents of
// every file in migrations.FS.
func (migrator) Hash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("testdb: hashing migrations: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// Migrate applies every migration to the template database, exactly as the
// server does at start.
func (migrator) Migrate(ctx context.Context, db *sql.DB, _ pgtestdb.Config) error {
	return migrations.Up(ctx, db)
}

// URL creates a fresh, fully migrated database for t and returns its
// connection URL (for tests that start the whole server, which opens its own
// pool). The database is dropped when t ends, force-closing any connections
// still open; it is kept for inspection if t failed.
func URL(t testing.TB) string {
	t.Helper()
	conf, err := setup()
	if err != nil {
		t.Fatalf("%v", err)
	}
	conf.ForceTerminateConnections = true
	inst := pgtestdb.Custom(t, conf, migrator{})
	return instanceURL(inst)
}

// instanceURL formats conf like pgtestdb's Config.URL, but without the
// empty "@:" netloc when host and port are in the query.
func instanceURL(conf *pgtestdb.Config) string {
	netloc := conf.Host
	if conf.Port != "" {
		netloc += ":" + conf.Port
	}
	userinfo := conf.User
	if conf.Password != "" {
		userinfo += ":" + conf.Password
	}
	u := "postgres://" + userinfo + "@" + netloc + "/" + url.PathEscape(conf.Database)
	if conf.Options != "" {
		u += "?" + conf.Options
	}
	return u
}

// New returns a pgx pool connected to a fresh, fully migrated database for
// t. The pool is closed, and the database dropped, when t ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	u := URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatalf("testdb: connecting to %s: %v", u, err)
	}
	// Registered after pgtestdb's cleanup, so it runs before the drop.
	t.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("testdb: connecting to %s: %v", u, err)
	}
	return pool
}

// Cluster returns the embedded cluster shared by the test binary, starting
// it if needed, for tests that need more databases or a superuser
// connection (cluster.URL("postgres")). It fails t when
// AIRLOCK_TEST_DATABASE_URL selects an external server.
func Cluster(t testing.TB) *pgembed.Cluster {
	t.Helper()
	if _, err := setup(); err != nil {
		t.Fatalf("%v", err)
	}
	c, _ := sharedCluster()
	if c == nil {
		t.Fatalf("testdb: %s is set: tests use that server, there is no embedded cluster", EnvURL)
	}
	return c
}

// Main runs the tests, then cleanups, stops the embedded cluster (if one
// was started) and removes its directory, then exits with the tests'
// status. Call it from TestMain.
func Main(m *testing.M, cleanups ...func()) {
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	if c, dir := sharedCluster(); c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := c.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "testdb: stopping the embedded cluster: %v\n", err)
		}
		cancel()
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}
