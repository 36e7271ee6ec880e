// Command sandboxbench measures what a worker adds to running a command in
// bubblewrap: the median wall time of an exec of `true` through the whole
// worker path (lease → validate → bwrap with limits → complete, over HTTP
// against a server on the embedded PostgreSQL), of the sandbox runner alone,
// and of bare `bwrap … /bin/true` with the same namespaces (the runner's
// --unshare-all --unshare-user) on the same machine. With -results FILE it
// appends issue 14's sandbox row (see cmd/benchreport).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/app"
	"github.com/airlockhq/airlock/internal/benchtable"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/worker"
)

func main() {
	n := flag.Int("n", 200, "runs of each")
	resultsPath := flag.String("results", "", "append the performance table's figures to this file (JSON lines, see cmd/benchreport)")
	flag.Parse()
	results := benchtable.NewRecorder(*resultsPath)
	err := run(*n, results)
	if ferr := results.Flush(); ferr != nil && err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxbench:", err)
		os.Exit(1)
	}
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

func timeN(n int, fn func() error) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if err := fn(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

func run(n int, results *benchtable.Recorder) error {
	if err := sandbox.Available(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "airlock-sandboxbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	ws := dir + "/workspace"
	if err := os.Mkdir(ws, 0o755); err != nil {
		return err
	}
	pol, err := worker.NewPolicy([]string{"true"}, false, false)
	if err != nil {
		return err
	}
	ctx := context.Background()
	a, err := app.Start(ctx, app.Config{Addr: "127.0.0.1:0", DataDir: dir + "/data", AdminPassword: "bench-admin-password",
		Worker: "off", ExecPolicy: &pol}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	defer a.Shutdown(ctx)
	admin, _, err := client.New(a.URL(), "").Login(ctx, "admin", "bench-admin-password")
	if err != nil {
		return err
	}
	if err := admin.CreateAgent(ctx, "bench", "bench"); err != nil {
		return err
	}
	if _, err := admin.PutAgentPolicy(ctx, "bench", map[string]any{
		"rules": []map[string]any{{"id": "run", "tool": "exec", "effect": "allow"}}, "settings": map[string]any{"escalate_at": "none"},
	}); err != nil {
		return err
	}
	at, err := admin.IssueAgentToken(ctx, "bench", 0)
	if err != nil {
		return err
	}
	wt, err := admin.IssueWorkerToken(ctx, "bench-host", []string{"workspace:main"}, 0)
	if err != nil {
		return err
	}
	agent, host := client.New(a.URL(), at.Token), client.New(a.URL(), wt.Token)
	exe := &worker.SandboxExecutor{Workspaces: map[string]string{"main": ws}, Policy: pol}
	req := sandbox.ExecRequest{Argv: []string{"true"}, Workspace: ws, Timeout: time.Minute}

	// Queue the jobs first; the timed path is lease → run → complete.
	for range n {
		if _, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{"argv": []any{"true"}, "workspace": "main"}}); err != nil {
			return err
		}
	}
	// The parts of each run, to say where the worker's share goes.
	var leases, runs, completes []time.Duration
	path, err := timeN(n, func() error {
		t0 := time.Now()
		job, err := host.Lease(ctx, exe.Kinds(), []string{"workspace:main"}, 5*time.Second)
		if err != nil || job == nil {
			return fmt.Errorf("lease: %v", err)
		}
		t1 := time.Now()
		r := exe.Run(ctx, job)
		if r.Error != "" || r.ExitCode != 0 {
			return fmt.Errorf("run: %+v", r)
		}
		t2 := time.Now()
		_, err = host.Complete(ctx, job.ID, job.Fence, r)
		leases, runs, completes = append(leases, t1.Sub(t0)), append(runs, t2.Sub(t1)), append(completes, time.Since(t2))
		return err
	})
	if err != nil {
		return err
	}
	runner, err := timeN(n, func() error {
		res, err := sandbox.Run(ctx, req, sandbox.RunOptions{Policy: &pol})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
		}
		return err
	})
	if err != nil {
		return err
	}
	bwrap, err := sandbox.BwrapPath()
	if err != nil {
		return err
	}
	bare, err := timeN(n, func() error {
		return exec.Command(bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
			"--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
			"--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
			"--bind", ws, "/workspace", "--chdir", "/workspace", "--clearenv", "/bin/true").Run()
	})
	if err != nil {
		return err
	}
	fmt.Printf("\nAirlock sandbox overhead — %s, %d runs each (median wall time)\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), n)
	fmt.Printf("  bare bwrap … /bin/true                        %8s\n", median(bare).Round(10*time.Microsecond))
	fmt.Printf("  sandbox.Run (validate, limits, bwrap, output) %8s\n", median(runner).Round(10*time.Microsecond))
	fmt.Printf("  worker path (lease → bwrap → complete, HTTP)  %8s\n", median(path).Round(10*time.Microsecond))
	fmt.Printf("    of which lease %s, run %s, complete %s (medians of each part)\n",
		median(leases).Round(10*time.Microsecond), median(runs).Round(10*time.Microsecond), median(completes).Round(10*time.Microsecond))
	added := median(path) - median(bare)
	fmt.Printf("  worker adds over bare bwrap                   %8s  (target ≤ 5ms)\n", added.Round(10*time.Microsecond))
	results.Add("sandbox.added", float64(added)/float64(time.Millisecond), 0,
		fmt.Sprintf("worker path %s, bare bwrap %s, %d runs each", median(path).Round(10*time.Microsecond), median(bare).Round(10*time.Microsecond), n))
	return nil
}
