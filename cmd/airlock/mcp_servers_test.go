package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

const githubYAML = `# the registry entry of an HTTP MCP server
name: github
transport: http
url: https://api.githubcopilot.com/mcp/
headers_from_env:
  Authorization: GITHUB_AUTHORIZATION
`

// TestMCPServersAddListGetRemove registers a stdio server from flags and
// an http one from a YAML file, reads both back, replaces one, removes
// one, and sees the API's refusals as one line with its code.
func TestMCPServersAddListGetRemove(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	r := newRunner(t, env.URL, env.Admin.Token())
	for _, args := range [][]string{{"mcp"}, {"mcp", "servers", "add"}, {"mcp", "servers", "remove"}, {"mcp", "permission-server"}} {
		res := r.run("", append(args, "--help")...)
		assert.Equal(t, 0, res.code, "%v: %+v", args, res)
		assert.Contains(t, res.stdout, "Usage: airlock "+strings.Join(args, " "))
	}

	res := r.run("", "mcp", "servers", "add", "everything", "--command", "npx",
		"--arg=-y", "--arg", "@modelcontextprotocol/server-everything", "--arg", "a,b",
		"--env", "LOG_LEVEL=debug", "--env", "GREETING=a=b", "--pass-env", "HOME", "--read-only-path", "/srv/data", "--network")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "name:            everything\n")
	assert.Contains(t, res.stdout, `args:            ["-y","@modelcontextprotocol/server-everything","a,b"]`)
	assert.Contains(t, res.stdout, "sandbox:         yes\n")

	got, err := env.Admin.MCPServer(env.Ctx(), "everything")
	require.NoError(t, err)
	assert.Equal(t, "stdio", got.Transport)
	assert.Equal(t, "npx", got.Command)
	assert.Equal(t, []string{"-y", "@modelcontextprotocol/server-everything", "a,b"}, got.Args, "a comma stays inside its argument")
	assert.Equal(t, map[string]string{"LOG_LEVEL": "debug", "GREETING": "a=b"}, got.Env)
	assert.Equal(t, []string{"HOME"}, got.PassEnv)
	assert.Equal(t, []string{"/srv/data"}, got.ReadOnlyPaths)
	assert.True(t, got.Network)
	require.NotNil(t, got.Sandbox)
	assert.True(t, *got.Sandbox, "sandboxed unless --no-sandbox")

	file := filepath.Join(t.TempDir(), "github.yaml")
	require.NoError(t, os.WriteFile(file, []byte(githubYAML), 0o600))
	res = r.run("", "mcp", "servers", "add", "-f", file, "--output", "json")
	require.Equal(t, 0, res.code, "%+v", res)
	var reg client.MCPRegistration
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &reg))
	assert.Equal(t, "github", reg.Name)
	assert.Equal(t, "https://api.githubcopilot.com/mcp/", reg.URL)
	assert.Equal(t, map[string]string{"Authorization": "GITHUB_AUTHORIZATION"}, reg.HeadersFromEnv)
	assert.Equal(t, 1, reg.Version)

	res = r.run("", "mcp", "servers", "list", "--output", "json")
	require.Equal(t, 0, res.code, "%+v", res)
	var list client.MCPServerList
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &list))
	names := []string{}
	for _, s := range list.Servers {
		names = append(names, s.Name)
	}
	assert.ElementsMatch(t, []string{"everything", "github"}, names)
	res = r.run("", "mcp", "servers", "list")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "NAME")
	assert.Contains(t, res.stdout, "https://api.githubcopilot.com/mcp/")
	assert.Contains(t, res.stdout, "npx -y @modelcontextprotocol/server-everything a,b")

	res = r.run("", "mcp", "servers", "get", "github")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "headers_from_env: Authorization=GITHUB_AUTHORIZATION\n")
	assert.Contains(t, res.stdout, "updated:          admin ")

	// A reviewer reads the registry with env values withheld.
	reviewer := env.Reviewer("rita")
	rr := newRunner(t, env.URL, reviewer.Token())
	res = rr.run("", "mcp", "servers", "get", "everything")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.NotContains(t, res.stdout, "debug")
	assert.Contains(t, res.stdout, "(values withheld)")
	res = rr.run("", "mcp", "servers", "remove", "everything")
	assert.Equal(t, 4, res.code, "admins only: %+v", res)
	assert.True(t, strings.HasPrefix(res.stderr, "airlock: forbidden: "), res.stderr)

	// --replace writes the next version, compared and set.
	res = r.run("", "mcp", "servers", "add", "everything", "--replace", "--if-version", "1", "--command", "/usr/bin/mcp-everything", "--no-sandbox")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "version:         2\n")
	assert.Contains(t, res.stdout, "sandbox:         no\n")
	res = r.run("", "mcp", "servers", "add", "everything", "--replace", "--if-version", "1", "--command", "npx")
	assert.Equal(t, 5, res.code, "stale: %+v", res)
	assert.True(t, strings.HasPrefix(res.stderr, "airlock: precondition_failed: "), res.stderr)

	// Refusals: one line, the API's code, the documented exit code.
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"a bad name", "", []string{"add", "Bad_Name", "--command", "npx"}, 1, "airlock: validation_failed: name must be"},
		{"a name taken", "", []string{"add", "github", "--command", "npx"}, 5, "airlock: conflict: "},
		{"a reserved variable", "", []string{"add", "tok", "--command", "npx", "--pass-env", "AIRLOCK_TOKEN"}, 1, "airlock: validation_failed: "},
		{"a shell in the command", "", []string{"add", "sh", "--command", "npx; rm -rf /"}, 1, "airlock: validation_failed: command must be"},
		{"a plain-http URL", "", []string{"add", "web", "--endpoint", "http://example.com/mcp"}, 1, "airlock: validation_failed: "},
		{"an unknown field in the file", "name: x\ntransport: stdio\ncommand: npx\nsandbx: false\n", []string{"add", "-f", "-"}, 1, `airlock: invalid: -: unknown field "sandbx"`},
		{"a key twice in the file", "name: x\nname: y\ntransport: stdio\ncommand: npx\n", []string{"add", "-f", "-"}, 1, "airlock: invalid: -: "},
		// Read as the server reads the body (jsonx): Go's decoder alone
		// matched these case-insensitively, the last one winning, and
		// registered a server the API refuses.
		{"a key twice in the file, in another case", "name: x\ntransport: stdio\ncommand: /usr/bin/mcp-safe\nCommand: /usr/bin/mcp-other\n", []string{"add", "-f", "-"}, 1, "airlock: invalid: -: duplicate key "},
		{"a field in another case in the file", "name: x\ntransport: stdio\ncommand: npx\nSandbox: false\n", []string{"add", "-f", "-"}, 1, `airlock: invalid: -: unknown field "Sandbox"`},
		{"flags with -f", githubYAML, []string{"add", "-f", "-", "--command", "npx"}, 2, "airlock: usage: "},
		{"a name the file does not register", githubYAML, []string{"add", "gitlab", "-f", "-"}, 2, "airlock: usage: the file registers"},
		{"no name", "", []string{"add", "--command", "npx"}, 2, "airlock: usage: name the server"},
		{"an env flag without =", "", []string{"add", "x", "--command", "npx", "--env", "K"}, 2, "airlock: usage: --env"},
		{"get an unknown one", "", []string{"get", "nope"}, 3, "airlock: not_found: "},
		{"remove an unknown one", "", []string{"remove", "nope"}, 3, "airlock: not_found: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := r.run(tc.stdin, append([]string{"mcp", "servers"}, tc.args...)...)
			assert.Equal(t, tc.code, res.code, "%+v", res)
			assert.True(t, strings.HasPrefix(res.stderr, tc.want), res.stderr)
			assert.Equal(t, 1, strings.Count(res.stderr, "\n"), "one line: %q", res.stderr)
			assert.Empty(t, res.stdout)
		})
	}
	all, err := env.Admin.MCPServers(env.Ctx())
	require.NoError(t, err)
	assert.Len(t, all, 2, "no refused registration was written")

	res = r.run("", "mcp", "servers", "remove", "github")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Equal(t, "removed github\n", res.stdout)
	_, err = env.Admin.MCPServer(env.Ctx(), "github")
	assert.Equal(t, 404, client.StatusOf(err))
	res = r.run("", "mcp", "servers", "get", "github")
	assert.Equal(t, 3, res.code, "%+v", res)
}
