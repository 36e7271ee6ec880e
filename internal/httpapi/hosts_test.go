package httpapi_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestLookalikeHostIsEscalated: with settings.allowed_hosts and a rule
// that allows http.get, a URL whose host only looks like an allowed one
// (a Cyrillic "а", a backslash that browsers read as the end of the host)
// is high risk and waits for a reviewer, as a plain outside host does;
// the allowed host itself is still allowed. Before, the look-alike was
// folded to ASCII and judged as the allowed host (found by a review).
// Nothing is fetched: the classifier only reads the URLs.
func TestLookalikeHostIsEscalated(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("fetcher", map[string]any{
		"rules":    []map[string]any{{"id": "get", "tool": "http.get", "effect": "allow"}},
		"settings": map[string]any{"allowed_hosts": []string{"api.example.com"}},
	})
	get := func(u string) *client.Action {
		t.Helper()
		a, err := agent.Submit(context.Background(), client.SubmitRequest{Tool: "http.get", Args: map[string]any{"url": u}})
		require.NoError(t, err)
		return a
	}

	ok := get("https://api.example.com/upload")
	assert.Equal(t, "approved", ok.Status, "%+v", ok.Risk)
	assert.Equal(t, "medium", ok.Risk.Level)

	outside := get("https://attacker.net/upload")
	assert.Equal(t, "pending", outside.Status, "%+v", outside.Risk)

	for _, u := range []string{
		"https://api.ex\u0430mple.com/upload",          // Cyrillic а
		`https://attacker.net\@api.example.com/upload`, // WHATWG: host attacker.net
		`https://attacker.net\.api.example.com/x`,
	} {
		a := get(u)
		assert.Equal(t, "pending", a.Status, "%s: %+v", u, a.Risk)
		assert.Equal(t, "high", a.Risk.Level, u)
		assert.Equal(t, "risk", a.Decision.Source, u)
		if strings.Contains(u, "\u0430") {
			assert.Contains(t, a.Risk.Reasons, "host api.xn--exmple-4nf.com not in allowed hosts (args.url)")
			assert.Contains(t, a.Risk.Reasons, "host api.ex\u0430mple.com is written with look-alike letters (api.xn--exmple-4nf.com) (args.url)")
		} else {
			assert.Contains(t, a.Risk.Reasons, "host attacker.net not in allowed hosts (args.url)")
		}
	}
}
