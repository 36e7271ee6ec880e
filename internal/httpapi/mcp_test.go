package httpapi_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apptest"
)

func githubServer() map[string]any {
	return map[string]any{"name": "github", "transport": "stdio", "command": "/usr/bin/github-mcp",
		"args": []string{"stdio", "--read-only"}, "env": map[string]string{"GITHUB_TOKEN": "ghp_secret"},
		"pass_env": []string{"HOME"}, "read_only_paths": []string{"/srv/repos"}}
}

// mcpEvents returns the kinds of the registry's audit events of name, in order.
func mcpEvents(t *testing.T, env *apptest.Env, name string) []string {
	t.Helper()
	rows, err := env.App.Pool().Query(env.Ctx(), `SELECT kind, data::text FROM audit_events
		WHERE kind LIKE 'mcp_server.%' AND data->>'name' = $1 ORDER BY id`, name)
	require.NoError(t, err)
	defer rows.Close()
	var kinds []string
	for rows.Next() {
		var kind, data string
		require.NoError(t, rows.Scan(&kind, &data))
		assert.NotContains(t, data, "ghp_secret", "env values never reach the audit trail")
		kinds = append(kinds, kind)
	}
	require.NoError(t, rows.Err())
	return kinds
}

// TestMCPRegistryLifecycle: create (201, version 1, sandbox defaulted),
// a second create of the name (409), read by admin (whole), reviewer and
// auditor (env values withheld) and an agent (whole, one registration; not
// the list), PUT with a stale If-Match (412, nothing written) and a fresh
// one (version 2), DELETE (204, then 404), and one audit event per version.
func TestMCPRegistryLifecycle(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	admin := loginToken(t, env)
	env.Agent("bot", nil)
	agent := agentTokenOf(t, env, "bot")
	env.Reviewer("rita")
	_, rl, err := env.Anon.Login(env.Ctx(), "rita", "rita-password-123")
	require.NoError(t, err)
	reviewer := rl.Token

	resp, body := call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, githubServer())
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%v", body)
	assert.Equal(t, `"1"`, resp.Header.Get("ETag"))
	assert.EqualValues(t, 1, body["version"])
	assert.Equal(t, true, body["sandbox"], "stdio servers are sandboxed unless the registration says otherwise")
	assert.Equal(t, "admin", body["updated_by"])

	resp, body = call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, githubServer())
	assert.Equal(t, http.StatusConflict, resp.StatusCode)
	assert.Equal(t, "conflict", errorCode(body))

	resp, body = call(t, env, http.MethodGet, "/api/v1/mcp/servers/github", admin, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, map[string]any{"GITHUB_TOKEN": "ghp_secret"}, body["env"])
	assert.Nil(t, body["redacted"])

	resp, body = call(t, env, http.MethodGet, "/api/v1/mcp/servers/github", reviewer, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, map[string]any{"GITHUB_TOKEN": "[redacted]"}, body["env"])
	assert.Equal(t, true, body["redacted"])
	resp, body = call(t, env, http.MethodGet, "/api/v1/mcp/servers", reviewer, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	servers := body["servers"].([]any)
	require.Len(t, servers, 1)
	assert.Equal(t, map[string]any{"GITHUB_TOKEN": "[redacted]"}, servers[0].(map[string]any)["env"])

	resp, body = call(t, env, http.MethodGet, "/api/v1/mcp/servers/github", agent, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the stdio proxy reads its registration with the agent token")
	assert.Equal(t, "/usr/bin/github-mcp", body["command"])
	assert.Equal(t, map[string]any{"GITHUB_TOKEN": "ghp_secret"}, body["env"])
	resp, _ = call(t, env, http.MethodGet, "/api/v1/mcp/servers", agent, nil)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "an agent reads a registration by name, never the list")
	for _, m := range []string{http.MethodPut, http.MethodDelete} {
		resp, _ = call(t, env, m, "/api/v1/mcp/servers/github", agent, githubServer())
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, m)
		resp, _ = call(t, env, m, "/api/v1/mcp/servers/github", reviewer, githubServer())
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, m)
	}
	resp, _ = call(t, env, http.MethodPost, "/api/v1/mcp/servers", agent, githubServer())
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, _ = call(t, env, http.MethodGet, "/api/v1/mcp/servers/nope", agent, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)

	changed := githubServer()
	changed["args"] = []string{"stdio"}
	resp, body = call(t, env, http.MethodPut, "/api/v1/mcp/servers/github", admin, changed, "If-Match", `"0"`)
	assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode)
	assert.Equal(t, "precondition_failed", errorCode(body))
	assert.EqualValues(t, 1, body["error"].(map[string]any)["details"].(map[string]any)["current_version"])
	resp, body = call(t, env, http.MethodPut, "/api/v1/mcp/servers/github", admin, changed, "If-Match", `"1"`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%v", body)
	assert.EqualValues(t, 2, body["version"])
	assert.Equal(t, []any{"stdio"}, body["args"])
	resp, body = call(t, env, http.MethodPut, "/api/v1/mcp/servers/github", admin, changed, "If-Match", `"1"`)
	assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode, "%v", body)
	resp, _ = call(t, env, http.MethodDelete, "/api/v1/mcp/servers/github", admin, nil, "If-Match", `"1"`)
	assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode)
	_, body = call(t, env, http.MethodGet, "/api/v1/mcp/servers/github", admin, nil)
	assert.EqualValues(t, 2, body["version"], "refused writes wrote nothing")

	renamed := githubServer()
	renamed["name"] = "gitlab"
	resp, body = call(t, env, http.MethodPut, "/api/v1/mcp/servers/github", admin, renamed)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, "invalid", errorCode(body))
	resp, _ = call(t, env, http.MethodPut, "/api/v1/mcp/servers/nope", admin, githubServer())
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "body name github, path nope")
	nobody := githubServer()
	delete(nobody, "name")
	resp, _ = call(t, env, http.MethodPut, "/api/v1/mcp/servers/nope", admin, nobody)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "PUT changes a registration, POST creates one")

	resp, _ = call(t, env, http.MethodDelete, "/api/v1/mcp/servers/github", admin, nil, "If-Match", `"2"`)
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp, _ = call(t, env, http.MethodGet, "/api/v1/mcp/servers/github", agent, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = call(t, env, http.MethodDelete, "/api/v1/mcp/servers/github", admin, nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, body = call(t, env, http.MethodGet, "/api/v1/mcp/servers", admin, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, body["servers"])

	resp, body = call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, githubServer())
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.EqualValues(t, 4, body["version"], "a name registered again continues its versions")

	assert.Equal(t, []string{"mcp_server.created", "mcp_server.updated", "mcp_server.deleted", "mcp_server.created"},
		mcpEvents(t, env, "github"))
}

