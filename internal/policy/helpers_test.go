package policy

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// mustCompile parses a JSON or YAML policy document and compiles it.
func mustCompile(t testing.TB, src string, version int) *Compiled {
	t.Helper()
	doc, err := ParseDocument([]byte(src))
	require.NoError(t, err)
	c, err := Compile(doc, version)
	require.NoError(t, err)
	return c
}

// designPolicy is the agent policy from DESIGN.md.
const designPolicy = `{
  "default": "deny",
  "rules": [
    {"id": "reads",      "tool": "fs.read",       "effect": "allow"},
    {"id": "big-spend",  "tool": "payments.send", "effect": "approve",
     "when": "args.amount > 100", "approvals": 2, "timeout": "15m"},
    {"id": "spend",      "tool": "payments.send", "effect": "allow"},
    {"id": "no-shell",   "tool": "shell.*",       "effect": "deny"}
  ]
}`

// designFleet is a small fleet policy used with designPolicy.
const designFleet = `{
  "rules": [
    {"id": "no-secrets", "tool": "fs.read", "effect": "deny", "when": "args.path.startsWith('/etc/')"},
    {"id": "critical",   "tool": "*",       "effect": "approve", "risk": "critical"}
  ]
}`

func ptr[T any](v T) *T { return &v }
