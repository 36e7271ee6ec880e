package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apptest"
)

const mcpRegistration = `{"name": "files", "transport": "stdio", "command": "/usr/bin/mcp-files",
 "args": ["--root", "/srv"], "env": {"FILES_TOKEN": "s3cret-value"}}`

// TestBrowserMCPServers: an admin registers an MCP server on the console
// (a refused registration first: the rule's message inline, what was
// typed kept, nothing written), edits it to version 2 and removes it; the
// API sees each step.
func TestBrowserMCPServers(t *testing.T) {
	env := apptest.Start(t)
	admin := loginToken(t, env)
	c := startChrome(t)
	c.signIn(t, env, "/ui/mcp", "admin", apptest.AdminPassword, "#mcp-form")

	bad := strings.Replace(mcpRegistration, "/usr/bin/mcp-files", "mcp-files; curl evil", 1)
	c.do(t,
		chromedp.SetValue(chromedp.CSS(`#mcp-form textarea`), bad),
		chromedp.Click(chromedp.CSS(`#mcp-form button`)),
		chromedp.WaitVisible(chromedp.CSS("#page-error")),
	)
	assert.Contains(t, c.text(t, "#page-error"), "shell metacharacters")
	assert.Contains(t, run(t, c, chromedp.Value(chromedp.CSS(`#mcp-form textarea`))), "curl evil", "what was typed is kept")
	assert.Equal(t, 0, mcpCount(t, env, admin))

	c.do(t,
		chromedp.SetValue(chromedp.CSS(`#mcp-form textarea`), mcpRegistration),
		chromedp.Click(chromedp.CSS(`#mcp-form button`)),
		chromedp.WaitVisible(chromedp.CSS("#mcp-files")),
	)
	assert.Contains(t, c.text(t, "#mcp-files"), "/usr/bin/mcp-files --root /srv")
	c.screenshot(t, "mcp-servers.png")
	assert.Equal(t, 1, mcpCount(t, env, admin))

	c.do(t,
		chromedp.Click(chromedp.CSS(`#mcp-files .edit-link`)),
		chromedp.WaitVisible(chromedp.CSS("#mcp-edit-form")),
		chromedp.SetValue(chromedp.CSS(`#mcp-edit-form textarea`), strings.Replace(mcpRegistration, `"/srv"`, `"/data"`, 1)),
		chromedp.Click(chromedp.CSS(`#mcp-edit-form button`)),
		chromedp.WaitVisible(chromedp.CSS("#mcp-files")),
	)
	assert.Contains(t, c.text(t, "#mcp-files"), "--root /data")
	resp, body := call(t, env, http.MethodGet, "/api/v1/mcp/servers/files", admin)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.EqualValues(t, 2, body["version"])

	c.do(t,
		chromedp.Click(chromedp.CSS(`#mcp-files .delete-form button`)),
		chromedp.WaitVisible(chromedp.CSS("#mcp-empty")),
	)
	resp, _ = call(t, env, http.MethodGet, "/api/v1/mcp/servers/files", admin)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestConsoleMCPReadOnly: a reviewer sees the registrations with env
// values withheld and no controls, and every write is refused (403);
// an admin's edit based on a stale version writes nothing.
func TestConsoleMCPReadOnly(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	admin := loginToken(t, env)
	adm := signIn(t, env, "admin", apptest.AdminPassword)
	_, page := adm.get("/ui/mcp")
	resp, _ := adm.post("/ui/mcp", url.Values{"csrf": {csrfOf(t, page)}, "registration": {mcpRegistration}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	rev, _ := userSession(t, env, "rita", "reviewer")
	resp, page = rev.get("/ui/mcp")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, page, "/usr/bin/mcp-files")
	assert.NotContains(t, page, "s3cret-value")
	assert.Contains(t, page, "[redacted]")
	assert.NotContains(t, page, `id="mcp-form"`)
	assert.NotContains(t, page, "delete-form")
	csrf := csrfOf(t, page)
	for path, form := range map[string]url.Values{
		"/ui/mcp":              {"csrf": {csrf}, "registration": {strings.Replace(mcpRegistration, "files", "other", 1)}},
		"/ui/mcp/files":        {"csrf": {csrf}, "version": {"1"}, "registration": {mcpRegistration}},
		"/ui/mcp/files/delete": {"csrf": {csrf}, "version": {"1"}},
	} {
		resp, _ = rev.post(path, form)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, path)
	}
	resp, _ = rev.get("/ui/mcp/files/edit")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)

	_, page = adm.get("/ui/mcp")
	assert.Contains(t, page, "s3cret-value", "admins read env values")
	csrf = csrfOf(t, page)
	resp, _ = adm.post("/ui/mcp/files", url.Values{"csrf": {csrf}, "version": {"1"}, "registration": {strings.Replace(mcpRegistration, "--root", "--base", 1)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, page = adm.post("/ui/mcp/files", url.Values{"csrf": {csrf}, "version": {"1"}, "registration": {strings.Replace(mcpRegistration, "--root", "--stale", 1)}})
	assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode)
	assert.Contains(t, page, "changed since you read it")
	resp, page = adm.post("/ui/mcp/files/delete", url.Values{"csrf": {csrf}, "version": {"1"}})
	assert.Equal(t, http.StatusPreconditionFailed, resp.StatusCode)
	assert.Contains(t, page, "changed since you read it")
	resp, body := call(t, env, http.MethodGet, "/api/v1/mcp/servers/files", admin)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.EqualValues(t, 2, body["version"])
	assert.Contains(t, body["args"], "--base")
}

func loginToken(t *testing.T, env *apptest.Env) string {
	t.Helper()
	_, lr, err := env.Anon.Login(env.Ctx(), "admin", apptest.AdminPassword)
	require.NoError(t, err)
	return lr.Token
}

// call is an API GET with token, answered with the decoded JSON body.
func call(t *testing.T, env *apptest.Env, method, path, token string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(env.Ctx(), method, env.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := env.HTTP.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	if resp.Header.Get("Content-Type") == "application/json" {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	}
	return resp, out
}

func mcpCount(t *testing.T, env *apptest.Env, token string) int {
	t.Helper()
	resp, body := call(t, env, http.MethodGet, "/api/v1/mcp/servers", token)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return len(body["servers"].([]any))
}
