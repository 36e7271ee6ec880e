package risk

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFileURLsArePaths: a file: URL is read as the local path it names,
// by PathArgs (the hard path tier) and by the classifier, in any spelling
// of the scheme and with its escapes decoded; a web URL is not a path.
func TestFileURLsArePaths(t *testing.T) {
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"fs.read", map[string]any{"path": "file:///home/me/.ssh/id_rsa"}, "/home/me/.ssh/id_rsa"},
		{"resources.read", map[string]any{"uri": "FILE://localhost/home/me/%2Essh/config"}, "/home/me/.ssh/config"},
		{"fs.read", map[string]any{"path": "file:/etc/shadow"}, "/etc/shadow"},
		{"fs.read", map[string]any{"path": "file:///C:/Users/me/.ssh/id_rsa"}, "C:/Users/me/.ssh/id_rsa"},
		{"fs.read", map[string]any{"path": "file://server/share/.env"}, "//server/share/.env"},
		{"shell.run", map[string]any{"command": "curl -s --netrc-file=file:///home/me/.netrc file:///home/me/.aws/credentials"}, "/home/me/.aws/credentials"},
	} {
		var got []string
		PathArgs(c.tool, c.args, func(p PathArg) bool { got = append(got, p.Path); return true })
		require.Contains(t, got, c.want, "%v", c.args)
		require.NotEqual(t, Low, Classify(c.tool, c.args, Config{}).Level, "%v", c.args)
	}
	a := Classify("resources.read", map[string]any{"uri": "file:///home/me/%2essh/id_rsa"}, Config{})
	require.Contains(t, a.Reasons, "sensitive path ~/.ssh (args.uri)")
	var got []string
	PathArgs("http.get", map[string]any{"url": "https://example.com/.env"}, func(p PathArg) bool { got = append(got, p.Path); return true })
	require.Empty(t, got, "a web URL names no local path")
}
