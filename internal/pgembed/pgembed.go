// Package pgembed runs a private PostgreSQL cluster from the machine's
// PostgreSQL server binaries: the server's embedded default database (when
// AIRLOCK_DATABASE_URL is unset) and the database of the tests.
//
// Layout of a cluster directory Dir:
//
//	Dir/data          the data directory (initdb'ed on first start, reused after)
//	Dir/run           the unix socket directory, when its path is short enough;
//	                  otherwise a private /tmp/airlock-pg-* directory
//	Dir/postgres.log  initdb and server output, appended
//
// The cluster listens on a unix socket only (listen_addresses is empty). The socket
// directory is mode 0700 and owned by the OS user running PostgreSQL, and
// sockets are created 0700, so only that user and root can reach it. That is
// why the cluster uses trust authentication for local connections (host
// connections are rejected): the file system is the access control, exactly
// like peer authentication, and no password has to be generated, stored and
// kept in sync with the data directory. The superuser role is "airlock".
//
// initdb and postgres refuse to run as root. When the calling process is
// root, the cluster runs as the unprivileged OS user [SystemUser] (created
// with useradd if missing, "nobody" as a last resort), or as the owner of an
// existing data directory; root still connects through the 0700 socket
// directory because it bypasses file permissions. Every directory from / down
// to Dir must then be searchable by that user.
//
// The postmaster is a direct child process in its own process group, so a
// terminal's Ctrl-C reaches only the Go process, which decides when to call
// [Cluster.Stop]. If the Go process dies without stopping it, the kernel sends
// the postmaster SIGINT (fast shutdown) through the parent-death signal.
package pgembed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	// SuperUser is the superuser role created by initdb; [Cluster.URL]
	// connects as it.
	SuperUser = "airlock"

	// port only names the socket file (.s.PGSQL.5432): there is no TCP
	// listener, and the socket directory is private, so it never clashes.
	port = 5432

	defaultMaxConnections = 200
	startTimeout          = 30 * time.Second
	stopTimeout           = 30 * time.Second
	// maxSocketPath is the longest socket file path that fits sun_path
	// (108 bytes including the terminating NUL).
	maxSocketPath = 107
)

// Options configures [Start].
type Options struct {
	// Dir holds the cluster: data in Dir/data, log in Dir/postgres.log, the
	// socket in Dir/run (or a short private /tmp directory when Dir is too
	// long for a unix socket path). Created if missing; an already
	// initialised cluster is reused. Required.
	Dir string
	// Logger receives lifecycle messages; nil discards them.
	Logger *slog.Logger
	// Durable keeps PostgreSQL's crash-safety defaults (fsync,
	// synchronous_commit, full_page_writes on): use it for the server and
	// benchmarks. When false (tests) they are turned off, and initdb skips
	// syncing, for speed.
	Durable bool
	// MaxConnections sets max_connections; 0 means 200.
	MaxConnections int
	// ExtraSettings are additional postgresql.conf settings, passed as
	// `-c name=value` after (and so overriding) pgembed's own. The settings
	// that define how clients reach the cluster (listen_addresses, port,
	// unix_socket_*) are reserved.
	ExtraSettings map[string]string
}

// Cluster is a running PostgreSQL cluster started by [Start]. Its methods are
// safe for concurrent use.
type Cluster struct {
	dir        string
	dataDir    string
	socketDir  string
	tempSocket bool // socketDir was created by Start and is removed by Stop
	logPath    string
	user       osUser
	log        *slog.Logger

	cmd     *exec.Cmd
	exited  chan struct{} // closed once the postmaster has been reaped
	waitErr error         // valid after exited is closed

	stopMu   sync.Mutex // guards stopping and waitErr
	stopping bool       // a shutdown was requested: exit is expected

	stopOpMu sync.Mutex // serialises Stop; guards stopped and stopErr
	stopped  bool
	stopErr  error
}

