package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

// TestAuditLookupsKeepTheirPlans: a lookup of the trail by correlation ID,
// agent (and a time range), conversation or action, through the store's
// query code, has a generic plan that uses the lookup's index, so that
// PostgreSQL can run the plan cached with the prepared statement instead of
// planning each lookup afresh over every partition. The lookup indexes are
// partial: this holds only while each condition states its index's
// predicate (issue 14: a correlation-ID lookup at 5 M events went from
// ~0.8 to ~0.15 ms at the database).
func TestAuditLookupsKeepTheirPlans(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	pool := appPoolSize(t, testdb.URL(t), 1) // prepared statements and settings are the session's own
	// Every lookup gets the generic plan, and a scan of a whole (tiny)
	// partition is no way out of using the index.
	_, err := pool.Exec(ctx, `SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off`)
	require.NoError(t, err)
	s := store.New(pool, nil)

	actionID := uuid.NewString()
	var events []audit.Event
	for i := range 40 {
		ev := audit.Event{Kind: audit.KindActionSubmitted, Actor: "agent:a", AgentID: fmt.Sprintf("a%d", i%4),
			ConversationID: fmt.Sprintf("conv-%d", i%5), CorrelationID: fmt.Sprintf("corr-%d", i/4), Tool: "payments.send",
			Args: map[string]any{"amount": i}}
		if i == 7 {
			ev.ActionID = actionID
		}
		events = append(events, ev)
	}
	require.NoError(t, s.AppendEvents(ctx, events...))

	now := time.Now().UTC()
	since, until := now.Add(-time.Hour), now.Add(time.Hour)
	stamp := func(t time.Time) string { return "'" + t.Format(time.RFC3339Nano) + "'" }
	lookups := []struct {
		name, cond string // cond: a condition only that lookup's statement holds
		filter     audit.Filter
		want       int
		params     string // the statement's parameters, for EXPLAIN EXECUTE
		index      string // what the names of the lookup index's partitions end in
	}{
		{"correlation ID", "correlation_id = $2", audit.Filter{CorrelationID: "corr-3"}, 4,
			"0, 'corr-3', 101", "_correlation_id_id_idx"},
		{"agent and time range", "agent_id = $2", audit.Filter{AgentID: "a1", Since: since, Until: until}, 10,
			"0, 'a1', " + stamp(since) + ", " + stamp(until) + ", 101", "_agent_id_id_at_idx"},
		{"conversation", "conversation_id = $2", audit.Filter{ConversationID: "conv-2"}, 8,
			"0, 'conv-2', 101", "_conversation_id_id_idx"},
		{"action", "action_id = $2", audit.Filter{ActionID: actionID}, 1,
			"0, '" + actionID + "', 101", "_action_id_id_idx"},
	}
	for _, l := range lookups {
		l.filter.Limit = audit.DefaultLimit
		evs, _, err := s.QueryEvents(ctx, l.filter)
		require.NoError(t, err, l.name)
		require.Len(t, evs, l.want, l.name)
	}

	type prepared struct{ Name, Statement string }
	rows, err := pool.Query(ctx, `SELECT name, statement FROM pg_prepared_statements`)
	require.NoError(t, err)
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[prepared])
	require.NoError(t, err)
	for _, l := range lookups {
		var found []prepared
		for _, p := range all {
			if strings.Contains(p.Statement, "FROM audit_events") && strings.Contains(p.Statement, l.cond) {
				found = append(found, p)
			}
		}
		require.Len(t, found, 1, "%s: one prepared statement", l.name)
		rows, err := pool.Query(ctx, `EXPLAIN EXECUTE "`+found[0].Name+`"(`+l.params+`)`)
		require.NoError(t, err, l.name)
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err, l.name)
		assert.Contains(t, strings.Join(plan, "\n"), l.index, "%s: the generic plan does not use the lookup index:\n%s\n%s",
			l.name, found[0].Statement, strings.Join(plan, "\n"))
	}
}

// TestSealerKeyReadRunsItsGenericPlan: the read every sealer tick makes
// (the keys above the last sealed id) runs the generic plan cached with
// it, never a plan made for one tick's value: such a plan prunes no
// partition (events are found by id), costs a planning over every
// partition each tick, and with the newest partition's statistics behind
// its rows sorted every unsealed event to keep a batch of them (issue 14:
// 8.1 ms against 0.8 ms for 1,000 keys of 8,750). Its limit is in the
// text (a generic LIMIT $2 is costed so high that JIT compiles it at 20 M
// events). Other statements on the same connection, the sealer's too,
// keep PostgreSQL's choice.
func TestSealerKeyReadRunsItsGenericPlan(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	pool := appPoolSize(t, testdb.URL(t), 1) // the sealer's prepared statements are this connection's
	s := store.New(pool, nil)
	sealer := audit.NewSealer(s, store.NewTestKey(t), audit.SealerConfig{Batch: 5})
	for i := range 8 {
		require.NoError(t, s.AppendEvents(ctx, audit.Event{Kind: audit.KindActionSubmitted, Actor: "agent:a", AgentID: "a",
			CorrelationID: fmt.Sprintf("corr-%d", i), Tool: "fs.read", Args: map[string]any{"path": "/srv/x"}}))
		_, err := sealer.Seal(ctx)
		require.NoError(t, err)
	}
	// A statement outside the sealer, prepared on the same connection.
	evs, _, err := s.QueryEvents(ctx, audit.Filter{CorrelationID: "corr-3", Limit: audit.DefaultLimit})
	require.NoError(t, err)
	require.Len(t, evs, 1)

	type prepared struct {
		Statement            string
		GenericPlans, Custom int64
	}
	rows, err := pool.Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
	require.NoError(t, err)
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[prepared])
	require.NoError(t, err)
	plans := func(fragment string) prepared {
		t.Helper()
		for _, p := range all {
			if strings.Contains(p.Statement, fragment) {
				return p
			}
		}
		t.Fatalf("no prepared statement holds %q", fragment)
		return prepared{}
	}
	keys := plans("FROM audit_events WHERE id > $1 ORDER BY id LIMIT 5")
	assert.Zero(t, keys.Custom, "the key read was planned for a tick's value")
	assert.GreaterOrEqual(t, keys.GenericPlans, int64(8), "the key read runs its generic plan every tick")
	assert.NotZero(t, plans("SELECT id FROM audit_seals WHERE id > $1 ORDER BY id").Custom,
		"the setting outlived the key read")
	assert.NotZero(t, plans("correlation_id = $2").Custom, "the setting outlived the sealer's transaction")
}