// TestMCPRegistryRefusesBadRegistrations: every rule of a registration,
// through the API, answers 422 with details.field, or 400 for malformed
// JSON, and writes nothing.
func TestMCPRegistryRefusesBadRegistrations(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	admin := loginToken(t, env)

	stdio := func(mod func(m map[string]any)) map[string]any {
		m := map[string]any{"name": "s", "transport": "stdio", "command": "npx"}
		mod(m)
		return m
	}
	web := func(mod func(m map[string]any)) map[string]any {
		m := map[string]any{"name": "h", "transport": "http", "url": "https://mcp.example.com/mcp"}
		mod(m)
		return m
	}
	for _, tc := range []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"upper-case name", stdio(func(m map[string]any) { m["name"] = "GitHub" }), "name"},
		{"name with dot", stdio(func(m map[string]any) { m["name"] = "a.b" }), "name"},
		{"long name", stdio(func(m map[string]any) { m["name"] = strings.Repeat("a", 65) }), "name"},
		{"no transport", stdio(func(m map[string]any) { delete(m, "transport") }), "transport"},
		{"bad transport", stdio(func(m map[string]any) { m["transport"] = "sse" }), "transport"},
		{"no command", stdio(func(m map[string]any) { delete(m, "command") }), "command"},
		{"shell command", stdio(func(m map[string]any) { m["command"] = "npx; rm -rf /" }), "command"},
		{"command substitution", stdio(func(m map[string]any) { m["command"] = "$(curl)" }), "command"},
		{"pipe", stdio(func(m map[string]any) { m["command"] = "a|b" }), "command"},
		{"relative path", stdio(func(m map[string]any) { m["command"] = "./server" }), "command"},
		{"dotdot path", stdio(func(m map[string]any) { m["command"] = "/usr/../bin/sh" }), "command"},
		{"option as command", stdio(func(m map[string]any) { m["command"] = "-c" }), "command"},
		{"LD_PRELOAD", stdio(func(m map[string]any) { m["env"] = map[string]string{"LD_PRELOAD": "/x.so"} }), "env"},
		{"AIRLOCK_TOKEN", stdio(func(m map[string]any) { m["env"] = map[string]string{"AIRLOCK_TOKEN": "x"} }), "env"},
		{"lower-case env", stdio(func(m map[string]any) { m["env"] = map[string]string{"path": "x"} }), "env"},
		{"pass AIRLOCK_TOKEN", stdio(func(m map[string]any) { m["pass_env"] = []string{"AIRLOCK_TOKEN"} }), "pass_env[0]"},
		{"pass AWS keys", stdio(func(m map[string]any) { m["pass_env"] = []string{"HOME", "AWS_SECRET_ACCESS_KEY"} }), "pass_env[1]"},
		{"pass LD_LIBRARY_PATH", stdio(func(m map[string]any) { m["pass_env"] = []string{"LD_LIBRARY_PATH"} }), "pass_env[0]"},
		{"relative read-only path", stdio(func(m map[string]any) { m["read_only_paths"] = []string{"srv"} }), "read_only_paths[0]"},
		{"unclean read-only path", stdio(func(m map[string]any) { m["read_only_paths"] = []string{"/srv/../etc"} }), "read_only_paths[0]"},
		{"read-only paths unsandboxed", stdio(func(m map[string]any) { m["sandbox"] = false; m["read_only_paths"] = []string{"/srv"} }), "sandbox"},
		{"stdio with url", stdio(func(m map[string]any) { m["url"] = "https://x.example" }), "url"},
		{"stdio with allow_private", stdio(func(m map[string]any) { m["allow_private"] = []string{"10.0.0.0/8"} }), "allow_private"},
		{"http without url", web(func(m map[string]any) { delete(m, "url") }), "url"},
		{"http with command", web(func(m map[string]any) { m["command"] = "npx" }), "command"},
		{"http with env", web(func(m map[string]any) { m["env"] = map[string]string{"A": "b"} }), "env"},
		{"http sandboxed", web(func(m map[string]any) { m["sandbox"] = true }), "sandbox"},
		{"plain http", web(func(m map[string]any) { m["url"] = "http://mcp.example.com/mcp" }), "url"},
		{"plain http loopback without allow_private", web(func(m map[string]any) { m["url"] = "http://127.0.0.1:9000/mcp" }), "url"},
		{"plain http loopback, allow_private elsewhere", web(func(m map[string]any) {
			m["url"] = "http://127.0.0.1:9000/mcp"
			m["allow_private"] = []string{"10.0.0.0/8"}
		}), "url"},
		{"ftp", web(func(m map[string]any) { m["url"] = "ftp://mcp.example.com/" }), "url"},
		{"relative url", web(func(m map[string]any) { m["url"] = "/mcp" }), "url"},
		{"credentials in url", web(func(m map[string]any) { m["url"] = "https://u:p@mcp.example.com/" }), "url"},
		{"bad port", web(func(m map[string]any) { m["url"] = "https://mcp.example.com:99999/" }), "url"},
		{"bad CIDR", web(func(m map[string]any) { m["allow_private"] = []string{"10.0.0.0/33"} }), "allow_private[0]"},
		{"host, not CIDR", web(func(m map[string]any) { m["allow_private"] = []string{"10.0.0.1"} }), "allow_private[0]"},
		{"everything", web(func(m map[string]any) { m["allow_private"] = []string{"0.0.0.0/0"} }), "allow_private[0]"},
		{"Host header", web(func(m map[string]any) { m["headers_from_env"] = map[string]string{"Host": "X"} }), "headers_from_env"},
		{"header from AIRLOCK_ env", web(func(m map[string]any) {
			m["headers_from_env"] = map[string]string{"Authorization": "AIRLOCK_DATABASE_URL"}
		}), "headers_from_env.Authorization"},
		// The gateway reads the variable from the Airlock server's own
		// environment and sends it to the url: not its cloud or database
		// credentials.
		{"header from AWS_ env", web(func(m map[string]any) {
			m["headers_from_env"] = map[string]string{"X-A": "AWS_SECRET_ACCESS_KEY"}
		}), "headers_from_env.X-A"},
		{"header from PG env", web(func(m map[string]any) {
			m["headers_from_env"] = map[string]string{"X-A": "PGPASSWORD"}
		}), "headers_from_env.X-A"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, tc.body)
			require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "%v", body)
			assert.Equal(t, "validation_failed", errorCode(body))
			assert.Equal(t, tc.field, body["error"].(map[string]any)["details"].(map[string]any)["field"])
		})
	}
	resp, body := call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, map[string]any{"name": "x", "transport": "stdio", "command": "npx", "shell": true})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, "invalid_json", errorCode(body))
	resp, body = call(t, env, http.MethodGet, "/api/v1/mcp/servers", admin, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, body["servers"], "no refused registration was written")

	ok := web(func(m map[string]any) {
		m["url"] = "http://127.0.0.1:9000/mcp"
		m["allow_private"] = []string{"127.0.0.1/8", "127.0.0.0/8"}
		m["headers_from_env"] = map[string]string{"Authorization": "GITHUB_AUTH"}
	})
	resp, body = call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, ok)
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%v", body)
	assert.Equal(t, []any{"127.0.0.0/8"}, body["allow_private"], "CIDRs are stored masked, once")
	assert.Nil(t, body["sandbox"])
}

// TestMCPRegistryConcurrentWrites: PUTs racing on one base version: exactly
// one wins, the rest get 412, and the versions have no gap.
func TestMCPRegistryConcurrentWrites(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	admin := loginToken(t, env)
	resp, _ := call(t, env, http.MethodPost, "/api/v1/mcp/servers", admin, githubServer())
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	var wg sync.WaitGroup
	statuses := make([]int, 8)
	for i := range statuses {
		wg.Go(func() {
			resp, _ := call(t, env, http.MethodPut, "/api/v1/mcp/servers/github", admin, githubServer(), "If-Match", "1")
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	won := 0
	for _, s := range statuses {
		if s == http.StatusOK {
			won++
		} else {
			assert.Equal(t, http.StatusPreconditionFailed, s)
		}
	}
	assert.Equal(t, 1, won)
	_, body := call(t, env, http.MethodGet, "/api/v1/mcp/servers/github", admin, nil)
	assert.EqualValues(t, 2, body["version"])
	assert.Len(t, mcpEvents(t, env, "github"), 2)
}