// Start starts (after initialising it, the first time) the cluster in
// opts.Dir and returns once it accepts connections; the "postgres" database
// always exists. It gives up after 30 seconds or when ctx ends, with the tail
// of the server log in the error. A postmaster.pid left by a crashed run is
// recovered; a cluster still running in Dir is an error.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("pgembed: Options.Dir is required")
	}
	for k := range opts.ExtraSettings {
		switch k = strings.ToLower(k); {
		case k == "listen_addresses" || k == "port" || strings.HasPrefix(k, "unix_socket_"):
			return nil, fmt.Errorf("pgembed: ExtraSettings: %s is managed by pgembed", k)
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	binDir, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("pgembed: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pgembed: creating cluster directory: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(dir); err == nil {
		dir = resolved
	}
	c := &Cluster{
		dir:     dir,
		dataDir: filepath.Join(dir, "data"),
		logPath: filepath.Join(dir, "postgres.log"),
		log:     log,
		exited:  make(chan struct{}),
	}
	if c.user, err = resolveUser(ctx, c.dataDir, log); err != nil {
		return nil, err
	}
	if err := checkTraversable(dir, c.user); err != nil {
		return nil, err
	}

	// The log is opened by us and handed to the children as stdout/stderr,
	// so it needs no permissions for the PostgreSQL user.
	logFile, err := os.OpenFile(c.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("pgembed: opening server log: %w", err)
	}
	defer logFile.Close()

	if err := c.ensureInitialised(ctx, binDir, logFile, opts.Durable); err != nil {
		return nil, err
	}
	if err := c.prepareSocketDir(); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			c.removeTempSocketDir()
		}
	}()
	if err := c.checkStale(); err != nil {
		return nil, err
	}

	args := c.serverArgs(opts)
	deadline := time.Now().Add(startTimeout)
	startCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for attempt := 1; ; attempt++ {
		logStart := fileSize(c.logPath)
		t0 := time.Now()
		err := c.startPostmaster(binDir, args, logFile)
		if err == nil {
			err = c.waitReady(startCtx)
		}
		if err == nil {
			log.Info("pgembed: cluster started", "dir", dir, "socket", c.socketDir,
				"user", c.user.name, "pid", c.cmd.Process.Pid, "took", time.Since(t0))
			ok = true
			return c, nil
		}
		tail := logTail(c.logPath, logStart)
		c.kill()
		// Orphaned backends of a postmaster killed without shutdown keep
		// its shared memory attached for a moment; they exit on their own.
		if strings.Contains(tail, "is still in use") && startCtx.Err() == nil && time.Now().Add(250*time.Millisecond).Before(deadline) {
			log.Info("pgembed: shared memory of a previous postmaster still in use, retrying", "attempt", attempt)
			time.Sleep(250 * time.Millisecond)
			c.exited = make(chan struct{})
			c.waitErr = nil
			c.stopping = false
			continue
		}
		return nil, fmt.Errorf("pgembed: starting PostgreSQL in %s: %w\n--- %s (tail) ---\n%s", dir, err, c.logPath, tail)
	}
}

// ensureInitialised runs initdb unless Dir/data already holds a cluster. It
// initialises into Dir/data.init and renames, so a crash mid-initdb never
// leaves a half-made Dir/data behind.
func (c *Cluster) ensureInitialised(ctx context.Context, binDir string, logFile *os.File, durable bool) error {
	if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); err == nil {
		return nil
	}
	if entries, err := os.ReadDir(c.dataDir); err == nil {
		if len(entries) > 0 {
			return fmt.Errorf("pgembed: %s exists but is not a PostgreSQL data directory (no PG_VERSION); remove it or choose another Dir", c.dataDir)
		}
		if err := os.Remove(c.dataDir); err != nil {
			return fmt.Errorf("pgembed: %w", err)
		}
	}
	tmp := c.dataDir + ".init"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("pgembed: removing leftover %s: %w", tmp, err)
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("pgembed: %w", err)
	}
	if err := chownTo(tmp, c.user); err != nil {
		return err
	}
	args := []string{
		"-D", tmp,
		"--username=" + SuperUser,
		"--auth-local=trust", "--auth-host=reject",
		"--encoding=UTF8", "--locale=C",
	}
	if !durable {
		args = append(args, "--no-sync")
	}
	t0 := time.Now()
	logStart := fileSize(c.logPath)
	fmt.Fprintf(logFile, "pgembed: %s initdb %s\n", time.Now().Format(time.RFC3339), strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"), args...)
	c.setupCmd(cmd, logFile)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgembed: initdb as %s failed: %w\n--- %s (tail) ---\n%s", c.user, err, c.logPath, logTail(c.logPath, logStart))
	}
	if err := os.Rename(tmp, c.dataDir); err != nil {
		return fmt.Errorf("pgembed: %w", err)
	}
	c.log.Info("pgembed: initialised cluster", "data", c.dataDir, "user", c.user.name, "took", time.Since(t0))
	return nil
}

// prepareSocketDir picks and creates the socket directory: Dir/run when the
// socket path fits in sun_path, otherwise a private directory under /tmp.
func (c *Cluster) prepareSocketDir() error {
	sockFile := "/.s.PGSQL." + strconv.Itoa(port)
	dir := filepath.Join(c.dir, "run")
	if len(dir)+len(sockFile) <= maxSocketPath {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("pgembed: %w", err)
		}
	} else {
		var err error
		if dir, err = os.MkdirTemp("/tmp", "airlock-pg-"); err != nil {
			return fmt.Errorf("pgembed: creating socket directory: %w", err)
		}
		c.tempSocket = true
	}
	c.socketDir = dir
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("pgembed: %w", err)
	}
	return chownTo(dir, c.user)
}

