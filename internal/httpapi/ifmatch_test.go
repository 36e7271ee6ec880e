package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/httpapi"
	"github.com/airlockhq/airlock/internal/openapi"
)

// call is one request with headers, answered with the response and its
// decoded JSON body (nil when there is none).
func call(t *testing.T, env *apptest.Env, method, path, token string, body any, headers ...string) (*http.Response, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(env.Ctx(), method, env.URL+path, rd)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := env.HTTP.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	if len(data) > 0 && resp.Header.Get("Content-Type") == "application/json" {
		require.NoError(t, json.Unmarshal(data, &out), "body: %s", data)
	}
	return resp, out
}

func errorCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func onlyReads(id string) map[string]any {
	return map[string]any{"rules": []map[string]any{{"id": id, "tool": "fs.read", "effect": "allow"}}}
}

// TestPolicyIfMatch: a policy PUT with If-Match naming a version that is
// no longer current gets 412 and writes nothing; GET and PUT name the
// version in ETag; without If-Match the write stays unconditional.
func TestPolicyIfMatch(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	admin := loginToken(t, env)
	env.Agent("bot", nil)

	for _, tc := range []struct{ name, path string }{
		{"fleet", "/api/v1/fleet/policy"},
		{"agent", "/api/v1/agents/bot/policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "fleet" {
				resp, _ := call(t, env, http.MethodGet, tc.path, admin, nil)
				require.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Equal(t, `"0"`, resp.Header.Get("ETag"), "no fleet policy yet is version 0")
			}
			resp, body := call(t, env, http.MethodPut, tc.path, admin, onlyReads("v1"), "If-Match", `"0"`)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%v", body)
			assert.Equal(t, `"1"`, resp.Header.Get("ETag"))
			assert.EqualValues(t, 1, body["version"])

			resp, _ = call(t, env, http.MethodGet, tc.path, admin, nil)
			assert.Equal(t, `"1"`, resp.Header.Get("ETag"))

			before := rowCounts(t, env.DBURL)
			for _, stale := range []string{`"0"`, "0", `"7"`} {
				resp, body = call(t, env, http.MethodPut, tc.path, admin, onlyReads("lost"), "If-Match", stale)
				assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode, "If-Match %s", stale)
				assert.Equal(t, "precondition_failed", errorCode(body))
				details, _ := body["error"].(map[string]any)["details"].(map[string]any)
				assert.EqualValues(t, 1, details["current_version"])
			}
			for _, bad := range []string{`W/"1"`, `"1", "2"`, "one", `""`, "-1"} {
				resp, body = call(t, env, http.MethodPut, tc.path, admin, onlyReads("lost"), "If-Match", bad)
				assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "If-Match %s", bad)
				assert.Equal(t, "invalid", errorCode(body))
			}
			assert.Equal(t, before, rowCounts(t, env.DBURL), "a refused write changes nothing, audit included")

			resp, body = call(t, env, http.MethodGet, tc.path, admin, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, "v1", body["document"].(map[string]any)["rules"].([]any)[0].(map[string]any)["id"])

			resp, _ = call(t, env, http.MethodPut, tc.path, admin, onlyReads("v2"), "If-Match", "1")
			assert.Equal(t, http.StatusOK, resp.StatusCode, "a bare version works too")
			resp, _ = call(t, env, http.MethodPut, tc.path, admin, onlyReads("v3"))
			assert.Equal(t, http.StatusOK, resp.StatusCode, "without If-Match the write is unconditional")
			assert.Equal(t, `"3"`, resp.Header.Get("ETag"))
		})
	}
}

