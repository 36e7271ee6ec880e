package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apptest"
)

// TestBodylessPostsRefuseWhatTheyWouldDrop: a POST that takes no field
// takes no body or {}; any other body is refused, as strictly as every
// body, before anything is done — never silently ignored.
func TestBodylessPostsRefuseWhatTheyWouldDrop(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	require.NoError(t, env.Admin.CreateAgent(ctx, "target", "Target"))
	admin := loginToken(t, env)
	suspended := func() bool {
		a, err := env.Admin.Agent(ctx, "target")
		require.NoError(t, err)
		return a.SuspendedAt != nil
	}

	refused := []struct {
		name, method, path, contentType string
		body                            string
		status                          int
		code, field                     string
	}{
		{"fleet resume with a reason", "POST", "/api/v1/fleet/resume", "", `{"reason":"why"}`, 400, "invalid_json", "reason"},
		{"suspend with a text body", "POST", "/api/v1/agents/target/suspend", "text/plain", "garbage", 415, "unsupported_media_type", ""},
		{"suspend with a JSON that is not an object", "POST", "/api/v1/agents/target/suspend", "", `garbage`, 400, "invalid_json", ""},
		{"resume with fields", "POST", "/api/v1/agents/target/resume", "", `{"reason":"x","admin":true}`, 400, "invalid_json", "admin"},
		{"logout with a text body", "POST", "/api/v1/auth/logout", "text/plain", "bye", 415, "unsupported_media_type", ""},
		{"logout with a field", "POST", "/api/v1/auth/logout", "", `{"everywhere":true}`, 400, "invalid_json", "everywhere"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			resp := rawRequest(t, tc.method, env.URL+tc.path, admin, tc.contentType, []byte(tc.body))
			require.Equal(t, tc.status, resp.status, "%v", resp.body)
			e := errorOf(resp.body)
			assert.Equal(t, tc.code, e["code"])
			if tc.field != "" {
				assert.Contains(t, e["message"], `unknown field "`+tc.field+`"`)
			}
		})
	}
	assert.False(t, suspended(), "a refused suspend did nothing")
	resp := rawRequest(t, "GET", env.URL+"/api/v1/fleet/suspension", admin, "", nil)
	assert.Equal(t, http.StatusOK, resp.status, "a refused logout left the session")

	// No body, or {}: as before.
	for _, body := range []string{"", "{}"} {
		resp = rawRequest(t, "POST", env.URL+"/api/v1/agents/target/suspend", admin, "", []byte(body))
		require.Equal(t, http.StatusOK, resp.status, "%q: %v", body, resp.body)
		assert.True(t, suspended())
		resp = rawRequest(t, "POST", env.URL+"/api/v1/agents/target/resume", admin, "", []byte(body))
		require.Equal(t, http.StatusOK, resp.status, "%q: %v", body, resp.body)
		assert.False(t, suspended())
		resp = rawRequest(t, "POST", env.URL+"/api/v1/fleet/resume", admin, "", []byte(body))
		require.Equal(t, http.StatusOK, resp.status, "%q: %v", body, resp.body)
		resp = rawRequest(t, "POST", env.URL+"/api/v1/auth/logout", loginToken(t, env), "", []byte(body))
		require.Equal(t, http.StatusNoContent, resp.status, "%q: %v", body, resp.body)
	}
}
