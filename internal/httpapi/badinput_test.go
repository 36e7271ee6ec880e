package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// rowCounts counts the rows of every table a request could write.
func rowCounts(t *testing.T, dbURL string) map[string]int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	out := map[string]int{}
	for _, table := range []string{"actions", "audit_events", "agents", "policies", "tokens", "users", "grants"} {
		var n int
		require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n))
		out[table] = n
	}
	return out
}

type rawResponse struct {
	status int
	body   map[string]any
}

func rawRequest(t *testing.T, method, url, token, contentType string, body []byte) rawResponse {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	switch {
	case contentType == "none":
	case contentType != "":
		req.Header.Set("Content-Type", contentType)
	case len(body) > 0:
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := apptest.ValidatingClient(t).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out rawResponse
	out.status = resp.StatusCode
	if len(data) > 0 {
		require.NoError(t, json.Unmarshal(data, &out.body), "body: %s", data)
	}
	return out
}

func forgeToken(t *testing.T, alg jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(alg, claims).SignedString(key)
	require.NoError(t, err)
	return s
}

func TestBadInputIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("target", designPolicy)
	agentToken := agentTokenOf(t, env, "target")
	adminToken := loginToken(t, env)
	_ = agent

	revoked, err := env.Admin.IssueAgentToken(ctx, "target", 0)
	require.NoError(t, err)
	require.NoError(t, env.Admin.RevokeToken(ctx, revoked.TokenID))
	shortLived, err := env.Admin.IssueAgentToken(ctx, "target", time.Second)
	require.NoError(t, err)

	now := time.Now()
	claims := jwt.MapClaims{"iss": "airlock", "sub": "target", "jti": "forged", "knd": "agent", "roles": []string{"agent"},
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	noneToken := forgeToken(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims)
	wrongKey := forgeToken(t, jwt.SigningMethodHS256, []byte("0123456789abcdef0123456789abcdef"), claims)
	deep := strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)

	time.Sleep(1100 * time.Millisecond) // let the short-lived token expire

	actions := env.URL + "/api/v1/actions"
	policyURL := env.URL + "/api/v1/agents/target/policy"
	cases := []struct {
		name, method, url, token, contentType string
		body                                  []byte
		status                                int
		code                                  string
	}{
		{"oversized body", "POST", actions, agentToken, "", append(append([]byte(`{"tool":"fs.read","args":{"x":"`), bytes.Repeat([]byte("a"), 1<<20)...), []byte(`"}}`)...), 413, "body_too_large"},
		{"invalid JSON", "POST", actions, agentToken, "", []byte(`{"tool":`), 400, "invalid_json"},
		{"not JSON at all", "POST", actions, agentToken, "", []byte(`tool=fs.read`), 400, "invalid_json"},
		{"empty body", "POST", actions, agentToken, "", nil, 400, "invalid_json"},
		{"trailing data", "POST", actions, agentToken, "", []byte(`{"tool":"fs.read","args":{}} {"tool":"x"}`), 400, "invalid_json"},
		{"trailing garbage", "POST", actions, agentToken, "", []byte(`{"tool":"fs.read","args":{}}xyz`), 400, "invalid_json"},
		{"unknown field", "POST", actions, agentToken, "", []byte(`{"tool":"fs.read","args":{},"admin":true}`), 400, "invalid_json"},
		{"duplicate key", "POST", actions, agentToken, "", []byte(`{"tool":"fs.read","tool":"shell.run","args":{}}`), 400, "invalid_json"},
		{"duplicate key in another case", "POST", actions, agentToken, "", []byte(`{"tool":"fs.read","Tool":"shell.run","args":{}}`), 400, "invalid_json"},
		{"field in another case", "POST", actions, agentToken, "", []byte(`{"TOOL":"fs.read","args":{}}`), 400, "invalid_json"},
		{"duplicate key inside args", "POST", actions, agentToken, "", []byte(`{"tool":"fs.read","args":{"path":"a","path":"b"}}`), 400, "invalid_json"},
		{"wrong type", "POST", actions, agentToken, "", []byte(`{"tool":42,"args":{}}`), 400, "invalid_json"},
		{"args not an object", "POST", actions, agentToken, "", []byte(`{"tool":"fs.read","args":[1,2]}`), 400, "invalid_json"},
		{"args null", "POST", actions, agentToken, "", []byte(`{"tool":"fs.read","args":null}`), 400, "invalid"},
		{"args missing", "POST", actions, agentToken, "", []byte(`{"tool":"fs.read"}`), 400, "invalid"},
		{"invalid UTF-8", "POST", actions, agentToken, "", []byte("{\"tool\":\"fs.read\",\"args\":{\"p\":\"\xff\xfe\"}}"), 400, "invalid_json"},
		{"nested 10,000 deep", "POST", actions, agentToken, "", []byte(`{"tool":"fs.read","args":` + deep + `}`), 400, "invalid_json"},
		{"empty tool", "POST", actions, agentToken, "", []byte(`{"tool":"","args":{}}`), 400, "invalid"},
		{"tool with spaces", "POST", actions, agentToken, "", []byte(`{"tool":"fs read","args":{}}`), 400, "invalid"},
		{"top-level array", "POST", actions, agentToken, "", []byte(`[{"tool":"fs.read","args":{}}]`), 400, "invalid_json"},
		{"wrong content type", "POST", actions, agentToken, "text/plain", []byte(`{"tool":"fs.read","args":{}}`), 415, "unsupported_media_type"},
		{"no content type", "POST", actions, agentToken, "none", []byte(`{"tool":"fs.read","args":{}}`), 415, "unsupported_media_type"},
		{"agent token ttl that overflows", "POST", env.URL + "/api/v1/agents/target/tokens", adminToken, "", []byte(`{"ttl_seconds":9223372037}`), 400, "invalid"},
		{"worker token ttl that overflows", "POST", env.URL + "/api/v1/workers/w1/tokens", adminToken, "", []byte(`{"targets":["workspace:docs"],"ttl_seconds":9223372037}`), 400, "invalid"},
		{"policy without content type", "PUT", policyURL, adminToken, "none", []byte(`{"rules":[]}`), 415, "unsupported_media_type"},
		{"no token", "POST", actions, "", "", []byte(`{"tool":"fs.read","args":{}}`), 401, "unauthorized"},
		{"malformed token", "POST", actions, "not.a.jwt", "", []byte(`{"tool":"fs.read","args":{}}`), 401, "unauthorized"},
		{"alg none token", "POST", actions, noneToken, "", []byte(`{"tool":"fs.read","args":{}}`), 401, "unauthorized"},
		{"wrong key token", "POST", actions, wrongKey, "", []byte(`{"tool":"fs.read","args":{}}`), 401, "unauthorized"},
		{"expired token", "POST", actions, shortLived.Token, "", []byte(`{"tool":"fs.read","args":{}}`), 401, "unauthorized"},
		{"revoked token", "POST", actions, revoked.Token, "", []byte(`{"tool":"fs.read","args":{}}`), 401, "unauthorized"},
		{"tampered token", "POST", actions, tamper(agentToken), "", []byte(`{"tool":"fs.read","args":{}}`), 401, "unauthorized"},
		{"bad CEL", "PUT", policyURL, adminToken, "", []byte(`{"rules":[{"id":"r","tool":"x","effect":"approve","when":"args.amount >"}]}`), 422, "validation_failed"},
		{"CEL of wrong type", "PUT", policyURL, adminToken, "", []byte(`{"rules":[{"id":"r","tool":"x","effect":"approve","when":"1 + 2"}]}`), 422, "validation_failed"},
		{"bad effect", "PUT", policyURL, adminToken, "", []byte(`{"rules":[{"id":"r","tool":"x","effect":"maybe"}]}`), 422, "validation_failed"},
		{"duplicate rule id", "PUT", policyURL, adminToken, "", []byte(`{"rules":[{"id":"r","tool":"x","effect":"allow"},{"id":"r","tool":"y","effect":"deny"}]}`), 422, "validation_failed"},
		{"bad timeout", "PUT", policyURL, adminToken, "", []byte(`{"rules":[{"id":"r","tool":"x","effect":"approve","timeout":"soon"}]}`), 400, "invalid"},
		{"bad YAML", "PUT", policyURL, adminToken, "application/yaml", []byte("rules: [\n  - id: r\n    tool: x\n   effect: :"), 400, "invalid"},
		{"policy with duplicate keys", "PUT", policyURL, adminToken, "", []byte(`{"rules":[],"Rules":[]}`), 400, "invalid"},
		{"unknown agent policy", "PUT", env.URL + "/api/v1/agents/nobody/policy", adminToken, "", []byte(`{"rules":[]}`), 404, "not_found"},
		{"unknown agent token", "POST", env.URL + "/api/v1/agents/nobody/tokens", adminToken, "", []byte(`{}`), 404, "not_found"},
		{"unknown action", "POST", env.URL + "/api/v1/actions/00000000-0000-0000-0000-000000000000/cancel", agentToken, "", nil, 404, "not_found"},
		{"malformed action id", "GET", env.URL + "/api/v1/actions/not-a-uuid", adminToken, "", nil, 404, "not_found"},
		{"bad wait", "GET", env.URL + "/api/v1/actions/00000000-0000-0000-0000-000000000000?wait=forever", adminToken, "", nil, 400, "invalid"},
		{"bad ttl", "POST", env.URL + "/api/v1/agents/target/tokens", adminToken, "", []byte(`{"ttl_seconds":-5}`), 400, "invalid"},
		{"duplicate agent", "POST", env.URL + "/api/v1/agents", adminToken, "", []byte(`{"id":"target","name":"again"}`), 409, "conflict"},
		{"bad agent id", "POST", env.URL + "/api/v1/agents", adminToken, "", []byte(`{"id":"../etc","name":"x"}`), 400, "invalid"},
		{"bad role", "POST", env.URL + "/api/v1/users", adminToken, "", []byte(`{"username":"eve","password":"long-enough-password","roles":["agent"]}`), 400, "invalid"},
		{"short password", "POST", env.URL + "/api/v1/users", adminToken, "", []byte(`{"username":"eve","password":"short","roles":["reviewer"]}`), 400, "invalid"},
		{"bad login", "POST", env.URL + "/api/v1/auth/login", "", "", []byte(`{"username":"admin","password":"wrong-password"}`), 401, "unauthorized"},
		{"bad audit time", "GET", env.URL + "/api/v1/audit?since=yesterday", adminToken, "", nil, 400, "invalid"},
		{"bad list status", "GET", env.URL + "/api/v1/actions?status=done", adminToken, "", nil, 400, "invalid"},
		{"bad list cursor", "GET", env.URL + "/api/v1/actions?cursor=bm90LWEtY3Vyc29y", adminToken, "", nil, 400, "invalid"},
		// Well formed, but at times PostgreSQL cannot hold (was a 500).
		{"list cursor before the epoch", "GET", env.URL + "/api/v1/actions?cursor=LTMwMDAwMDAwMDAwMDAwMDAwMC8wMDAwMDAwMC0wMDAwLTAwMDAtMDAwMC0wMDAwMDAwMDAwMDA", adminToken, "", nil, 400, "invalid"},
		{"list cursor at the end of time", "GET", env.URL + "/api/v1/actions?cursor=OTIyMzM3MjAzNjg1NDc3NTgwNy8wMDAwMDAwMC0wMDAwLTAwMDAtMDAwMC0wMDAwMDAwMDAwMDA", adminToken, "", nil, 400, "invalid"},
		{"unknown route", "GET", env.URL + "/api/v1/nothing", adminToken, "", nil, 404, "not_found"},
		// PostgreSQL cannot store it: the insert failed (500), and its
		// group-commit batch re-ran alone.
		{"number beyond what can be stored", "POST", actions, agentToken, "", []byte(`{"tool":"fs.read","args":{"n":1e200000}}`), 400, "invalid_json"},
		{"key twice under Go's folding", "POST", actions, agentToken, "", []byte(`{"tool":"fs.read","args":{"paths":1,"pathſ":2}}`), 400, "invalid_json"},
		// A malformed pair beside them let NUL and invalid UTF-8 through
		// to PostgreSQL (500).
		{"NUL in the query beside a malformed pair", "GET", env.URL + "/api/v1/actions?agent=%00&x=%zz", adminToken, "", nil, 400, "invalid"},
		{"invalid UTF-8 in the query beside a malformed pair", "GET", env.URL + "/api/v1/audit?correlation_id=%ff&x=%zz", adminToken, "", nil, 400, "invalid"},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := rowCounts(t, env.DBURL)
			got := rawRequest(t, tc.method, tc.url, tc.token, tc.contentType, tc.body)
			require.Equal(t, tc.status, got.status, "body: %v", got.body)
			errBody, ok := got.body["error"].(map[string]any)
			require.True(t, ok, "error body: %v", got.body)
			assert.Equal(t, tc.code, errBody["code"])
			assert.NotEmpty(t, errBody["message"])
			after := rowCounts(t, env.DBURL)
			if tc.name == "bad login" {
				// A failed login is itself audited, and nothing else changes.
				before["audit_events"]++
			}
			assert.Equal(t, before, after, "the database must be unchanged")
		})
	}
}

