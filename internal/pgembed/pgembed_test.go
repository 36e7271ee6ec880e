package pgembed

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// clusterDir returns a fresh directory for a cluster that the unprivileged
// PostgreSQL user can traverse (t.TempDir is 0700, under a 0700 parent).
func clusterDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "airlock-pgembed-test-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func start(t *testing.T, opts Options) *Cluster {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, opts)
	require.NoError(t, err, "starting the embedded PostgreSQL cluster (are the PostgreSQL server binaries installed? see FindBinDir)")
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestFindBinDir(t *testing.T) {
	dir, err := FindBinDir()
	require.NoError(t, err, "PostgreSQL server binaries are required for these tests")
	for _, name := range []string{"initdb", "postgres", "pg_ctl"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NotZero(t, fi.Mode().Perm()&0o111, "%s is not executable", name)
	}
	t.Logf("bin dir: %s", dir)

	t.Setenv("AIRLOCK_PG_BINDIR", t.TempDir())
	_, err = FindBinDir()
	require.ErrorContains(t, err, "AIRLOCK_PG_BINDIR")

	t.Setenv("AIRLOCK_PG_BINDIR", dir)
	got, err := FindBinDir()
	require.NoError(t, err)
	require.Equal(t, dir, got)
}

func TestStartReuseStop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := clusterDir(t)

	t0 := time.Now()
	c := start(t, Options{Dir: dir})
	t.Logf("fresh cluster (initdb + start, Durable=false): %v", time.Since(t0))
	require.DirExists(t, filepath.Join(dir, "data"))
	require.FileExists(t, filepath.Join(dir, "postgres.log"))
	require.Equal(t, filepath.Join(dir, "run"), c.SocketDir())
	require.Contains(t, c.URL("x"), "host="+c.SocketDir())

	conn := connect(t, c.URL("postgres"))
	var one int
	require.NoError(t, conn.QueryRow(ctx, "SELECT 1").Scan(&one))
	require.Equal(t, 1, one)

	var user, listen, fsync string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_user, current_setting('listen_addresses'), current_setting('fsync')").Scan(&user, &listen, &fsync))
	require.Equal(t, SuperUser, user)
	require.Equal(t, "", listen, "must listen on the unix socket only")
	require.Equal(t, "off", fsync)

	fi, err := os.Stat(c.SocketDir())
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "socket dir must be private")

	if os.Geteuid() == 0 {
		pid := c.cmd.Process.Pid
		uid := procUID(t, pid)
		require.NotEqual(t, 0, uid, "postmaster must not run as root")
		var dataDir string
		require.NoError(t, conn.QueryRow(ctx, "SELECT current_setting('data_directory')").Scan(&dataDir))
		fi, err := os.Stat(dataDir)
		require.NoError(t, err)
		require.Equal(t, uint32(uid), fi.Sys().(*syscall.Stat_t).Uid, "data directory owned by the postmaster's user")
		t.Logf("postmaster pid %d runs as uid %d (%s)", pid, uid, c.user.name)
	}

	require.NoError(t, c.CreateDatabase(ctx, "airlock"))
	require.NoError(t, c.CreateDatabase(ctx, "airlock"), "CreateDatabase is IF NOT EXISTS")
	db := connect(t, c.URL("airlock"))
	_, err = db.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('survives restart')")
	require.NoError(t, err)
	require.NoError(t, db.Close(ctx))
	require.NoError(t, conn.Close(ctx))

	require.NoError(t, c.Stop(ctx))
	require.NoError(t, c.Stop(ctx), "Stop is idempotent")
	_, err = os.Stat(filepath.Join(dir, "data", "postmaster.pid"))
	require.ErrorIs(t, err, os.ErrNotExist, "clean shutdown removes postmaster.pid")

	t0 = time.Now()
	c2 := start(t, Options{Dir: dir})
	t.Logf("reused cluster (start only, Durable=false): %v", time.Since(t0))
	db2 := connect(t, c2.URL("airlock"))
	var v string
	require.NoError(t, db2.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
	require.Equal(t, "survives restart", v)
	require.NoError(t, db2.Close(ctx))
	require.NoError(t, c2.Stop(ctx))
}

func TestDurableStartupTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := clusterDir(t)
	t0 := time.Now()
	c := start(t, Options{Dir: dir, Durable: true, MaxConnections: 50, ExtraSettings: map[string]string{"work_mem": "8MB"}})
	t.Logf("fresh cluster (initdb + start, Durable=true): %v", time.Since(t0))
	conn := connect(t, c.URL("postgres"))
	var fsync, maxConns, workMem string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('max_connections'), current_setting('work_mem')").Scan(&fsync, &maxConns, &workMem))
	require.Equal(t, "on", fsync)
	require.Equal(t, "50", maxConns)
	require.Equal(t, "8MB", workMem)
	require.NoError(t, conn.Close(ctx))
	require.NoError(t, c.Stop(ctx))

	t0 = time.Now()
	c = start(t, Options{Dir: dir, Durable: true})
	t.Logf("reused cluster (start only, Durable=true): %v", time.Since(t0))
	require.NoError(t, c.Stop(ctx))
}

