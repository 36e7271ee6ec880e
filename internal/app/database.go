package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/airlockhq/airlock/internal/pgembed"
	"github.com/airlockhq/airlock/internal/store"
)

// openDatabase makes the data dir, starts the embedded cluster when no
// database URL is configured, migrates, and opens a.pool and a.Store. Start
// and the admin commands share it, so a command works on exactly the
// database the server would.
func (a *App) openDatabase(ctx context.Context) (err error) {
	cfg, log := a.cfg, a.log
	if err := os.MkdirAll(cfg.DataDir, 0o711); err != nil {
		return fmt.Errorf("app: creating data dir: %w", err)
	}
	if os.Geteuid() == 0 && cfg.DatabaseURL == "" {
		// As root the embedded PostgreSQL runs as an unprivileged user, who
		// must be able to pass through (not list) the data dir. The files in
		// it that matter (keys) are 0600.
		if err := os.Chmod(cfg.DataDir, 0o711); err != nil {
			return fmt.Errorf("app: data dir: %w", err)
		}
	}
	dbURL := cfg.DatabaseURL
	if dbURL == "" {
		log.Info("starting embedded PostgreSQL", "dir", filepath.Join(cfg.DataDir, "pg"))
		a.cluster, err = pgembed.Start(ctx, pgembed.Options{Dir: filepath.Join(cfg.DataDir, "pg"), Logger: log, Durable: true, ExtraSettings: cfg.PGSettings})
		if err != nil {
			return fmt.Errorf("app: embedded postgres: %w", err)
		}
		if err := a.cluster.CreateDatabase(ctx, "airlock"); err != nil {
			return err
		}
		dbURL = a.cluster.URL("airlock")
	}
	role, err := migrate(ctx, dbURL, log)
	if err != nil {
		return err
	}
	if a.cluster != nil {
		// The embedded cluster's URL is its superuser's: the server logs in
		// as a plain member of airlock_app instead.
		if dbURL, err = ensureServerLogin(ctx, dbURL); err != nil {
			return err
		}
	}
	if a.pool, err = openPool(ctx, dbURL, role); err != nil {
		return err
	}
	a.Store = store.New(a.pool, log)
	return nil
}

// toolNamed is the metrics' ToolNamer: whether the fleet policy or the
// agent's names tool, from the policy the submit just cached (a lookup in
// memory; only a tool finishing on an instance that has not served the
// agent yet reads its policy once).
func (a *App) toolNamed(agentID, tool string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, set, err := a.Store.CachedAgentPolicy(ctx, agentID)
	return err == nil && set.NamesTool(tool)
}