func (c *Cluster) removeTempSocketDir() {
	if c.tempSocket {
		_ = os.RemoveAll(c.socketDir)
	}
}

// checkStale looks at the lock files a previous postmaster may have left.
// postgres itself ignores a lock file whose PID is dead, but refuses one
// whose PID was reused by an unrelated process; remove those. A postmaster
// that is really running in this data directory is an error.
func (c *Cluster) checkStale() error {
	realData, err := filepath.EvalSymlinks(c.dataDir)
	if err != nil {
		realData = c.dataDir
	}
	for _, lock := range []string{
		filepath.Join(c.dataDir, "postmaster.pid"),
		filepath.Join(c.socketDir, ".s.PGSQL."+strconv.Itoa(port)+".lock"),
	} {
		pid := readLockPID(lock)
		if pid <= 0 {
			continue
		}
		switch postmasterState(pid, realData) {
		case pidRunsHere:
			return fmt.Errorf("pgembed: a PostgreSQL server (pid %d) is already running in %s", pid, c.dataDir)
		case pidUnrelated:
			c.log.Info("pgembed: removing stale lock file", "file", lock, "pid", pid)
			if err := os.Remove(lock); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("pgembed: removing stale %s: %w", lock, err)
			}
		}
	}
	return nil
}

type pidState int

const (
	pidDead      pidState = iota // no such process: postgres handles it
	pidRunsHere                  // a process working in our data directory
	pidUnrelated                 // alive, but some other process (PID reuse)
	pidUnknown                   // cannot tell: leave the decision to postgres
)

// postmasterState classifies pid. A postmaster (and each of its backends)
// runs with the data directory as its working directory.
func postmasterState(pid int, dataDir string) pidState {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return pidDead
	}
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil {
		if _, statErr := os.Stat("/proc/" + strconv.Itoa(pid)); errors.Is(statErr, os.ErrNotExist) {
			return pidDead
		}
		return pidUnknown
	}
	if cwd == dataDir {
		return pidRunsHere
	}
	return pidUnrelated
}

func readLockPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0
	}
	if pid < 0 { // a negative PID marks a standalone backend
		pid = -pid
	}
	return pid
}

func (c *Cluster) serverArgs(opts Options) []string {
	maxConns := opts.MaxConnections
	if maxConns <= 0 {
		maxConns = defaultMaxConnections
	}
	args := []string{
		"-D", c.dataDir,
		"-k", c.socketDir,
		"-c", "listen_addresses=",
		"-c", "port=" + strconv.Itoa(port),
		"-c", "unix_socket_permissions=0700",
		"-c", "max_connections=" + strconv.Itoa(maxConns),
	}
	if !opts.Durable {
		args = append(args,
			"-c", "fsync=off",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off",
		)
	}
	for _, k := range slices.Sorted(maps.Keys(opts.ExtraSettings)) {
		args = append(args, "-c", k+"="+opts.ExtraSettings[k])
	}
	return args
}

// setupCmd makes cmd run as the cluster's OS user, with a clean environment,
// its output appended to the log, in its own process group.
func (c *Cluster) setupCmd(cmd *exec.Cmd, logFile *os.File) {
	cmd.Dir = c.dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: c.user.credential(),
		Setpgid:    true,
	}
}

// childEnv is our environment without PG* variables (PGPORT, PGDATA, ... would
// change what the children do) and with the C locale.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "LC_") || strings.HasPrefix(kv, "LANG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C", "LANG=C")
}

// startPostmaster starts postgres and a goroutine that reaps it. The child is
// forked from an OS thread locked to that goroutine, which lives exactly as
// long as the postmaster: the parent-death signal (SIGINT, fast shutdown)
// fires when the forking thread exits, so it must not be a thread the Go
// runtime might retire.
func (c *Cluster) startPostmaster(binDir string, args []string, logFile *os.File) error {
	fmt.Fprintf(logFile, "pgembed: %s postgres %s\n", time.Now().Format(time.RFC3339), strings.Join(args, " "))
	cmd := exec.Command(filepath.Join(binDir, "postgres"), args...)
	c.setupCmd(cmd, logFile)
	cmd.SysProcAttr.Pdeathsig = syscall.SIGINT
	c.cmd = cmd
	started := make(chan error, 1)
	exited := c.exited
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			close(exited)
			return
		}
		started <- nil
		err := cmd.Wait()
		c.stopMu.Lock()
		c.waitErr = err
		expected := c.stopping
		c.stopMu.Unlock()
		if !expected {
			c.log.Warn("pgembed: postmaster exited unexpectedly", "err", err, "log", c.logPath)
		}
		close(exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("running postgres as %s: %w", c.user, err)
	}
	return nil
}

