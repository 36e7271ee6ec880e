package testdb

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/peterldowns/pgtestdb"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { Main(m) }

func TestParallelTestsGetTheirOwnDatabase(t *testing.T) {
	var inserted sync.WaitGroup
	inserted.Add(2)
	for _, id := range []string{"agent-a", "agent-b"} {
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			t0 := time.Now()
			pool := New(t)
			t.Logf("fresh migrated database in %v", time.Since(t0))
			_, err := pool.Exec(ctx, "INSERT INTO agents (id, name, created_by) VALUES ($1, $1, 'test')", id)
			require.NoError(t, err)
			inserted.Done()
			// Both rows now exist, each in its own database.
			waitTimeout(t, &inserted, 30*time.Second)
			var ids []string
			rows, err := pool.Query(ctx, "SELECT id FROM agents ORDER BY id")
			require.NoError(t, err)
			ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			require.Equal(t, []string{id}, ids)
		})
	}
}

func TestMigrationsApplied(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := New(t)
	var actions, users bool
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT to_regclass('public.actions') IS NOT NULL, to_regclass('public.users') IS NOT NULL").Scan(&actions, &users))
	require.True(t, actions, "table actions exists")
	require.True(t, users, "table users exists")
	var versions int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM goose_db_version WHERE version_id > 0").Scan(&versions))
	require.Positive(t, versions)
}

func TestURLAndCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := URL(t)
	require.True(t, strings.HasPrefix(u, "postgres://"), u)
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	var db string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&db))
	// A connection left open (like a server under test that was not shut
	// down) does not prevent the database from being dropped.
	t.Cleanup(func() { _ = conn.Close(context.Background()) })

	c := Cluster(t)
	su, err := pgx.Connect(ctx, c.URL("postgres"))
	require.NoError(t, err)
	defer su.Close(ctx)
	var exists, superuser bool
	require.NoError(t, su.QueryRow(ctx,
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1), current_setting('is_superuser') = 'on'", db).Scan(&exists, &superuser))
	require.True(t, exists)
	require.True(t, superuser)

	require.NoError(t, c.CreateDatabase(ctx, "extra"))
}

// TestExternalURLConfig exercises the AIRLOCK_TEST_DATABASE_URL path
// against the embedded cluster's own URL.
func TestExternalURLConfig(t *testing.T) {
	t.Parallel()
	conf, err := configFromURL(Cluster(t).URL("postgres"))
	require.NoError(t, err)
	conf.ForceTerminateConnections = true
	db := pgtestdb.New(t, conf, migrator{})
	var n int
	require.NoError(t, db.QueryRow("SELECT count(*) FROM actions").Scan(&n))
	require.Zero(t, n)
}

func TestConfigFromURL(t *testing.T) {
	conf, err := configFromURL("postgresql://u%40x:p%2Fw%3A@db.example:6543/app?sslmode=require")
	require.NoError(t, err)
	require.Equal(t, "app", conf.Database)
	require.Equal(t, "host=db.example&port=6543&sslmode=require", conf.Options)
	pc, err := pgx.ParseConfig(conf.URL())
	require.NoError(t, err)
	require.Equal(t, "u@x", pc.User)
	require.Equal(t, "p/w:", pc.Password)
	require.Equal(t, "db.example", pc.Host)
	require.Equal(t, uint16(6543), pc.Port)
	require.Equal(t, "app", pc.Database)

	conf, err = configFromURL("postgres:///?host=/var/run/postgresql&user=me")
	require.NoError(t, err)
	require.Equal(t, "postgres", conf.Database)
	pc, err = pgx.ParseConfig(conf.URL())
	require.NoError(t, err)
	require.Equal(t, "me", pc.User)
	require.Equal(t, "/var/run/postgresql", pc.Host)

	_, err = configFromURL("host=localhost user=me")
	require.Error(t, err)
}

func waitTimeout(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatal("timed out waiting for the other test")
	}
}
