package groups_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/groups"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func setup(t *testing.T, users ...string) (*groups.Service, context.Context) {
	t.Helper()
	s := store.New(testdb.New(t), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	for _, u := range users {
		_, err := s.Pool().Exec(ctx, `INSERT INTO users (username, password_hash, roles) VALUES ($1, 'x', '{reviewer}')`, u)
		require.NoError(t, err)
	}
	return groups.NewService(s), ctx
}

func TestValidate(t *testing.T) {
	t.Parallel()
	g, err := groups.Validate(groups.Group{Name: "ops", Members: []string{"bob", "alice", "Bob"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"alice", "bob"}, g.Members, "sorted, case-insensitive duplicates dropped")
	for _, bad := range []groups.Group{{Name: "", Members: []string{}}, {Name: "Ops", Members: []string{}}, {Name: "ops"}, {Name: "ops", Members: []string{""}}} {
		_, err := groups.Validate(bad)
		assert.Equal(t, apperr.CodeInvalid, apperr.CodeOf(err), "%+v", bad)
	}
}

// TestSyncMembershipsKeepsWhatAdminsSet: an identity provider's sync sets
// exactly its own memberships; an admin's stay, unknown groups are ignored.
func TestSyncMembershipsKeepsWhatAdminsSet(t *testing.T) {
	t.Parallel()
	svc, ctx := setup(t, "alice")
	for _, name := range []string{"leads", "oncall", "payments"} {
		_, err := svc.Create(ctx, "admin", groups.Group{Name: name, Members: []string{}})
		require.NoError(t, err)
	}
	_, err := svc.Replace(ctx, "admin", groups.Group{Name: "leads", Members: []string{"alice"}})
	require.NoError(t, err)

	got, err := svc.SyncMemberships(ctx, "ALICE", "oidc", []string{"oncall", "payments", "no-such-group"})
	require.NoError(t, err)
	assert.Equal(t, []string{"oncall", "payments"}, got)
	all, err := svc.UserGroups(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, []string{"leads", "oncall", "payments"}, all)

	got, err = svc.SyncMemberships(ctx, "alice", "oidc", []string{"oncall"})
	require.NoError(t, err)
	assert.Equal(t, []string{"oncall"}, got, "the group removed at the provider is gone")
	all, err = svc.UserGroups(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, []string{"leads", "oncall"}, all, "the admin's membership stays")

	_, err = svc.SyncMemberships(ctx, "alice", groups.SourceLocal, nil)
	assert.Equal(t, apperr.CodeInvalid, apperr.CodeOf(err))
	_, err = svc.SyncMemberships(ctx, "nobody", "oidc", nil)
	assert.Equal(t, apperr.CodeNotFound, apperr.CodeOf(err))
}