func TestPolicyValidationNamesTheRule(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	env.Agent("target", nil)
	token := loginToken(t, env)
	got := rawRequest(t, "PUT", env.URL+"/api/v1/agents/target/policy", token, "",
		[]byte(`{"rules":[{"id":"ok","tool":"a","effect":"allow"},{"id":"broken","tool":"b","effect":"approve","when":"args.amount > "}]}`))
	require.Equal(t, http.StatusUnprocessableEntity, got.status)
	e := got.body["error"].(map[string]any)
	details := e["details"].(map[string]any)
	assert.EqualValues(t, 1, details["rule_index"])
	assert.Equal(t, "broken", details["rule_id"])
	assert.Contains(t, e["message"], "when")
}

func TestPolicyAsYAML(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	env.Agent("yaml-bot", nil)
	token := loginToken(t, env)
	doc := "default: deny\nrules:\n  - id: big-spend\n    tool: payments.send\n    effect: approve\n    when: args.amount > 100\n    approvals: 2\n    timeout: 15m\n"
	got := rawRequest(t, "PUT", env.URL+"/api/v1/agents/yaml-bot/policy", token, "application/yaml", []byte(doc))
	require.Equal(t, http.StatusOK, got.status, "%v", got.body)
	assert.EqualValues(t, 1, got.body["version"])
	got = rawRequest(t, "PUT", env.URL+"/api/v1/agents/yaml-bot/policy", token, "application/yaml", []byte(doc))
	assert.EqualValues(t, 2, got.body["version"])
	read := rawRequest(t, "GET", env.URL+"/api/v1/agents/yaml-bot/policy", token, "", nil)
	require.Equal(t, http.StatusOK, read.status)
	assert.EqualValues(t, 2, read.body["version"])
}

