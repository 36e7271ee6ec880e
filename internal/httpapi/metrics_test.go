package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apptest"
)

// scrape GETs /metrics with authorization (none if empty) and returns the
// status and body.
func scrape(t *testing.T, env *apptest.Env, authorization string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(env.Ctx(), http.MethodGet, env.URL+"/metrics", nil)
	require.NoError(t, err)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := env.HTTP.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// TestMetricsToolLabelOnlyNamesPolicyTools: a tool no policy names (an
// agent's junk) is counted under tool="other"; a tool a rule names exactly
// or by glob keeps its name. Before, every new name became a label value
// until 200 of them filled the set.
func TestMetricsToolLabelOnlyNamesPolicyTools(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("m", map[string]any{"default": "allow", "rules": []map[string]any{
		{"id": "mail", "tool": "email.send", "effect": "approve"},
		{"id": "no-shell", "tool": "shell.*", "effect": "deny"},
		{"id": "all", "tool": "*", "effect": "allow"},
	}})
	submit(t, agent, "email.send", map[string]any{"to": "x@example.com"})
	submit(t, agent, "shell.run", map[string]any{"cmd": "ls"})
	submit(t, agent, "junk.aaaa", map[string]any{})
	submit(t, agent, "junk.bbbb", map[string]any{})
	status, body := scrape(t, env, "")
	require.Equal(t, http.StatusOK, status, body)
	var actions []string // the action series only, for readable failures
	for line := range strings.Lines(body) {
		if strings.HasPrefix(line, "airlock_actions_s") {
			actions = append(actions, strings.TrimSpace(line))
		}
	}
	text := strings.Join(actions, "\n")
	assert.Contains(t, text, `airlock_actions_submitted_total{effect="approve",risk="medium",tool="email.send"} 1`)
	assert.Contains(t, text, `airlock_actions_status_total{status="denied",tool="shell.run"} 1`, "a glob names the tools it matches")
	assert.Contains(t, text, `airlock_actions_submitted_total{effect="allow",risk="medium",tool="other"} 2`, "both junk names count as other")
	assert.Contains(t, text, `airlock_actions_status_total{status="approved",tool="other"} 2`)
	assert.NotContains(t, body, "junk.", "no junk name is a label value")
}

// TestMetricsToken: with AIRLOCK_METRICS_TOKEN set, /metrics answers 401
// with the error body unless the request carries that bearer token.
func TestMetricsToken(t *testing.T) {
	t.Parallel()
	const token = "scrape-secret-0123456789"
	env := apptest.Start(t, apptest.Options{MetricsToken: token})
	for name, authorization := range map[string]string{
		"none":          "",
		"wrong":         "Bearer scrape-secret-0123456780",
		"prefix":        "Bearer scrape-secret",
		"longer":        "Bearer " + token + "x",
		"not bearer":    "Basic " + token,
		"bare token":    token,
		"admin session": "Bearer " + env.Admin.Token(),
	} {
		status, body := scrape(t, env, authorization)
		assert.Equal(t, http.StatusUnauthorized, status, name)
		assert.Contains(t, body, `"code":"unauthorized"`, name)
		assert.NotContains(t, body, "airlock_", name)
	}
	status, body := scrape(t, env, "Bearer "+token)
	assert.Equal(t, http.StatusOK, status)
	assert.True(t, strings.Contains(body, "airlock_http_request_duration_seconds"), "the metrics are served with the token")
}

// TestMetricsMethodLabelIsBounded: Go's server accepts any token as a
// method; each used to become a label value of the request histogram, so
// anyone could grow the server's memory without signing in.
func TestMetricsMethodLabelIsBounded(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	for _, m := range []string{"BREW", "XYZZY" + strings.Repeat("Q", 4000), "GET"} {
		req, err := http.NewRequestWithContext(env.Ctx(), m, env.URL+"/healthz", nil)
		require.NoError(t, err)
		resp, err := env.HTTP.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	status, body := scrape(t, env, "")
	require.Equal(t, http.StatusOK, status)
	var counts []string // the histogram's counts only, for readable failures
	for line := range strings.Lines(body) {
		if strings.HasPrefix(line, "airlock_http_request_duration_seconds_count") {
			counts = append(counts, strings.TrimSpace(line))
		}
	}
	text := strings.Join(counts, "\n")
	assert.NotContains(t, text, "BREW")
	assert.NotContains(t, text, "XYZZY")
	assert.Contains(t, text, `airlock_http_request_duration_seconds_count{code="405",method="other",route="unmatched"} 2`)
	assert.Contains(t, text, `airlock_http_request_duration_seconds_count{code="200",method="GET",route="/healthz"} 1`)
}