// waitReady polls until the server accepts a connection.
func (c *Cluster) waitReady(ctx context.Context) error {
	cfg, err := pgx.ParseConfig(c.URL("postgres"))
	if err != nil {
		return err
	}
	cfg.ConnectTimeout = 2 * time.Second
	var lastErr error
	for {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(context.Background())
			if err == nil {
				return nil
			}
		}
		lastErr = err
		select {
		case <-c.exited:
			return fmt.Errorf("postgres exited during startup: %v", c.exitErr())
		case <-ctx.Done():
			return fmt.Errorf("server not accepting connections: %w (last error: %v)", ctx.Err(), lastErr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *Cluster) exitErr() error {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	return c.waitErr
}

// kill stops a postmaster that failed to start and reaps it.
func (c *Cluster) kill() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	c.stopMu.Lock()
	c.stopping = true
	c.stopMu.Unlock()
	_ = c.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-c.exited:
		return
	case <-time.After(5 * time.Second):
	}
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// URL returns a pgx/libpq connection URL for database over the unix socket,
// as the superuser "airlock", e.g.
// postgres://airlock@/airlock?host=/srv/airlock/pg/run&port=5432&sslmode=disable.
func (c *Cluster) URL(database string) string {
	return "postgres://" + SuperUser + "@/" + url.PathEscape(database) +
		"?host=" + queryEscapePath(c.socketDir) + "&port=" + strconv.Itoa(port) + "&sslmode=disable"
}

// queryEscapePath escapes p for a URL query, keeping slashes readable.
func queryEscapePath(p string) string {
	return strings.ReplaceAll(url.QueryEscape(p), "%2F", "/")
}

// SocketDir returns the directory holding the cluster's unix socket.
func (c *Cluster) SocketDir() string { return c.socketDir }

// CreateDatabase creates database name unless it already exists (also when
// created concurrently).
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgembed: connecting: %w", err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("pgembed: checking database %q: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		var pgErr *pgconn.PgError
		// 42P04 duplicate_database; 23505 when a concurrent CREATE won the
		// race on the pg_database unique index.
		if errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505") {
			return nil
		}
		return fmt.Errorf("pgembed: creating database %q: %w", name, err)
	}
	return nil
}

// Stop shuts the cluster down the way `pg_ctl stop -m fast` does: SIGINT to
// the postmaster (roll back open transactions, disconnect clients,
// checkpoint), then waits for it to exit. If it has not exited after 30
// seconds, or when ctx ends, it escalates to SIGQUIT (immediate shutdown,
// crash recovery on the next start) and, 5 seconds later, SIGKILL. The
// temporary socket directory, if any, is removed. Stop is idempotent and safe
// to call concurrently: concurrent calls wait for the first to finish, and
// every call returns the first call's result. The
// error is non-nil when the shutdown was not clean (escalation was needed, or
// the postmaster had already died on its own), even though the cluster is
// stopped afterwards.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopOpMu.Lock()
	defer c.stopOpMu.Unlock()
	if c.stopped {
		return c.stopErr
	}
	c.stopErr = c.stop(ctx)
	c.stopped = true
	c.removeTempSocketDir()
	return c.stopErr
}

func (c *Cluster) stop(ctx context.Context) error {
	pid := c.cmd.Process.Pid
	c.stopMu.Lock()
	c.stopping = true
	c.stopMu.Unlock()
	select {
	case <-c.exited:
		return fmt.Errorf("pgembed: postmaster (pid %d) had exited before Stop: %v", pid, c.exitErr())
	default:
	}
	t0 := time.Now()
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	var why string
	select {
	case <-c.exited:
		c.log.Info("pgembed: cluster stopped", "dir", c.dir, "took", time.Since(t0))
		return nil
	case <-timer.C:
		why = "did not shut down within " + stopTimeout.String()
	case <-ctx.Done():
		why = "fast shutdown interrupted: " + ctx.Err().Error()
	}
	c.log.Warn("pgembed: escalating to immediate shutdown", "pid", pid, "reason", why)
	_ = c.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-c.exited:
		return fmt.Errorf("pgembed: postmaster (pid %d) %s; stopped with SIGQUIT", pid, why)
	case <-time.After(5 * time.Second):
	}
	_ = c.cmd.Process.Kill()
	<-c.exited
	return fmt.Errorf("pgembed: postmaster (pid %d) %s; killed", pid, why)
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logTail returns the last lines written to the log since offset.
func logTail(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	const maxTail = 4096
	if size := fileSize(path); size-offset > maxTail {
		offset = size - maxTail
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return "(unreadable log: " + err.Error() + ")"
	}
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}