func TestRevocationIsImmediate(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	require.NoError(t, env.Admin.CreateAgent(ctx, "revokee", "r"))
	tok, err := env.Admin.IssueAgentToken(ctx, "revokee", 0)
	require.NoError(t, err)
	agent := env.Anon.WithToken(tok.Token)
	_, err = agent.Submit(ctx, clientReq("fs.read"))
	require.NoError(t, err)
	require.NoError(t, env.Admin.RevokeToken(ctx, tok.TokenID))
	_, err = agent.Submit(ctx, clientReq("fs.read"))
	assert.Equal(t, http.StatusUnauthorized, client401(err))
}

// TestRevokedTokenHears401BeforeItsRequest: the submit, lease and
// completion routes leave a token's database check to their statement; a
// request refused before it (bad body, held rate, missing job) still
// hears 401 for a revoked token, never what is wrong with its request.
// Before, a revoked agent token with a bad body got 400, with a held rate
// 429. A valid token's bad body is still a 400 and its held rate a 429.
func TestRevokedTokenHears401BeforeItsRequest(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agentWith := func(id string, settings map[string]any) *client.AgentToken {
		require.NoError(t, env.Admin.CreateAgent(ctx, id, "r"))
		_, err := env.Admin.PutAgentPolicy(ctx, id, map[string]any{
			"rules": []map[string]any{{"id": "all", "tool": "*", "effect": "allow"}}, "settings": settings})
		require.NoError(t, err)
		tok, err := env.Admin.IssueAgentToken(ctx, id, 0)
		require.NoError(t, err)
		return tok
	}
	agent := agentWith("revoked-bad", map[string]any{})
	held := agentWith("revoked-held", map[string]any{"rate": map[string]any{"per_minute": 1}})
	worker, err := env.Admin.IssueWorkerToken(ctx, "host-revoked", []string{"workspace:main"}, 0)
	require.NoError(t, err)
	bodies := map[string]string{
		"invalid JSON":  `{"tool":`,
		"unknown field": `{"tool":"fs.read","args":{},"extra":1}`,
		"NUL":           `{"tool":"fs.read","args":{"s":"a\u0000b"}}`,
		"wrong type":    `{"tool":7}`,
	}
	send := func(token, path, body string) rawResponse {
		return rawRequest(t, http.MethodPost, env.URL+path, token, "", []byte(body))
	}
	for name, body := range bodies {
		assert.Equal(t, http.StatusBadRequest, send(agent.Token, "/api/v1/actions", body).status, "valid agent token, %s", name)
		assert.Equal(t, http.StatusBadRequest, send(worker.Token, "/api/v1/worker/lease", body).status, "valid worker token, %s", name)
	}
	first := postSubmit(t, env, held.Token, `{"tool":"email.send","args":{"i":1}}`)
	require.Equal(t, http.StatusCreated, first.status, "%+v", first)
	got := postSubmit(t, env, held.Token, `{"tool":"email.send","args":{"i":2}}`)
	require.Equal(t, http.StatusTooManyRequests, got.status, "the agent is held for its rate")

	for _, id := range []string{agent.TokenID, held.TokenID, worker.TokenID} {
		require.NoError(t, env.Admin.RevokeToken(ctx, id))
	}
	before := rowCounts(t, env.DBURL)
	for name, body := range bodies {
		got := send(agent.Token, "/api/v1/actions", body)
		assert.Equal(t, http.StatusUnauthorized, got.status, "revoked agent token, %s: %v", name, got.body)
		got = send(worker.Token, "/api/v1/worker/lease", body)
		assert.Equal(t, http.StatusUnauthorized, got.status, "revoked worker token, %s: %v", name, got.body)
		got = send(worker.Token, "/api/v1/worker/jobs/no-such-job/complete", body)
		assert.Equal(t, http.StatusUnauthorized, got.status, "revoked worker token completing, %s: %v", name, got.body)
	}
	got = postSubmit(t, env, held.Token, `{"tool":"email.send","args":{"i":3}}`)
	assert.Equal(t, http.StatusUnauthorized, got.status, "a held rate is no answer to a revoked token: %+v", got)
	assert.Equal(t, "unauthorized", got.code)
	assert.Equal(t, before, rowCounts(t, env.DBURL), "nothing written")
}

func TestLogoutEndsTheSession(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	rev := env.Reviewer("rita")
	_, err := rev.Do(ctx, http.MethodGet, "/api/v1/actions", nil, nil)
	require.NoError(t, err)
	_, err = rev.Do(ctx, http.MethodPost, "/api/v1/auth/logout", nil, nil)
	require.NoError(t, err)
	_, err = rev.Do(ctx, http.MethodGet, "/api/v1/actions", nil, nil)
	assert.Equal(t, http.StatusUnauthorized, client401(err))
}

func tamper(token string) string {
	parts := strings.Split(token, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	payload = bytes.Replace(payload, []byte(`"target"`), []byte(`"xarget"`), 1)
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	return strings.Join(parts, ".")
}
