package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// patchUser sends PATCH /api/v1/users/{username} as c.
func patchUser(ctx context.Context, c *client.Client, username string, body map[string]any) (map[string]any, error) {
	var out map[string]any
	_, err := c.Do(ctx, http.MethodPatch, "/api/v1/users/"+url.PathEscape(username), body, &out)
	return out, err
}

func deleteUser(ctx context.Context, c *client.Client, username string) error {
	_, err := c.Do(ctx, http.MethodDelete, "/api/v1/users/"+url.PathEscape(username), nil, nil)
	return err
}

// codeOf returns the error code of a client error ("" for none).
func codeOf(err error) string {
	if e, ok := err.(*client.Error); ok {
		return e.Code
	}
	return ""
}

// statusOfList is the status of GET /api/v1/actions as c (a reviewer's
// request).
func statusOfList(ctx context.Context, c *client.Client) int {
	status, _ := c.Do(ctx, http.MethodGet, "/api/v1/actions", nil, nil)
	return status
}

func TestUsernamesAreUniqueInAnyCaseAndNotReserved(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	require.NoError(t, env.Admin.CreateUser(ctx, "rita", "rita-password-123", "reviewer"))

	for _, name := range []string{"Admin", "ADMIN", "Rita"} {
		before := rowCounts(t, env.DBURL)
		err := env.Admin.CreateUser(ctx, name, "long-enough-password", "reviewer")
		assert.Equal(t, http.StatusConflict, client.StatusOf(err), "%s beside its lower-case twin: %v", name, err)
		assert.Equal(t, before, rowCounts(t, env.DBURL), "%s: nothing written", name)
	}
	for _, name := range []string{"policy", "system", "grant", "validator", "risk", "fleet", "agent", "default", "airlock", "Policy", "SYSTEM", "AirLock"} {
		before := rowCounts(t, env.DBURL)
		err := env.Admin.CreateUser(ctx, name, "long-enough-password", "reviewer")
		assert.Equal(t, http.StatusBadRequest, client.StatusOf(err), "%s is reserved: %v", name, err)
		assert.Equal(t, "invalid", codeOf(err), name)
		assert.Equal(t, before, rowCounts(t, env.DBURL), "%s: nothing written", name)
	}

	// Login ignores case and the session carries the stored name.
	_, lr, err := env.Anon.Login(ctx, "RITA", "rita-password-123")
	require.NoError(t, err)
	assert.Equal(t, "rita", lr.User.Username)
}

func TestDisabledUserStopsAtOnce(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	rita := env.Reviewer("rita")
	require.Equal(t, http.StatusOK, statusOfList(ctx, rita))

	u, err := patchUser(ctx, env.Admin, "rita", map[string]any{"disabled": true})
	require.NoError(t, err)
	assert.Equal(t, true, u["disabled"])
	assert.Equal(t, http.StatusUnauthorized, statusOfList(ctx, rita), "the disabled user's token stops on the next request")
	_, _, err = env.Anon.Login(ctx, "rita", "rita-password-123")
	assert.Equal(t, http.StatusUnauthorized, client.StatusOf(err), "a disabled user cannot sign in")

	_, err = patchUser(ctx, env.Admin, "rita", map[string]any{"disabled": false})
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, statusOfList(ctx, rita), "enabling again does not bring old sessions back")
	again, _, err := env.Anon.Login(ctx, "rita", "rita-password-123")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, statusOfList(ctx, again))

	events, err := env.Admin.Audit(ctx, url.Values{"kind": {"user.updated"}})
	require.NoError(t, err)
	require.Len(t, events.Events, 2, "disable and enable are audited")
	assert.Equal(t, "admin", events.Events[0].Actor)
	assert.Equal(t, "rita", events.Events[0].Data["username"])
}

