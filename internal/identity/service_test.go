package identity_test

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/identity"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

type fixture struct {
	svc   *identity.Service
	store *store.Store
	admin *auth.Principal
}

// setup is a fresh database with the admin "admin" and the reviewers
// "rita" and "bob", each signed in.
func setup(t *testing.T) *fixture {
	t.Helper()
	st := store.New(testdb.New(t), slog.New(slog.NewTextHandler(io.Discard, nil)))
	key := make([]byte, auth.KeySize)
	_, _ = rand.Read(key)
	signer, err := auth.NewSigner(key)
	require.NoError(t, err)
	f := &fixture{svc: identity.NewService(identity.Config{Store: st, Signer: signer}), store: st}
	ctx := context.Background()
	_, err = st.CreateUser(ctx, identity.User{Username: "admin", PasswordHash: mustHash(t, "admin-password-1"), Roles: []auth.Role{auth.RoleAdmin}}, "system")
	require.NoError(t, err)
	f.admin = f.login(t, "admin", "admin-password-1")
	for _, name := range []string{"rita", "bob"} {
		// Through the store, with a hash made once for the package: each
		// argon2id hash takes one of the process's few hashing slots, and
		// the tests run in parallel with the rest of the suite, so fewer
		// hashes keep them clear of PasswordWait (errPasswordBusy) on a
		// loaded machine. CreateUser's own rules are tested below.
		_, err := st.CreateUser(ctx, identity.User{Username: name, PasswordHash: mustHash(t, name+"-password-1"), Roles: []auth.Role{auth.RoleReviewer}}, "admin")
		require.NoError(t, err)
	}
	return f
}

// hashes are the fixture's password hashes, each made once.
var hashes sync.Map // password → hash

func mustHash(t *testing.T, password string) string {
	t.Helper()
	if h, ok := hashes.Load(password); ok {
		return h.(string)
	}
	h, err := auth.HashPassword(context.Background(), password)
	require.NoError(t, err)
	hashes.Store(password, h)
	return h
}

// login signs in and returns the principal of the session, as the
// authenticator sees it.
func (f *fixture) login(t *testing.T, username, password string) *auth.Principal {
	t.Helper()
	tok, _, err := f.svc.Login(context.Background(), username, password, netip.MustParseAddr("127.0.0.1"))
	require.NoError(t, err)
	p, err := f.svc.Authenticate(context.Background(), tok.Raw, identity.Cookie)
	require.NoError(t, err)
	return p
}

func ptr[T any](v T) *T { return &v }

