package store_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

// TestMigrationLowersStoredToolPatterns: a policy stored before tool names
// were canonical (a rule for "Payments.*") still compiles after migration
// 00014 and still denies what it denied.
func TestMigrationLowersStoredToolPatterns(t *testing.T) {
	t.Parallel()
	s := store.New(testdb.New(t), nil)
	ctx := ctxT(t)
	_, err := s.CreateAgent(ctx, store.Agent{ID: "payer", Name: "payer"})
	require.NoError(t, err)
	_, err = s.Pool().Exec(ctx, `INSERT INTO policies (scope, version, document, created_by) VALUES ($1, 1, $2, 'admin')`,
		store.AgentScope("payer"), `{"rules":[{"id":"no-pay","tool":"Payments.*","effect":"deny"},{"id":"rest","tool":"*","effect":"allow","when":"args.X == 'Y'"}]}`)
	require.NoError(t, err)
	_, _, err = s.AgentPolicy(ctx, "payer")
	require.Error(t, err, "before the migration the stored policy no longer compiles")

	sql, _ := migrationSQL(t, "00014_fidelity.sql")
	_, err = s.Pool().Exec(ctx, sql)
	require.NoError(t, err)

	fresh := store.New(s.Pool(), nil) // no compiled-policy cache
	_, set, err := fresh.AgentPolicy(ctx, "payer")
	require.NoError(t, err)
	d := set.Decide(policy.Input{Tool: "payments.send", Args: map[string]any{}})
	assert.Equal(t, policy.Deny, d.Effect)
	assert.Equal(t, "no-pay", d.RuleID)
	doc := set.Agent.Document()
	assert.Equal(t, "args.X == 'Y'", doc.Rules[1].When, "only tool patterns change")
}