func TestRoleChangeTakesEffectOnTheNextRequest(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	rita := env.Reviewer("rita")
	status, _ := rita.Do(ctx, http.MethodGet, "/api/v1/audit", nil, nil)
	require.Equal(t, http.StatusForbidden, status)

	u, err := patchUser(ctx, env.Admin, "rita", map[string]any{"roles": []string{"auditor"}})
	require.NoError(t, err)
	assert.Equal(t, []any{"auditor"}, u["roles"])
	status, _ = rita.Do(ctx, http.MethodGet, "/api/v1/audit", nil, nil)
	assert.Equal(t, http.StatusOK, status, "the added role works with the same token")
	status, _ = rita.Do(ctx, http.MethodPost, "/api/v1/actions/00000000-0000-0000-0000-000000000000/deny", map[string]string{"reason": "x"}, nil)
	assert.Equal(t, http.StatusForbidden, status, "the removed role is gone with the same token")

	for name, body := range map[string]map[string]any{
		"no roles":       {"roles": []string{}},
		"not a role":     {"roles": []string{"agent"}},
		"nothing":        {},
		"unknown field":  {"admin": true},
		"short password": {"password": "short"},
	} {
		before := rowCounts(t, env.DBURL)
		_, err := patchUser(ctx, env.Admin, "rita", body)
		assert.Equal(t, http.StatusBadRequest, client.StatusOf(err), "%s: %v", name, err)
		assert.Equal(t, before, rowCounts(t, env.DBURL), "%s: nothing written", name)
	}
	_, err = patchUser(ctx, env.Admin, "nobody", map[string]any{"disabled": true})
	assert.Equal(t, http.StatusNotFound, client.StatusOf(err))
}

func TestDeleteUser(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	rita := env.Reviewer("rita")

	require.NoError(t, deleteUser(ctx, env.Admin, "Rita"), "any case names the user")
	assert.Equal(t, http.StatusUnauthorized, statusOfList(ctx, rita), "the deleted user's token stops at once")
	_, _, err := env.Anon.Login(ctx, "rita", "rita-password-123")
	assert.Equal(t, http.StatusUnauthorized, client.StatusOf(err))
	assert.Equal(t, http.StatusNotFound, client.StatusOf(deleteUser(ctx, env.Admin, "rita")), "deleting twice")
	err = env.Admin.CreateUser(ctx, "rita", "another-password-1", "reviewer")
	assert.Equal(t, http.StatusConflict, client.StatusOf(err), "a deleted user's name stays taken: the audit trail names it")

	var list struct {
		Users []map[string]any `json:"users"`
	}
	_, err = env.Admin.Do(ctx, http.MethodGet, "/api/v1/users", nil, &list)
	require.NoError(t, err)
	require.Len(t, list.Users, 1)
	assert.Equal(t, "admin", list.Users[0]["username"])

	events, err := env.Admin.Audit(ctx, url.Values{"kind": {"user.deleted"}})
	require.NoError(t, err)
	require.Len(t, events.Events, 1)
	assert.Equal(t, "rita", events.Events[0].Data["username"])

	status, _ := rita.Do(ctx, http.MethodDelete, "/api/v1/users/admin", nil, nil)
	assert.Equal(t, http.StatusUnauthorized, status)
	bob := env.Reviewer("bob")
	assert.Equal(t, http.StatusForbidden, client.StatusOf(deleteUser(ctx, bob, "admin")), "only admins delete")
}

func TestTheLastAdminStays(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	for name, body := range map[string]map[string]any{
		"disable":   {"disabled": true},
		"de-admin":  {"roles": []string{"reviewer", "auditor"}},
		"and roles": {"roles": []string{"admin"}, "disabled": true},
	} {
		before := rowCounts(t, env.DBURL)
		_, err := patchUser(ctx, env.Admin, "admin", body)
		assert.Equal(t, http.StatusConflict, client.StatusOf(err), "%s the last admin: %v", name, err)
		assert.Equal(t, before, rowCounts(t, env.DBURL), name)
	}
	assert.Equal(t, http.StatusConflict, client.StatusOf(deleteUser(ctx, env.Admin, "admin")))

	// Two admins disabling each other at once: one wins, one admin stays.
	ann := env.User("ann", "admin")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, pair := range []struct {
		by     *client.Client
		target string
	}{{env.Admin, "ann"}, {ann, "admin"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = patchUser(ctx, pair.by, pair.target, map[string]any{"disabled": true})
		}()
	}
	wg.Wait()
	var ok, conflict int
	for _, err := range errs {
		switch client.StatusOf(err) {
		case 0:
			ok++
		case http.StatusConflict, http.StatusUnauthorized: // the loser may already be disabled
			conflict++
		}
	}
	assert.Equal(t, 1, ok, "exactly one disable wins: %v", errs)
	assert.Equal(t, 1, conflict, "%v", errs)
	var list struct {
		Users []struct {
			Username string   `json:"username"`
			Roles    []string `json:"roles"`
			Disabled bool     `json:"disabled"`
		} `json:"users"`
	}
	admin := env.Admin
	if client.StatusOf(errs[0]) != 0 {
		admin = ann
	}
	_, err := admin.Do(ctx, http.MethodGet, "/api/v1/users", nil, &list)
	require.NoError(t, err)
	active := 0
	for _, u := range list.Users {
		if !u.Disabled {
			active++
		}
	}
	assert.Equal(t, 1, active, "one active admin is left: %+v", list.Users)
}

