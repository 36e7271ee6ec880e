// Command server runs the Airlock HTTP server. With no AIRLOCK_DATABASE_URL
// it starts and stops its own PostgreSQL cluster under the data dir.
//
// `airlock-server admin reset-password [--password-stdin] [flags]` gives
// the user admin a new password on the same database (the server on an
// embedded database must be stopped first) and prints it once.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/airlockhq/airlock/internal/app"
)

func main() {
	tuneGC()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if len(os.Args) > 1 && os.Args[1] == "admin" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := adminCommand(ctx, log, os.Args[2:], os.Stdin, os.Stdout); err != nil {
			log.Error("airlock-server admin failed", "err", err)
			stop()
			os.Exit(1)
		}
		return
	}
	if err := run(log); err != nil {
		log.Error("airlock stopped", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	cfg, err := app.FromEnv(os.Args[1:])
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := app.Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	fmt.Printf("\nAirlock is running.\n  console and API: %s\n", a.URL())
	switch {
	case a.AdminPassword != "":
		fmt.Printf("  log in as:       admin / %s   (generated now and shown only once)\n", a.AdminPassword)
	case a.CreatedAdmin:
		fmt.Printf("  log in as:       admin with the password in AIRLOCK_ADMIN_PASSWORD\n")
	default:
		fmt.Printf("  log in as:       an existing user (admin was created on the first start of %s;\n", cfg.DataDir)
		fmt.Printf("                   AIRLOCK_ADMIN_PASSWORD only applies to that first start)\n")
	}
	fmt.Printf("  e.g. curl -s %s/api/v1/auth/login -H 'Content-Type: application/json' -d '{\"username\":\"admin\",\"password\":\"...\"}'\n\n", a.URL())
	<-ctx.Done()
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a.Shutdown(sctx)
	return nil
}

// tuneGC trades memory for CPU: the server's live heap is small, so the
// default GOGC=100 collects far more often than it needs to on the submit
// path. GOGC in the environment still wins; a soft limit keeps the heap
// bounded.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(1 << 30)
	}
}
