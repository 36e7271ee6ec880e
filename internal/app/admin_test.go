package app_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/app"
	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/testdb"
)

// TestResetAdminPasswordEmbedded is the way back in after a lost admin
// password, as `make run` users meet it: the server on its embedded
// database stops, the reset prints a new password, the next start takes
// it and the old one no longer works. While the server runs, the reset
// refuses with a clear error instead.
func TestResetAdminPasswordEmbedded(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "airlock-reset-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755)) // the postgres OS user must reach it
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx := context.Background()
	cfg := app.Config{Addr: "127.0.0.1:0", DataDir: dir, Worker: "off"}

	first, err := app.Start(ctx, cfg, quiet)
	require.NoError(t, err)
	lost := first.AdminPassword
	require.NotEmpty(t, lost)
	_, err = app.ResetAdminPassword(ctx, cfg, quiet, "")
	require.Error(t, err, "the embedded cluster is in use")
	assert.Contains(t, err.Error(), "stop the server using "+dir+" first")
	first.Shutdown(ctx)

	password, err := app.ResetAdminPassword(ctx, cfg, quiet, "")
	require.NoError(t, err)
	require.NotEmpty(t, password)
	require.NotEqual(t, lost, password)

	second, err := app.Start(ctx, cfg, quiet)
	require.NoError(t, err)
	defer second.Shutdown(ctx)
	assert.Empty(t, second.AdminPassword, "admin exists: the start shows no password")
	anon := client.New(second.URL(), "")
	admin, lr, err := anon.Login(ctx, "admin", password)
	require.NoError(t, err, "the printed password works")
	assert.ElementsMatch(t, []string{"admin", "reviewer", "auditor"}, lr.User.Roles)
	_, _, err = anon.Login(ctx, "admin", lost)
	assert.Equal(t, apperr.CodeUnauthorized, codeOf(err), "the old password does not")
	page, err := admin.Audit(ctx, url.Values{"kind": {"user.updated"}})
	require.NoError(t, err)
	require.Len(t, page.Events, 1, "the reset is audited")
	ev := page.Events[0]
	assert.Equal(t, "system", ev.Actor)
	assert.Equal(t, true, ev.Data["reset"])
	assert.Equal(t, true, ev.Data["password_changed"])
	assert.Contains(t, ev.Data["via"], app.ResetVia)
}

// codeOf is the API error code of err ("" for none).
func codeOf(err error) apperr.Code {
	if ce, ok := err.(*client.Error); ok {
		return apperr.Code(ce.Code)
	}
	return ""
}

// TestResetAdminPasswordRestoresAdmin: whatever became of admin (disabled,
// deleted, stripped of the admin role, never created), the reset on an
// external database makes it an admin who can sign in with the chosen
// password, and its earlier sessions end.
func TestResetAdminPasswordRestoresAdmin(t *testing.T) {
	t.Parallel()
	cases := map[string]func(t *testing.T, env *apptest.Env, ops *client.Client){
		"disabled": func(t *testing.T, env *apptest.Env, ops *client.Client) {
			_, err := ops.Do(env.Ctx(), http.MethodPatch, "/api/v1/users/admin", map[string]any{"disabled": true}, nil)
			require.NoError(t, err)
		},
		"deleted": func(t *testing.T, env *apptest.Env, ops *client.Client) {
			_, err := ops.Do(env.Ctx(), http.MethodDelete, "/api/v1/users/admin", nil, nil)
			require.NoError(t, err)
		},
		"not an admin": func(t *testing.T, env *apptest.Env, ops *client.Client) {
			_, err := ops.Do(env.Ctx(), http.MethodPatch, "/api/v1/users/admin", map[string]any{"roles": []string{"auditor"}}, nil)
			require.NoError(t, err)
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := apptest.Start(t)
			ctx := env.Ctx()
			ops := env.User("ops", "admin", "auditor")
			oldSession := env.Admin
			change(t, env, ops)
			env.Stop()

			const chosen = "a-chosen-password-42"
			cfg := env.Config
			_, err := app.ResetAdminPassword(ctx, cfg, quiet, "short")
			require.Error(t, err, "the password rule of every user applies")
			assert.Equal(t, apperr.CodeInvalid, apperr.CodeOf(err))
			got, err := app.ResetAdminPassword(ctx, cfg, quiet, chosen)
			require.NoError(t, err)
			assert.Equal(t, chosen, got)

			a, err := app.Start(ctx, cfg, quiet)
			require.NoError(t, err)
			defer a.Shutdown(ctx)
			anon := client.New(a.URL(), "")
			admin, lr, err := anon.Login(ctx, "admin", chosen)
			require.NoError(t, err)
			assert.Contains(t, lr.User.Roles, "admin")
			if name == "deleted" {
				assert.ElementsMatch(t, []string{"admin", "reviewer", "auditor"}, lr.User.Roles, "a deleted admin comes back with the first start's roles")
			}
			_, err = admin.Do(ctx, http.MethodGet, "/api/v1/users", nil, nil)
			require.NoError(t, err, "and may administer")
			_, _, err = anon.Login(ctx, "admin", apptest.AdminPassword)
			assert.Equal(t, apperr.CodeUnauthorized, codeOf(err), "the old password is gone")
			_, err = client.New(a.URL(), oldSession.Token()).Do(ctx, http.MethodGet, "/api/v1/agents", nil, nil)
			assert.Equal(t, apperr.CodeUnauthorized, codeOf(err), "the old session ended")

			ops = client.New(a.URL(), ops.Token())
			page, err := ops.Audit(ctx, url.Values{"kind": {"user.updated"}})
			require.NoError(t, err)
			var reset map[string]any
			for _, ev := range page.Events {
				if ev.Data["reset"] == true {
					reset = ev.Data
				}
			}
			require.NotNil(t, reset, "the reset is audited")
			assert.Equal(t, name == "deleted", reset["restored"] == true)
		})
	}
}

// TestResetAdminPasswordCreatesAdmin: on a database where admin was never
// created, the reset creates it (audited as user.created).
func TestResetAdminPasswordCreatesAdmin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := app.Config{Addr: "127.0.0.1:0", DatabaseURL: testdb.URL(t), DataDir: t.TempDir(), Worker: "off"}
	password, err := app.ResetAdminPassword(ctx, cfg, quiet, "")
	require.NoError(t, err)
	a, err := app.Start(ctx, cfg, quiet)
	require.NoError(t, err)
	defer a.Shutdown(ctx)
	assert.False(t, a.CreatedAdmin, "the reset created admin already")
	admin, lr, err := client.New(a.URL(), "").Login(ctx, "admin", password)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"admin", "reviewer", "auditor"}, lr.User.Roles)
	page, err := admin.Audit(ctx, url.Values{"kind": {"user.created"}})
	require.NoError(t, err)
	require.Len(t, page.Events, 1)
	assert.Equal(t, true, page.Events[0].Data["reset"])
}
