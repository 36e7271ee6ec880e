// Command worker is an Airlock worker host: it leases approved exec actions
// from the server and runs them in bubblewrap in the workspaces it names.
//
//	AIRLOCK_SERVER_URL=http://airlock:8080 AIRLOCK_WORKER_TOKEN=… \
//	AIRLOCK_WORKSPACES=app=/srv/app,docs=/srv/docs AIRLOCK_REPOS=api=/srv/git/api worker
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/worker"
	"github.com/airlockhq/airlock/internal/worktree"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("worker stopped", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
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
	if err := sandbox.Available(); err != nil {
		// Fail closed: without bubblewrap nothing may run here.
		return fmt.Errorf("sandbox unavailable: %w", err)
	}
	w, err := worker.New(worker.Config{
		Client:     client.New(server, token),
		Workspaces: workspaces,
		Repos:      repos,
		Executor: &worker.SandboxExecutor{Workspaces: workspaces, Policy: pol,
			Worktrees: &worktree.Manager{Repos: repos, Root: wtRoot}},
		Logger: log,
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("worker running", "server", server, "workspaces", len(workspaces), "repos", len(repos))
	w.Run(ctx)
	return nil
}
