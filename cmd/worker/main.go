// Command worker is an Airlock worker host: it leases approved exec actions
// from the server and runs them in bubblewrap in the workspaces it names.
//
//	AIRLOCK_SERVER_URL=http://airlock:8080 AIRLOCK_WORKER_TOKEN=… \
//	AIRLOCK_WORKSPACES=app=/srv/app,docs=/srv/docs AIRLOCK_REPOS=api=/srv/git/api worker
//
// Bounds (flags override the environment): AIRLOCK_WORKER_CONCURRENCY
// (-concurrency, jobs at once, default 2), AIRLOCK_SANDBOX_DISK_MB
// (-sandbox-disk-mb, a run's workspace size, default 1024),
// AIRLOCK_SANDBOX_INODES (-sandbox-inodes, default 100000) and
// AIRLOCK_MAX_TIMEOUT_S (-max-timeout-s, default 3600).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/worker"
	"github.com/airlockhq/airlock/internal/worktree"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log, os.Args[1:]); err != nil {
		log.Error("worker stopped", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, args []string) error {
	server := os.Getenv("AIRLOCK_SERVER_URL")
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	token := os.Getenv("AIRLOCK_WORKER_TOKEN")
	if token == "" {
		return fmt.Errorf("AIRLOCK_WORKER_TOKEN is required (an admin issues one: POST /api/v1/workers/{name}/tokens)")
	}
	workspaces, err := worker.ParseDirs(os.Getenv("AIRLOCK_WORKSPACES"))
	if err != nil {
		return fmt.Errorf("AIRLOCK_WORKSPACES: %w", err)
	}
	repos, err := worker.ParseDirs(os.Getenv("AIRLOCK_REPOS"))
	if err != nil {
		return fmt.Errorf("AIRLOCK_REPOS: %w", err)
	}
	wtRoot := os.Getenv("AIRLOCK_WORKTREE_DIR")
	if wtRoot == "" {
		wtRoot = "/var/lib/airlock-worker/worktrees"
	}
	pol, err := worker.PolicyFromEnv()
	if err != nil {
		return err
	}
	host, err := worker.HostSettingsFromEnv()
	if err != nil {
		return err
	}
	maxTimeout := int(pol.MaxTimeout / time.Second)
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.IntVar(&host.Concurrency, "concurrency", host.Concurrency, "jobs run at once (AIRLOCK_WORKER_CONCURRENCY)")
	fs.Int64Var(&host.DiskMB, "sandbox-disk-mb", host.DiskMB, "size bound of a run's workspace, MiB (AIRLOCK_SANDBOX_DISK_MB)")
	fs.Int64Var(&host.Inodes, "sandbox-inodes", host.Inodes, "file count bound of a run's workspace (AIRLOCK_SANDBOX_INODES)")
	fs.IntVar(&maxTimeout, "max-timeout-s", maxTimeout, "longest timeout_s an exec may ask for (AIRLOCK_MAX_TIMEOUT_S)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if host.Concurrency < 1 || host.DiskMB < 1 || host.Inodes < 16 || maxTimeout < 1 || maxTimeout > 86400 {
		return fmt.Errorf("concurrency, sandbox-disk-mb and max-timeout-s must be positive (max-timeout-s at most 86400), sandbox-inodes at least 16")
	}
	pol.MaxTimeout = time.Duration(maxTimeout) * time.Second
	if err := sandbox.Available(); err != nil {
		// Fail closed: without bubblewrap nothing may run here.
		return fmt.Errorf("sandbox unavailable: %w", err)
	}
	w, err := worker.New(worker.Config{
		Client:      client.New(server, token),
		Workspaces:  workspaces,
		Repos:       repos,
		Concurrency: host.Concurrency,
		Executor: &worker.SandboxExecutor{Workspaces: workspaces, Policy: pol, Options: host.Apply(sandbox.RunOptions{}),
			Worktrees: &worktree.Manager{Repos: repos, Root: wtRoot}},
		Logger: log,
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("worker running", "server", server, "workspaces", len(workspaces), "repos", len(repos),
		"concurrency", host.Concurrency, "disk_mb", host.DiskMB, "inodes", host.Inodes, "max_timeout", pol.MaxTimeout)
	w.Run(ctx)
	return nil
}
