package app_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/app"
	"github.com/airlockhq/airlock/internal/testdb"
)

// TestBusyPortCreatesNothing: a first start whose port is taken fails
// with an error naming the address before it creates anything, so the
// next start still creates admin and shows its generated password. Before,
// admin was created with a password no one ever saw.
func TestBusyPortCreatesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	dbURL := testdb.URL(t)
	dir := t.TempDir()
	cfg := app.Config{Addr: busy.Addr().String(), DatabaseURL: dbURL, DataDir: dir, Worker: "off"}

	_, err = app.Start(ctx, cfg, quiet)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot listen on "+busy.Addr().String())
	assert.Contains(t, err.Error(), "address already in use")

	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var users int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM users`).Scan(&users))
	assert.Zero(t, users, "no user was created")
	assert.NoFileExists(t, filepath.Join(dir, "jwt.key"), "no key was created")

	cfg.Addr = "127.0.0.1:0"
	a, err := app.Start(ctx, cfg, quiet)
	require.NoError(t, err)
	defer a.Shutdown(ctx)
	require.True(t, a.CreatedAdmin, "the next start creates admin")
	require.NotEmpty(t, a.AdminPassword, "and shows its password")
	_, _, err = client.New(a.URL(), "").Login(ctx, "admin", a.AdminPassword)
	require.NoError(t, err)
}
