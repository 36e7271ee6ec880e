package app

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/metrics"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/migrations"
)

// migrate applies the migrations over connections of their own, as the
// role in url (which owns the tables), and returns the role the server's
// pool assumes: store.AppRole, which owns nothing (README "Audit trail"),
// when url's role may, else "" (the server then runs as url's role).
func migrate(ctx context.Context, url string, log *slog.Logger) (string, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return "", fmt.Errorf("app: database url: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	if err := migrations.Up(ctx, db); err != nil {
		return "", err
	}
	var member bool
	if err := db.QueryRowContext(ctx, `SELECT pg_has_role($1, 'MEMBER')`, store.AppRole).Scan(&member); err != nil {
		return "", fmt.Errorf("app: checking the role %s: %w", store.AppRole, err)
	}
	if !member {
		log.Warn("the database login may not assume the role " + store.AppRole + ": the server runs with the login's rights, " +
			"which may include altering the audit trail (verification still detects it)")
		return "", nil
	}
	return store.AppRole, nil
}

// ServerLogin is the login the server uses on the embedded cluster: a role
// whose only right is membership in store.AppRole, so that even SQL that
// runs RESET ROLE is left without a superuser's power over the audit trail.
const ServerLogin = "airlock_server"

// ensureServerLogin creates ServerLogin on the cluster superURL reaches (as
// its superuser), unless it exists, and returns superURL with ServerLogin
// as the user.
func ensureServerLogin(ctx context.Context, superURL string) (string, error) {
	conn, err := pgx.Connect(ctx, superURL)
	if err != nil {
		return "", fmt.Errorf("app: connecting as the superuser: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	login, app := pgx.Identifier{ServerLogin}.Sanitize(), pgx.Identifier{store.AppRole}.Sanitize()
	// Several servers may start on one cluster at once: duplicate_object
	// means another created it first.
	if _, err := conn.Exec(ctx, `DO $$ BEGIN
		CREATE ROLE `+login+` LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
	EXCEPTION WHEN duplicate_object THEN NULL;
	END $$`); err != nil {
		return "", fmt.Errorf("app: creating the login %s: %w", ServerLogin, err)
	}
	if _, err := conn.Exec(ctx, `GRANT `+app+` TO `+login); err != nil {
		return "", fmt.Errorf("app: granting %s to %s: %w", store.AppRole, ServerLogin, err)
	}
	u, err := url.Parse(superURL)
	if err != nil {
		return "", fmt.Errorf("app: database url: %w", err)
	}
	u.User = url.User(ServerLogin)
	return u.String(), nil
}

// startSealer loads (or creates) the audit key, makes sure this month's
// audit partitions exist before anything is served, and starts the sealer
// unless AuditSealEvery is negative (its state in m's metrics). It returns
// the keys stored checkpoints may be signed with: the previous ones,
// oldest first, then the key's public half.
func (a *App) startSealer(ctx, runCtx context.Context, m *metrics.Metrics) ([]ed25519.PublicKey, error) {
	seed, err := auth.LoadOrCreateKey(a.cfg.AuditKeyFile)
	if err != nil {
		return nil, fmt.Errorf("app: audit key: %w", err)
	}
	key, err := audit.NewSigningKey(seed)
	if err != nil {
		return nil, fmt.Errorf("app: %s: %w", a.cfg.AuditKeyFile, err)
	}
	prev := a.cfg.AuditPreviousKeys
	if slices.ContainsFunc(prev, func(k ed25519.PublicKey) bool { return k.Equal(key.Public()) }) {
		return nil, fmt.Errorf("app: AIRLOCK_AUDIT_PREVIOUS_KEYS lists the current audit key (%s's)", a.cfg.AuditKeyFile)
	}
	a.log.Info("audit checkpoints signed", "public_key", base64.StdEncoding.EncodeToString(key.Public()), "previous_keys", len(prev))
	now := time.Now()
	if err := a.Store.EnsureAuditPartitions(ctx, now, now.AddDate(0, 1, 0)); err != nil {
		return nil, err
	}
	if a.cfg.AuditSealEvery >= 0 {
		sealer := audit.NewSealer(a.Store, key, audit.SealerConfig{Every: a.cfg.AuditSealEvery, PreviousKeys: prev, Logger: a.log})
		m.AuditSealing(sealer.Stats)
		a.goRun(func() { sealer.Run(runCtx) })
	}
	return append(slices.Clone(prev), key.Public()), nil
}