func TestOwnPasswordChange(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	rita := env.Reviewer("rita")
	other, _, err := env.Anon.Login(ctx, "rita", "rita-password-123")
	require.NoError(t, err)
	env.Reviewer("bob")

	cases := []struct {
		name    string
		body    map[string]any
		status  int
		audited int // events written (a wrong current password is a failed login)
	}{
		{"wrong current password", map[string]any{"password": "a-brand-new-password", "current_password": "not-my-password"}, http.StatusForbidden, 1},
		{"no current password", map[string]any{"password": "a-brand-new-password"}, http.StatusBadRequest, 0},
		{"own roles", map[string]any{"roles": []string{"admin"}}, http.StatusForbidden, 0},
		{"enable itself", map[string]any{"disabled": false}, http.StatusForbidden, 0},
		{"too short", map[string]any{"password": "short", "current_password": "rita-password-123"}, http.StatusBadRequest, 0},
	}
	for _, tc := range cases {
		want := rowCounts(t, env.DBURL)
		want["audit_events"] += tc.audited
		_, err := patchUser(ctx, rita, "rita", tc.body)
		assert.Equal(t, tc.status, client.StatusOf(err), "%s: %v", tc.name, err)
		assert.Equal(t, want, rowCounts(t, env.DBURL), "%s: nothing else written", tc.name)
	}
	_, err = patchUser(ctx, rita, "bob", map[string]any{"password": "a-brand-new-password", "current_password": "rita-password-123"})
	assert.Equal(t, http.StatusForbidden, client.StatusOf(err), "another user's password")

	_, err = patchUser(ctx, rita, "rita", map[string]any{"password": "a-brand-new-password", "current_password": "rita-password-123"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, statusOfList(ctx, rita), "the session that changed it goes on")
	assert.Equal(t, http.StatusUnauthorized, statusOfList(ctx, other), "the other sessions end")
	_, _, err = env.Anon.Login(ctx, "rita", "rita-password-123")
	assert.Equal(t, http.StatusUnauthorized, client.StatusOf(err), "the old password is gone")
	_, _, err = env.Anon.Login(ctx, "rita", "a-brand-new-password")
	require.NoError(t, err)

	// An admin resets another user's password without knowing it; the
	// user's sessions end.
	_, err = patchUser(ctx, env.Admin, "rita", map[string]any{"password": "reset-by-the-admin"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, statusOfList(ctx, rita))
	_, _, err = env.Anon.Login(ctx, "rita", "reset-by-the-admin")
	require.NoError(t, err)
	// For its own password an admin gives the current one too.
	_, err = patchUser(ctx, env.Admin, "admin", map[string]any{"password": "a-new-admin-password"})
	assert.Equal(t, http.StatusBadRequest, client.StatusOf(err))
}

func TestAgentOwner(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	require.NoError(t, env.Admin.CreateUser(ctx, "olga", "olga-password-123", "reviewer"))

	var a map[string]any
	_, err := env.Admin.Do(ctx, http.MethodPost, "/api/v1/agents", map[string]string{"id": "mine", "name": "Mine"}, &a)
	require.NoError(t, err)
	assert.Equal(t, "admin", a["owner"], "the registering admin owns it by default")
	_, err = env.Admin.Do(ctx, http.MethodPost, "/api/v1/agents", map[string]string{"id": "hers", "name": "Hers", "owner": "OLGA"}, &a)
	require.NoError(t, err)
	assert.Equal(t, "olga", a["owner"], "another user, by its stored name")
	before := rowCounts(t, env.DBURL)
	_, err = env.Admin.Do(ctx, http.MethodPost, "/api/v1/agents", map[string]string{"id": "orphan", "name": "x", "owner": "nobody"}, nil)
	assert.Equal(t, http.StatusBadRequest, client.StatusOf(err))
	assert.Equal(t, before, rowCounts(t, env.DBURL))

	_, err = env.Admin.Do(ctx, http.MethodGet, "/api/v1/agents/hers", nil, &a)
	require.NoError(t, err)
	assert.Equal(t, "olga", a["owner"])

	// The lead's separation of duties reads these.
	owner, err := env.App.Store.AgentOwner(ctx, "hers")
	require.NoError(t, err)
	assert.Equal(t, "olga", owner)
	tok, err := env.Admin.IssueAgentToken(ctx, "hers", 0)
	require.NoError(t, err)
	issuer, err := env.App.Store.TokenIssuer(ctx, tok.TokenID)
	require.NoError(t, err)
	assert.Equal(t, "admin", issuer)
}
