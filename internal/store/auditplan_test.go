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