func TestStalePostmasterPIDAfterKill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := clusterDir(t)
	// Durable, like the server: a committed row survives the crash (with
	// synchronous_commit=off the last commits may be lost, by design).
	c := start(t, Options{Dir: dir, Durable: true})
	conn := connect(t, c.URL("postgres"))
	_, err := conn.Exec(ctx, "CREATE TABLE t (v int); INSERT INTO t VALUES (42)")
	require.NoError(t, err)

	pid := c.cmd.Process.Pid
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("postmaster did not die")
	}
	require.Equal(t, strconv.Itoa(pid), firstLine(t, filepath.Join(dir, "data", "postmaster.pid")), "stale postmaster.pid left behind")
	require.ErrorContains(t, c.Stop(ctx), "had exited before Stop")

	t0 := time.Now()
	c2 := start(t, Options{Dir: dir, Durable: true})
	t.Logf("restart after SIGKILL (crash recovery): %v", time.Since(t0))
	conn2 := connect(t, c2.URL("postgres"))
	var v int
	require.NoError(t, conn2.QueryRow(ctx, "SELECT v FROM t").Scan(&v))
	require.Equal(t, 42, v)
	require.NoError(t, conn2.Close(ctx))
	require.NoError(t, c2.Stop(ctx))
}

func TestStaleLockWithReusedPID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := clusterDir(t)
	c := start(t, Options{Dir: dir})
	require.NoError(t, c.Stop(ctx))
	// A postmaster.pid naming a live process that is not a postmaster (the
	// PID was reused after a crash): postgres alone would refuse to start.
	lock := filepath.Join(dir, "data", "postmaster.pid")
	require.NoError(t, os.WriteFile(lock, []byte(strconv.Itoa(os.Getpid())+"\n"+filepath.Join(dir, "data")+"\n"), 0o600))
	c2 := start(t, Options{Dir: dir})
	require.NoError(t, c2.Stop(ctx))
}

func TestSecondStartOnRunningDirFails(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	c := start(t, Options{Dir: dir})
	_, err := Start(context.Background(), Options{Dir: dir})
	require.ErrorContains(t, err, "already running")
	// The first cluster is unaffected.
	conn := connect(t, c.URL("postgres"))
	require.NoError(t, conn.Ping(context.Background()))
	require.NoError(t, conn.Close(context.Background()))
	require.NoError(t, c.Stop(context.Background()))
}

func TestLongDirUsesShortSocketDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(clusterDir(t), strings.Repeat("a-very-long-directory-name-", 4))
	c := start(t, Options{Dir: dir})
	require.True(t, strings.HasPrefix(c.SocketDir(), "/tmp/airlock-pg-"), c.SocketDir())
	conn := connect(t, c.URL("postgres"))
	require.NoError(t, conn.Ping(context.Background()))
	require.NoError(t, conn.Close(context.Background()))

	// Concurrent Stops all succeed; the temporary socket dir is removed.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = c.Stop(context.Background()) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NoDirExists(t, c.SocketDir())
}

func TestUntraversableDirIsAClearError(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Log("not root: PostgreSQL runs as the current user, no traversal issue")
		return
	}
	_, err := Start(context.Background(), Options{Dir: filepath.Join(t.TempDir(), "pg")})
	require.ErrorContains(t, err, "cannot traverse")
}

func TestReservedSettingsRejected(t *testing.T) {
	_, err := Start(context.Background(), Options{Dir: clusterDir(t), ExtraSettings: map[string]string{"port": "6000"}})
	require.ErrorContains(t, err, "port is managed by pgembed")
}

// TestPostmasterStopsWhenParentDies kills (SIGKILL, no chance to call Stop) a
// process that started a cluster and checks the postmaster shuts down
// cleanly by itself (parent-death signal), removing its postmaster.pid.
func TestPostmasterStopsWhenParentDies(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperStartAndWait$")
	helper.Env = append(os.Environ(), "PGEMBED_TEST_HELPER_DIR="+dir)
	helper.Stderr = os.Stderr
	out, err := helper.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, helper.Start())
	t.Cleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })

	pid := 0
	sc := bufio.NewScanner(out)
	for pid == 0 && sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "postmaster pid "); ok {
			pid, err = strconv.Atoi(rest)
			require.NoError(t, err)
		}
	}
	require.NotZero(t, pid, "helper did not report a postmaster pid")
	pidFile := filepath.Join(dir, "data", "postmaster.pid")
	require.FileExists(t, pidFile)

	require.NoError(t, helper.Process.Kill())
	_ = helper.Wait()
	require.Eventually(t, func() bool {
		_, err := os.Stat(pidFile)
		return errors.Is(err, os.ErrNotExist) && !processRunning(pid)
	}, 30*time.Second, 20*time.Millisecond, "postmaster %d kept running after its parent died", pid)

	// And the cluster is reusable.
	c := start(t, Options{Dir: dir})
	require.NoError(t, c.Stop(context.Background()))
}

// TestHelperStartAndWait is the child process of
// TestPostmasterStopsWhenParentDies; it does nothing in a normal run.
func TestHelperStartAndWait(t *testing.T) {
	dir := os.Getenv("PGEMBED_TEST_HELPER_DIR")
	if dir == "" {
		return
	}
	c, err := Start(context.Background(), Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("postmaster pid %d\n", c.cmd.Process.Pid)
	time.Sleep(time.Minute)
	os.Exit(1)
}

// processRunning reports whether pid exists and is not a zombie.
func processRunning(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "State:"); ok {
			return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
		}
	}
	return true
}

func procUID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			uid, err := strconv.Atoi(strings.Fields(rest)[0])
			require.NoError(t, err)
			return uid
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", pid)
	return -1
}

func firstLine(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	line, _, _ := strings.Cut(string(b), "\n")
	return line
}
