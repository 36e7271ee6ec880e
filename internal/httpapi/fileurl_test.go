package httpapi_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
)

// TestDenyPathsFileURLs: a path written as a file: URL (as MCP resources
// name files, and as curl reads them) is the path it names. Found by a
// review: any value with "://" was taken for a network URL, so
// "file:///home/me/.ssh/id_rsa" passed the hard path tier that
// "/home/me/.ssh/id_rsa" cannot, and the classifier called the read low.
func TestDenyPathsFileURLs(t *testing.T) {
	t.Parallel()
	env := hardPathsEnv(t)
	agent := env.Agent("file-urls", allowEverything)
	for _, c := range []struct {
		tool  string
		args  map[string]any
		entry string
	}{
		{"fs.read", map[string]any{"path": "file:///home/me/.ssh/id_rsa"}, "~/.ssh"},
		{"resources.read", map[string]any{"uri": "file:///root/.aws/credentials"}, "~/.aws"},
		{"resources.read", map[string]any{"uri": "FILE://localhost/home/me/%2Essh/config"}, "~/.ssh"},
		{"mcp.fetch", map[string]any{"url": "file:///srv/app/.env"}, ".env"},
		{"shell.run", map[string]any{"command": "curl -s file:///home/me/.netrc"}, "~/.netrc"},
	} {
		requireHardDenied(t, agent, c.tool, c.args, "deny_paths", c.entry)
	}
	// The classifier reads them as the paths they name too.
	a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "fs.read", Args: map[string]any{"path": "file:///etc/shadow"}})
	require.NoError(t, err)
	assert.Equal(t, "high", a.Risk.Level, "%v", a.Risk.Reasons)
	assert.Contains(t, a.Risk.Reasons, "sensitive path /etc/shadow (args.path)")
}