func TestWhoMayChangeWhom(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rita := f.login(t, "rita", "rita-password-1")
	agent := &auth.Principal{Kind: auth.KindAgent, Subject: "bot", Roles: []auth.Role{auth.RoleAgent}, TokenID: "x"}
	cases := []struct {
		name   string
		actor  *auth.Principal
		target string
		patch  identity.UserPatch
		want   apperr.Code
	}{
		{"a reviewer re-roles itself", rita, "rita", identity.UserPatch{Roles: &[]auth.Role{auth.RoleAdmin}}, apperr.CodeForbidden},
		{"a reviewer disables another", rita, "bob", identity.UserPatch{Disabled: ptr(true)}, apperr.CodeForbidden},
		{"a reviewer sets another's password", rita, "bob", identity.UserPatch{Password: ptr("a-long-password-1"), CurrentPassword: ptr("rita-password-1")}, apperr.CodeForbidden},
		{"own password without the current one", rita, "rita", identity.UserPatch{Password: ptr("a-long-password-1")}, apperr.CodeInvalid},
		{"own password with a wrong current one", rita, "RITA", identity.UserPatch{Password: ptr("a-long-password-1"), CurrentPassword: ptr("nope-nope-nope")}, apperr.CodeForbidden},
		{"current password without a new one", rita, "rita", identity.UserPatch{CurrentPassword: ptr("rita-password-1")}, apperr.CodeInvalid},
		{"an admin gives current_password for another", f.admin, "bob", identity.UserPatch{Password: ptr("a-long-password-1"), CurrentPassword: ptr("x")}, apperr.CodeInvalid},
		{"an agent token", agent, "bob", identity.UserPatch{Disabled: ptr(true)}, apperr.CodeForbidden},
		{"an empty patch", f.admin, "bob", identity.UserPatch{}, apperr.CodeInvalid},
		{"a reserved role", f.admin, "bob", identity.UserPatch{Roles: &[]auth.Role{auth.RoleWorker}}, apperr.CodeInvalid},
		{"an unknown user", f.admin, "nobody", identity.UserPatch{Disabled: ptr(true)}, apperr.CodeNotFound},
		{"the last admin disabled", f.admin, "admin", identity.UserPatch{Disabled: ptr(true)}, apperr.CodeConflict},
	}
	for _, tc := range cases {
		_, err := f.svc.UpdateUser(context.Background(), tc.actor, tc.target, tc.patch)
		assert.Equal(t, tc.want, apperr.CodeOf(err), "%s: %v", tc.name, err)
	}
	for _, name := range []string{"policy", "System", "AIRLOCK", "grant", "validator", "risk", "fleet", "agent", "default"} {
		assert.True(t, identity.Reserved(name), name)
	}
	assert.False(t, identity.Reserved("policy-bot"))
}

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, err := f.store.CreateAgent(ctx, identity.Agent{ID: "bot", Name: "bot", CreatedBy: "admin"})
	require.NoError(t, err)
	agentTok, err := f.svc.IssueAgentToken(ctx, f.admin, "bot", time.Hour)
	require.NoError(t, err)
	ritaTok, _, err := f.svc.Login(ctx, "rita", "rita-password-1", netip.Addr{})
	require.NoError(t, err)

	_, err = f.svc.Authenticate(ctx, agentTok.Raw, identity.Cookie)
	assert.Equal(t, apperr.CodeUnauthorized, apperr.CodeOf(err), "a cookie holds only a user session")
	p, err := f.svc.Authenticate(ctx, agentTok.Raw, identity.Bearer)
	require.NoError(t, err)
	assert.Equal(t, []auth.Role{auth.RoleAgent}, p.Roles)

	// The stored roles count, not the token's.
	_, err = f.svc.UpdateUser(ctx, f.admin, "rita", identity.UserPatch{Roles: &[]auth.Role{auth.RoleAuditor}})
	require.NoError(t, err)
	p, err = f.svc.Authenticate(ctx, ritaTok.Raw, identity.Bearer)
	require.NoError(t, err)
	assert.Equal(t, []auth.Role{auth.RoleAuditor}, p.Roles)

	// A disabled user is refused, also on the submit path's signed-only check.
	_, err = f.svc.UpdateUser(ctx, f.admin, "rita", identity.UserPatch{Disabled: ptr(true)})
	require.NoError(t, err)
	_, err = f.svc.Authenticate(ctx, ritaTok.Raw, identity.Bearer)
	assert.Equal(t, apperr.CodeUnauthorized, apperr.CodeOf(err))
	_, err = f.svc.AuthenticateSigned(ctx, ritaTok.Raw, identity.Bearer, auth.KindAgent)
	assert.Equal(t, apperr.CodeUnauthorized, apperr.CodeOf(err), "only agent tokens skip the database check")

	// An agent token on the submit path is only verified: the insert checks
	// it in the same statement (hitl.Guard.TokenID).
	require.NoError(t, f.store.RevokeToken(ctx, agentTok.ID, "admin"))
	_, err = f.svc.Authenticate(ctx, agentTok.Raw, identity.Bearer)
	assert.Equal(t, apperr.CodeUnauthorized, apperr.CodeOf(err))
	_, err = f.svc.AuthenticateSigned(ctx, agentTok.Raw, identity.Bearer, auth.KindAgent)
	assert.NoError(t, err)
}

func TestTokenLifetimeRule(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, err := f.store.CreateAgent(ctx, identity.Agent{ID: "bot", Name: "bot", CreatedBy: "admin"})
	require.NoError(t, err)
	for ttl, want := range map[time.Duration]apperr.Code{
		0:                      "",
		time.Second:            "",
		30 * time.Second:       "",
		366 * 24 * time.Hour:   "",
		-time.Second:           apperr.CodeInvalid,
		time.Millisecond:       apperr.CodeInvalid,
		367 * 24 * time.Hour:   apperr.CodeInvalid,
		time.Duration(1 << 62): apperr.CodeInvalid,
	} {
		_, err := f.svc.IssueAgentToken(ctx, f.admin, "bot", ttl)
		if want == "" {
			assert.NoError(t, err, "%s", ttl)
		} else {
			assert.Equal(t, want, apperr.CodeOf(err), "%s", ttl)
		}
	}
}
