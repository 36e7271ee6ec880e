package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// queryEnv starts a server with agents a (one pending call: sub) and b,
// and returns it with a reviewer-and-auditor's token and an admin's.
func queryEnv(t *testing.T) (env *apptest.Env, staff, admin string, sub *client.Action) {
	env = apptest.Start(t)
	agent := env.Agent("a", map[string]any{"rules": []map[string]any{{"id": "ask", "tool": "email.send", "effect": "approve"}}})
	env.Agent("b", nil)
	staff = env.User("sam", "reviewer", "auditor").Token()
	admin = loginToken(t, env)
	sub, err := agent.Submit(env.Ctx(), clientReq("email.send"))
	require.NoError(t, err)
	return env, staff, admin, sub
}

// queryCase is a GET whose query is refused: 400 invalid, with
// details.field naming the key.
type queryCase struct {
	path, token, field string
}

// assertQueryRefused checks each case's refusal, and that its message
// holds message (when not empty).
func assertQueryRefused(t *testing.T, env *apptest.Env, cases []queryCase, message string) {
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			resp := rawRequest(t, http.MethodGet, env.URL+tc.path, tc.token, "", nil)
			require.Equal(t, http.StatusBadRequest, resp.status, "%v", resp.body)
			e := errorOf(resp.body)
			assert.Equal(t, "invalid", e["code"])
			assert.Equal(t, map[string]any{"field": tc.field}, e["details"])
			if message != "" {
				assert.Contains(t, e["message"], message)
			}
		})
	}
}

// TestRepeatedQueryKeysAreRefused: a query key given twice is refused with
// the key named, on every endpoint that reads its query, rather than read
// as its first value (checkpoint on /audit/verify is meant to repeat).
func TestRepeatedQueryKeysAreRefused(t *testing.T) {
	t.Parallel()
	env, staff, admin, sub := queryEnv(t)

	cases := []queryCase{
		{"/api/v1/actions?status=pending&status=bogus", staff, "query.status"},
		{"/api/v1/actions?agent=a&agent=b&status=pending", staff, "query.agent"},
		{"/api/v1/actions/" + sub.ID + "?wait=1s&wait=0s", staff, "query.wait"},
		{"/api/v1/audit?agent=a&agent=b", staff, "query.agent"},
		{"/api/v1/audit/export?kind=action.submitted&kind=action.denied", staff, "query.kind"},
		{"/api/v1/audit/verify?from=1&from=2", staff, "query.from"},
		{"/api/v1/audit/checkpoints?after=0&after=5", staff, "query.after"},
		{"/api/v1/insights?by=agent&by=tool", staff, "query.by"},
		{"/api/v1/insights/suggestions?since=2026-01-01T00:00:00Z&since=2020-01-01T00:00:00Z", staff, "query.since"},
		{"/api/v1/grants?conversation_id=c&agent=a&agent=b", admin, "query.agent"},
	}
	assertQueryRefused(t, env, cases, "")

	// One value each still reads as it did; checkpoint repeats (two bad
	// ones are refused for what they say, not for being two).
	resp := rawRequest(t, http.MethodGet, env.URL+"/api/v1/audit?agent=a", staff, "", nil)
	require.Equal(t, http.StatusOK, resp.status, "%v", resp.body)
	events, _ := resp.body["events"].([]any)
	assert.NotEmpty(t, events)
	resp = rawRequest(t, http.MethodGet, env.URL+"/api/v1/audit/verify?checkpoint=x&checkpoint=y", staff, "", nil)
	require.Equal(t, http.StatusBadRequest, resp.status, "%v", resp.body)
	assert.Contains(t, errorOf(resp.body)["message"], "checkpoint:")
}

// TestUnknownQueryKeysAreRefused: a query key the route does not take is
// refused with the key named and the route's keys listed, on every
// endpoint that reads a query. Before, it was ignored: ?agent_id=b (the
// audit filter is ?agent=) answered agent a's events too, and an auditor
// reading the page could not tell that the filter had not applied.
func TestUnknownQueryKeysAreRefused(t *testing.T) {
	t.Parallel()
	env, staff, admin, sub := queryEnv(t)
	ctx := env.Ctx()

	cases := []queryCase{
		{"/api/v1/actions?agent_id=b", staff, "query.agent_id"},
		{"/api/v1/actions?status=pending&Status=approved", staff, "query.Status"},
		{"/api/v1/actions/" + sub.ID + "?wait=1s&timeout=0s", staff, "query.timeout"},
		{"/api/v1/audit?agent_id=b", staff, "query.agent_id"},
		{"/api/v1/audit/export?order=seq&agent_id=b", staff, "query.agent_id"},
		{"/api/v1/audit/verify?since=1", staff, "query.since"},
		{"/api/v1/audit/checkpoints?from=5", staff, "query.from"},
		{"/api/v1/insights?group=agent", staff, "query.group"},
		{"/api/v1/insights/suggestions?by=tool", staff, "query.by"},
		{"/api/v1/grants?agent=a&conversation=c", admin, "query.conversation"},
	}
	assertQueryRefused(t, env, cases, "unknown query parameter")

	// The keys each route takes still read as they did.
	for _, path := range []string{
		"/api/v1/actions?status=pending&agent=a&risk=low&tool=email.send&decided_by=x&can_approve=me&since=2026-01-01T00:00:00Z&until=2030-01-01T00:00:00Z&limit=5&cursor=",
		"/api/v1/actions/" + sub.ID + "?wait=0s",
		"/api/v1/audit?correlation_id=&agent=a&conversation_id=&action_id=&kind=&since=2026-01-01T00:00:00Z&until=2030-01-01T00:00:00Z&limit=5&cursor=0",
		"/api/v1/audit/verify?from=1",
		"/api/v1/insights?by=agent&since=2026-01-01T00:00:00Z",
		"/api/v1/insights/suggestions?since=2026-01-01T00:00:00Z",
	} {
		resp := rawRequest(t, http.MethodGet, env.URL+path, staff, "", nil)
		assert.NotEqual(t, "query.", fieldPrefix(errorOf(resp.body)), "%s: %v", path, resp.body)
	}
	for _, path := range []string{"/api/v1/audit/export?order=seq&agent=a&limit=1", "/api/v1/audit/checkpoints?after=0"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+staff)
		resp, err := env.HTTP.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
}

// fieldPrefix returns the first six bytes of an error's details.field
// ("query." for a refused query key), "" without one.
func fieldPrefix(e map[string]any) string {
	d, _ := e["details"].(map[string]any)
	f, _ := d["field"].(string)
	return f[:min(len(f), 6)]
}
