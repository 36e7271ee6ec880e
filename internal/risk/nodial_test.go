package risk

import (
	"context"
	"go/parser"
	"go/token"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// failingTransport fails the test for any HTTP request.
type failingTransport struct{ t *testing.T }

func (f failingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.t.Errorf("the classifier sent an HTTP request to %s", r.URL)
	return nil, net.ErrClosed
}

// TestClassifierNeverTouchesTheNetwork: the classifier judges hosts
// (metadata endpoints, private ranges, look-alikes) from their text only;
// it never resolves or dials one. Every classify case runs with the
// default resolver and HTTP transport replaced by ones that fail the test
// if asked to connect, and the package's code names no dialler, resolver
// or HTTP client. (Not parallel: it swaps process-wide defaults while the
// parallel tests wait.)
func TestClassifierNeverTouchesTheNetwork(t *testing.T) {
	resolver, transport := net.DefaultResolver, http.DefaultTransport
	t.Cleanup(func() { net.DefaultResolver, http.DefaultTransport = resolver, transport })
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(_ context.Context, network, address string) (net.Conn, error) {
		t.Errorf("the classifier resolved a name through %s %s", network, address)
		return nil, net.ErrClosed
	}}
	http.DefaultTransport = failingTransport{t}
	for _, tc := range classifyCases(t) {
		Classify(tc.tool, tc.args, tc.cfg)
	}

	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		parsed, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			require.NotContains(t, []string{"net/http", "net/rpc", "net/smtp", "crypto/tls"}, path, "%s imports a network client", f)
		}
		for _, call := range []string{"net.Dial", "net.Lookup", "Resolver", "DialContext"} {
			require.NotContains(t, string(src), call, "%s names %s", f, call)
		}
	}
}
