package app

import (
	"context"
	"fmt"
	"log/slog"
	"os/user"
	"strings"

	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/identity"
)

// ResetVia is how the audit event of a reset says it was made.
const ResetVia = "airlock-server admin reset-password"

// ResetAdminPassword is `airlock-server admin reset-password`: on the
// database the server would use (the embedded cluster under the data dir,
// started and stopped here, or the configured database URL) it gives the
// user admin password, or a generated one when password is empty, enables
// admin (re-creating it if it was deleted or never created) and ends its
// sessions, audited (identity.Service.ResetAdmin). It returns the password
// set. The embedded cluster cannot be shared: with it, the server must be
// stopped first.
func ResetAdminPassword(ctx context.Context, cfg Config, log *slog.Logger, password string) (_ string, err error) {
	if err := cfg.normalise(); err != nil {
		return "", err
	}
	if log == nil {
		log = slog.Default()
	}
	a := &App{cfg: cfg, log: log}
	defer a.Shutdown(context.WithoutCancel(ctx))
	if err := a.openDatabase(ctx); err != nil {
		if cfg.DatabaseURL == "" && strings.Contains(err.Error(), "already running") {
			return "", fmt.Errorf("%w: stop the server using %s first", err, cfg.DataDir)
		}
		return "", err
	}
	if password == "" {
		password = auth.RandomPassword()
	}
	via := ResetVia
	if u, err := user.Current(); err == nil {
		via += " by OS user " + u.Username
	}
	ident := identity.NewService(identity.Config{Store: a.Store})
	created, err := ident.ResetAdmin(ctx, "system", via, password)
	if err != nil {
		return "", fmt.Errorf("app: resetting admin: %w", err)
	}
	log.Info("admin password reset", "created", created)
	return password, nil
}
