package mcp_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/mcp"
)

// TestValidateNormalises: a valid stdio registration is sandboxed unless
// it says otherwise, its lists sorted; an http one's CIDRs masked and
// deduplicated.
func TestValidateNormalises(t *testing.T) {
	t.Parallel()
	s, err := mcp.Validate(mcp.Server{Name: "fs", Transport: "stdio", Command: "npx",
		Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv"}, PassEnv: []string{"PATH", "HOME"}})
	require.NoError(t, err)
	require.NotNil(t, s.Sandbox)
	assert.True(t, *s.Sandbox)
	assert.Equal(t, []string{"HOME", "PATH"}, s.PassEnv)
	assert.Equal(t, []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv"}, s.Args, "args keep their order")

	h, err := mcp.Validate(mcp.Server{Name: "h", Transport: "http", URL: "http://[::1]:8080/mcp",
		AllowPrivate: []string{"::1/128", "10.1.2.3/8", "10.0.0.0/8"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"10.0.0.0/8", "::1/128"}, h.AllowPrivate)
	assert.Nil(t, h.Sandbox)

	for _, cmd := range []string{"/usr/local/bin/github-mcp-server", "uvx", "node", "python3.12", "mcp-server_git"} {
		_, err := mcp.Validate(mcp.Server{Name: "c", Transport: "stdio", Command: cmd})
		assert.NoError(t, err, cmd)
	}
	for _, cmd := range []string{"bash -c x", "a&&b", "`id`", "a>b", "~/bin/x", "bin/x", "/usr/bin/", "/usr//bin/x", "*", "a\nb", "..", "."} {
		_, err := mcp.Validate(mcp.Server{Name: "c", Transport: "stdio", Command: cmd})
		assert.Error(t, err, cmd)
	}
}

// TestView: admins and agents read env values; other readers get them
// withheld, marked redacted; the stored registration is not changed.
func TestView(t *testing.T) {
	t.Parallel()
	reg := mcp.Registration{Server: mcp.Server{Name: "x", Env: map[string]string{"TOKEN": "secret"}}, Version: 1}
	assert.Equal(t, "secret", mcp.View(reg, []string{"admin"}).Env["TOKEN"])
	assert.Equal(t, "secret", mcp.View(reg, []string{"agent"}).Env["TOKEN"])
	for _, roles := range [][]string{{"reviewer"}, {"auditor"}, {"reviewer", "auditor"}, nil} {
		v := mcp.View(reg, roles)
		assert.Equal(t, "[redacted]", v.Env["TOKEN"], roles)
		assert.True(t, v.Redacted)
	}
	assert.Equal(t, "secret", reg.Env["TOKEN"])
	assert.Equal(t, "mcp.github.create_issue", mcp.ToolName("github", "create_issue"))
}

// TestHeaderValues: the headers a registration's headers_from_env sets,
// from the variables set and not empty; a registration naming a variable
// the rules refuse now (stored before them) sends no header at all.
func TestHeaderValues(t *testing.T) {
	t.Parallel()
	env := map[string]string{"GITHUB_AUTH": "Bearer x", "EMPTY": "", "AWS_SECRET_ACCESS_KEY": "s", "PGPASSWORD": "p"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	h, err := mcp.HeaderValues(mcp.Server{HeadersFromEnv: map[string]string{"Authorization": "GITHUB_AUTH", "X-E": "EMPTY", "X-U": "UNSET"}}, lookup)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"Authorization": "Bearer x"}, h)
	for _, name := range []string{"AWS_SECRET_ACCESS_KEY", "PGPASSWORD", "AIRLOCK_TOKEN", "LD_PRELOAD"} {
		h, err := mcp.HeaderValues(mcp.Server{HeadersFromEnv: map[string]string{"Authorization": "GITHUB_AUTH", "X-A": name}}, lookup)
		assert.Error(t, err, name)
		assert.Nil(t, h, name)
	}
}
