package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

// TestEnsurePartitionsPastShadows: audit_ensure_partitions runs as the
// tables' owner (SECURITY DEFINER) for the server's role, which may make
// temporary tables, and a session's temporary schema is searched before
// any search path that does not name it. A temporary table named like the
// coming month's partition, made in the session the server then calls the
// function from, was taken for the partition: the month was left without
// one (no error), and an event dated in it was refused. A temporary
// audit_events made the call fail. Now the function looks in its own
// schema only: the partition is made, with its trigger and without
// privileges of airlock_app, and the temporary table is left as it was. A
// table of that name in the schema that is not a partition of audit_events
// (only a role that may create there can have made it) is an error, not a
// partition.
func TestEnsurePartitionsPastShadows(t *testing.T) {
	t.Parallel()
	// A month no partition covers yet (the migration makes them up to two
	// months ahead).
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month()+5, 1, 0, 0, 0, 0, time.UTC)
	part := "audit_events_" + month.Format("2006_01")
	shadows := map[string]string{
		"a temporary table named like the partition": `CREATE TEMP TABLE ` + part + ` (x int)`,
		"a temporary audit_events":                   `CREATE TEMP TABLE audit_events (at timestamptz NOT NULL) PARTITION BY RANGE (at)`,
	}
	for name, shadow := range shadows {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url := testdb.URL(t)
			owner := ownerPool(t, url)
			// One connection: the session that makes the shadow is the one
			// the server's call runs in.
			app := appPoolSize(t, url, 1)
			ctx := ctxT(t)
			_, err := app.Exec(ctx, shadow)
			require.NoError(t, err, "the server's role may make temporary tables")

			require.NoError(t, store.New(app, nil).EnsureAuditPartitions(ctx, month, month.Add(24*time.Hour)))

			var parent string
			var triggers, grants int
			err = owner.QueryRow(ctx, `SELECT i.inhparent::regclass::text,
					(SELECT count(*) FROM pg_trigger WHERE tgrelid = c.oid AND tgname = 'audit_events_truncate'),
					(SELECT count(*) FROM aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a
					 WHERE a.grantee = 'airlock_app'::regrole)
				FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid
				WHERE c.relnamespace = 'public'::regnamespace AND c.relname = $1`, part).Scan(&parent, &triggers, &grants)
			require.NoError(t, err, "the month's partition exists")
			assert.Equal(t, "audit_events", parent)
			assert.Equal(t, 1, triggers, "the partition's truncate trigger")
			assert.Zero(t, grants, "airlock_app reaches the partition through audit_events only")

			// An event dated in the month goes in (rolled back).
			tx, err := owner.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			_, err = tx.Exec(ctx, `INSERT INTO audit_events (at, kind, actor) VALUES ($1, 'auth.login', 'alice')`, month.Add(time.Hour))
			require.NoError(t, err)
			require.NoError(t, tx.Rollback(ctx))

			// The shadow is as it was: nothing was made of it or on it.
			var temp, tempTriggers int
			require.NoError(t, app.QueryRow(ctx, `SELECT count(*), coalesce(sum((SELECT count(*) FROM pg_trigger WHERE tgrelid = c.oid)), 0)
				FROM pg_class c WHERE c.relnamespace = pg_my_temp_schema()`).Scan(&temp, &tempTriggers))
			assert.Equal(t, 1, temp)
			assert.Zero(t, tempTriggers)
		})
	}
	t.Run("a table of the name that is not a partition", func(t *testing.T) {
		t.Parallel()
		url := testdb.URL(t)
		owner := ownerPool(t, url)
		ctx := ctxT(t)
		_, err := owner.Exec(ctx, fmt.Sprintf(`CREATE TABLE public.%s (x int)`, part))
		require.NoError(t, err)
		err = store.New(appPool(t, url), nil).EnsureAuditPartitions(ctx, month, month)
		require.ErrorContains(t, err, "public."+part+" is not a partition of public.audit_events")
	})
	t.Run("the migration goes down and up again", func(t *testing.T) {
		t.Parallel()
		url := testdb.URL(t)
		owner := ownerPool(t, url)
		ctx := ctxT(t)
		up, down := migrationSQL(t, "00037_audit_partitions_qualified.sql")
		for _, q := range []string{down, up} {
			_, err := owner.Exec(ctx, q)
			require.NoError(t, err)
		}
		var config []string
		var definer bool
		require.NoError(t, owner.QueryRow(ctx, `SELECT proconfig, prosecdef FROM pg_proc
			WHERE oid = 'public.audit_ensure_partitions(timestamptz, timestamptz)'::regprocedure`).Scan(&config, &definer))
		assert.True(t, definer)
		assert.Equal(t, []string{"search_path=pg_catalog, public, pg_temp"}, config)
		require.NoError(t, store.New(appPool(t, url), nil).EnsureAuditPartitions(ctx, month, month))
	})
}

// ownerPool connects to url as the role that ran the migrations (the
// tables' owner).
func ownerPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(ctxT(t), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}
