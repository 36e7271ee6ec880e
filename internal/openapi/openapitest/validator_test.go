package openapitest_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/openapi/openapitest"
)

// TestDocumentLoadsAndValidates: the embedded document is valid OpenAPI
// 3.1 as kin-openapi reads it.
func TestDocumentLoadsAndValidates(t *testing.T) {
	v, err := openapitest.Load()
	require.NoError(t, err)
	assert.Equal(t, "3.1.0", v.Doc().OpenAPI)
	assert.True(t, v.Doc().IsOpenAPI31OrLater())
}

var jsonHeader = http.Header{"Content-Type": {"application/json"}}

// TestValidatorCatchesWrongShapes proves the check every API test relies
// on fails on what the document does not describe.
func TestValidatorCatchesWrongShapes(t *testing.T) {
	v, err := openapitest.Load()
	require.NoError(t, err)
	agent := `{"id":"bot","name":"Bot","description":"","owner":"admin","created_by":"admin","created_at":"2026-01-02T03:04:05Z"}`
	errBody := `{"error":{"code":"not_found","message":"no agent"}}`
	for _, tc := range []struct {
		name, method, path string
		status             int
		header             http.Header
		body               string
		ok                 bool
	}{
		{"a documented agent", "GET", "/api/v1/agents/bot", 200, jsonHeader, agent, true},
		{"a documented error", "GET", "/api/v1/agents/bot", 404, jsonHeader, errBody, true},
		{"an extra field", "GET", "/api/v1/agents/bot", 200, jsonHeader,
			`{"id":"bot","name":"Bot","description":"","created_by":"admin","created_at":"2026-01-02T03:04:05Z","secret":"x"}`, false},
		{"a missing field", "GET", "/api/v1/agents/bot", 200, jsonHeader, `{"id":"bot","name":"Bot"}`, false},
		{"a field of the wrong type", "GET", "/api/v1/agents/bot", 200, jsonHeader,
			`{"id":7,"name":"Bot","description":"","created_by":"admin","created_at":"2026-01-02T03:04:05Z"}`, false},
		{"an undocumented status", "GET", "/api/v1/agents/bot", 418, jsonHeader, errBody, false},
		{"an error without the envelope", "GET", "/api/v1/agents/bot", 404, jsonHeader, `{"code":"not_found","message":"x"}`, false},
		{"an error code that is not snake_case", "GET", "/api/v1/agents/bot", 404, jsonHeader,
			`{"error":{"code":"Not Found","message":"x"}}`, false},
		{"an unknown path answered 200", "GET", "/api/v1/nothing", 200, jsonHeader, `{}`, false},
		{"an unknown path answered 404", "GET", "/api/v1/nothing", 404, jsonHeader, errBody, true},
		{"a wrong method answered 400", "DELETE", "/api/v1/agents/bot", 400, jsonHeader, errBody, false},
		{"a wrong method answered 405 without Allow", "DELETE", "/api/v1/agents/bot", 405, jsonHeader,
			`{"error":{"code":"method_not_allowed","message":"x"}}`, false},
		{"a wrong method answered 405 with Allow", "DELETE", "/api/v1/agents/bot", 405,
			http.Header{"Content-Type": {"application/json"}, "Allow": {"GET"}},
			`{"error":{"code":"method_not_allowed","message":"x"}}`, true},
		{"a policy read without its ETag", "GET", "/api/v1/fleet/policy", 200, jsonHeader,
			`{"scope":"fleet","version":0,"document":{"rules":[]},"created_by":"","created_at":"0001-01-01T00:00:00Z"}`, false},
		{"an action whose risk lacks injection", "GET", "/api/v1/actions/a1", 200, jsonHeader,
			`{"id":"a1","agent_id":"bot","agent_instance":"","conversation_id":"","step_id":"","correlation_id":"",` +
				`"tool":"fs.read","args":{},"reason":"","status":"approved","risk":{"level":"low","score":0,"reasons":[]},` +
				`"decision":{"effect":"allow","by":"policy","rule_id":"r","policy_version":1,"source":"agent","reason":""},` +
				`"approvals":[],"required_approvals":0,"expires_at":null,"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z"}`,
			false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "http://127.0.0.1:1"+tc.path, nil)
			err := v.ValidateResponse(req, nil, tc.status, tc.header, []byte(tc.body))
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}
