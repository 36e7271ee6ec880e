package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apptest"
)

// TestPathParametersAreDecoded: a percent-encoded path parameter names what
// it encodes, decoded once, and an escaped "/" stays inside its segment.
func TestPathParametersAreDecoded(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	require.NoError(t, env.Admin.CreateUser(ctx, "alice@corp", "alice-password-123", "reviewer"))
	require.NoError(t, env.Admin.CreateAgent(ctx, "target", "Target"))
	admin := loginToken(t, env)

	resp := rawRequest(t, http.MethodPatch, env.URL+"/api/v1/users/alice%40corp", admin, "", []byte(`{"disabled":true}`))
	require.Equal(t, http.StatusOK, resp.status, "%v", resp.body)
	assert.Equal(t, "alice@corp", resp.body["username"])
	assert.Equal(t, true, resp.body["disabled"])

	resp = rawRequest(t, http.MethodGet, env.URL+"/api/v1/agents/t%61rget", admin, "", nil)
	require.Equal(t, http.StatusOK, resp.status, "%v", resp.body)
	assert.Equal(t, "target", resp.body["id"])

	// Decoded once: %2561 is "%61", not "a".
	resp = rawRequest(t, http.MethodGet, env.URL+"/api/v1/agents/t%2561rget", admin, "", nil)
	require.Equal(t, http.StatusNotFound, resp.status, "%v", resp.body)
	assert.Equal(t, `no agent "t%61rget"`, errorOf(resp.body)["message"])

	// An escaped "/" is data inside its segment: it never selects another
	// route, and the id holding it is judged as any other id (the
	// document's validator routes on the decoded path, so these go out
	// unvalidated).
	plain := &http.Client{Timeout: 30 * time.Second}
	send := func(method, path string) (int, map[string]any, http.Header) {
		req, err := http.NewRequest(method, env.URL+path, bytes.NewReader(nil))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+admin)
		r, err := plain.Do(req)
		require.NoError(t, err)
		defer r.Body.Close()
		data, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		var body map[string]any
		require.NoError(t, json.Unmarshal(data, &body), "%s", data)
		return r.StatusCode, body, r.Header
	}
	status, body, _ := send(http.MethodGet, "/api/v1/agents/target%2Fpolicy")
	require.Equal(t, http.StatusNotFound, status, "%v", body)
	assert.Equal(t, `no agent "target/policy"`, errorOf(body)["message"])
	status, body, hdr := send(http.MethodPost, "/api/v1/agents/target%2Fsuspend")
	require.Equal(t, http.StatusMethodNotAllowed, status, "%v", body)
	assert.Equal(t, "GET", hdr.Get("Allow"))
	a, err := env.Admin.Agent(ctx, "target")
	require.NoError(t, err)
	assert.Nil(t, a.SuspendedAt, "target was not suspended")
}

func errorOf(body map[string]any) map[string]any {
	e, _ := body["error"].(map[string]any)
	return e
}
