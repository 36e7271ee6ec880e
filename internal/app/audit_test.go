package app_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/testdb"
)

// TestServerAsAppRoleMember is the hardened deployment: the migrations ran
// as the tables' owner, and the server logs in as a role that is only a
// member of airlock_app. It works, and even SQL that drops the assumed role
// (RESET ROLE) is left without the right to change the audit trail.
func TestServerAsAppRoleMember(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	migrated := testdb.URL(t) // migrated by the owner
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	login := "airlock_member_" + hex.EncodeToString(b)
	su, err := pgx.Connect(ctx, testdb.Cluster(t).URL("postgres"))
	require.NoError(t, err)
	defer su.Close(context.Background())
	_, err = su.Exec(ctx, `CREATE ROLE `+login+` LOGIN IN ROLE airlock_app`)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = su.Exec(context.Background(), `DROP ROLE IF EXISTS `+login) })

	u, err := url.Parse(migrated)
	require.NoError(t, err)
	u.User = url.User(login)
	env := apptest.Start(t, apptest.Options{DatabaseURL: u.String()})
	agent := env.Agent("reader", map[string]any{"rules": []map[string]any{{"id": "r", "tool": "fs.read", "effect": "allow"}}})
	a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "fs.read", Args: map[string]any{"path": "/x"}})
	require.NoError(t, err)
	assert.Equal(t, "approved", a.Status)
	var server string
	require.NoError(t, env.App.Pool().QueryRow(ctx, `SELECT current_user`).Scan(&server))
	assert.Equal(t, "airlock_app", server)

	conn, err := pgx.Connect(ctx, u.String())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var who string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_user`).Scan(&who))
	require.Equal(t, login, who)
	for _, stmt := range []string{`UPDATE audit_events SET actor = 'mallory'`, `DELETE FROM audit_events`,
		`ALTER TABLE audit_events DISABLE TRIGGER ALL`, `DELETE FROM audit_checkpoints`,
		`UPDATE audit_seals SET hash = hash`, `DELETE FROM audit_seals`, `ALTER TABLE audit_seals DISABLE TRIGGER ALL`} {
		_, err := conn.Exec(ctx, stmt)
		assert.Error(t, err, stmt)
	}
}
