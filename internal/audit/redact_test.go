package audit

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRedactKeys(t *testing.T) {
	t.Parallel()
	in := map[string]any{
		"to":            "ops@example.com",
		"password":      "hunter2",
		"nested":        map[string]any{"api_key": "abc", "list": []any{map[string]any{"client_secret": "s"}}},
		"Authorization": "Basic Zm9vOmJhcg==",
		"empty_token":   "",
		"amount":        12.5,
	}
	out := Redact(in)
	assert.Equal(t, "ops@example.com", out["to"])
	assert.Equal(t, Redacted, out["password"])
	assert.Equal(t, Redacted, out["nested"].(map[string]any)["api_key"])
	assert.Equal(t, Redacted, out["nested"].(map[string]any)["list"].([]any)[0].(map[string]any)["client_secret"])
	assert.Equal(t, Redacted, out["Authorization"])
	assert.Equal(t, "", out["empty_token"])
	assert.Equal(t, 12.5, out["amount"])
	assert.Equal(t, "hunter2", in["password"], "the input is not modified")
}

func TestRedactValues(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"bearer":       "curl -H 'Authorization: Bearer abcdefghijklmnop.qrs' https://x",
		"jwt":          "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlLXZhbHVl here",
		"aws key id":   "AKIAIOSFODNN7EXAMPLE",
		"openai":       "sk-proj-abcdefghijklmnopqrstuvwxyz123456",
		"anthropic":    "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
		"stripe":       "sk_live_abcdefghijklmnop1234",
		"github":       "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
		"github pat":   "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
		"gitlab":       "glpat-abcdefghijklmnopqrst",
		"slack":        "xoxb-1234567890-abcdefghij",
		"google":       "AIzaSyA-abcdefghijklmnopqrstuvwxyz12345",
		"npm":          "npm_abcdefghijklmnopqrstuvwxyz0123456789",
		"sendgrid":     "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz",
		"private key":  "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
		"env password": "PASSWORD=hunter2 ./run.sh",
		"aws secret":   "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		"url password": "postgres://app:s3cr3t@db.internal/prod",
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out := RedactString(in)
			assert.Contains(t, out, Redacted)
			for _, secret := range []string{"hunter2", "s3cr3t", "EXAMPLE", "abcdefghijklmnop", "MIIEow"} {
				if strings.Contains(in, secret) {
					assert.NotContains(t, out, secret)
				}
			}
		})
	}
	assert.Equal(t, "just an ordinary sentence about tokens", RedactString("just an ordinary sentence about tokens"))
	assert.Equal(t, "postgres://app:"+Redacted+"@db.internal/prod", RedactString("postgres://app:s3cr3t@db.internal/prod"))
}

func TestRedactDeepInputIsBounded(t *testing.T) {
	t.Parallel()
	var v any = "leaf"
	for range 1000 {
		v = map[string]any{"k": v}
	}
	out := Redact(map[string]any{"root": v})
	assert.NotNil(t, out)
}