// TestPolicyIfMatchConcurrent: of several PUTs based on the same version,
// exactly one lands; the others get 412.
func TestPolicyIfMatchConcurrent(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	admin := loginToken(t, env)
	env.Agent("bot", onlyReads("v1"))
	const writers = 8
	statuses := make([]int, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			resp, _ := call(t, env, http.MethodPut, "/api/v1/agents/bot/policy", admin, onlyReads("w"), "If-Match", `"1"`)
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	won := 0
	for _, st := range statuses {
		if st == http.StatusOK {
			won++
		} else {
			assert.Equal(t, http.StatusPreconditionFailed, st)
		}
	}
	assert.Equal(t, 1, won)
	resp, _ := call(t, env, http.MethodGet, "/api/v1/agents/bot/policy", admin, nil)
	assert.Equal(t, `"2"`, resp.Header.Get("ETag"))
}

// TestMethodNotAllowed: a known path asked with a method it does not serve
// answers 405 with Allow and the error body; an unknown path stays 404.
func TestMethodNotAllowed(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	admin := loginToken(t, env)
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodGet, "/api/v1/auth/login", "POST"},
		{http.MethodDelete, "/api/v1/agents/bot", "GET"},
		{http.MethodPatch, "/api/v1/fleet/policy", "GET, PUT"},
		{http.MethodPut, "/api/v1/actions", "GET, POST"},
		{http.MethodPost, "/healthz", "GET"},
		{http.MethodPost, "/api/v1/stream", "GET"}, // served by the console's router
	} {
		resp, body := call(t, env, tc.method, tc.path, admin, nil)
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "%s %s", tc.method, tc.path)
		assert.Equal(t, tc.allow, resp.Header.Get("Allow"), "%s %s", tc.method, tc.path)
		assert.Equal(t, "method_not_allowed", errorCode(body), "%s %s", tc.method, tc.path)
	}
	resp, _ := call(t, env, http.MethodPut, "/ui/login", "", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "a console page too")
	assert.Equal(t, "GET, POST", resp.Header.Get("Allow"))

	resp, body := call(t, env, http.MethodPatch, "/api/v1/nothing-here", admin, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, "not_found", errorCode(body))
}

// TestOpenAPIServed: the document is served without authentication, as
// the JSON form of the embedded one, and describes every route of the
// route table.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	resp, body := call(t, env, http.MethodGet, "/api/v1/openapi.json", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	want, err := openapi.JSON()
	require.NoError(t, err)
	var wantDoc map[string]any
	require.NoError(t, json.Unmarshal(want, &wantDoc))
	assert.Equal(t, wantDoc, body)
	assert.Equal(t, "3.1.0", body["openapi"])

	paths := body["paths"].(map[string]any)
	routes, ok := httpapi.New(httpapi.Config{}).Handler().(chi.Routes)
	require.True(t, ok)
	walked := 0
	err = chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		walked++
		item, ok := paths[route].(map[string]any)
		if !assert.True(t, ok, "route %s is not in the document", route) {
			return nil
		}
		assert.Contains(t, item, strings.ToLower(method), "%s %s is not in the document", method, route)
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, walked, 25, "the walk saw the route table")
}

// TestPolicyIfMatchClient: the Go client's compare-and-set writes.
func TestPolicyIfMatchClient(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	pv, err := env.Admin.FleetPolicy(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, pv.Version)
	pv, err = env.Admin.PutFleetPolicyIf(ctx, onlyReads("mine"), pv.Version)
	require.NoError(t, err)
	assert.Equal(t, 1, pv.Version)
	_, err = env.Admin.PutFleetPolicyIf(ctx, onlyReads("stale"), 0)
	require.Error(t, err)
	assert.Equal(t, http.StatusPreconditionFailed, client.StatusOf(err))
	var ce *client.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "precondition_failed", ce.Code)
	assert.EqualValues(t, 1, ce.Details["current_version"])

	env.Agent("bot", nil)
	_, err = env.Admin.PutAgentPolicyIf(ctx, "bot", onlyReads("first"), 0)
	require.NoError(t, err)
	got, err := env.Admin.AgentPolicy(ctx, "bot")
	require.NoError(t, err)
	assert.Equal(t, 1, got.Version)
}
