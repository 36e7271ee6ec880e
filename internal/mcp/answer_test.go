package mcp_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/mcp"
)

// TestAnswerReencodes: the upstream's answer goes to the client as
// received only when it is a plain response with the client's id as it
// spelled it; otherwise as Go read it, with the client's id: an error
// beside a result (which Python reads) loses the result.
func TestAnswerReencodes(t *testing.T) {
	t.Parallel()
	rl := mcp.Relay{MaxBytes: 1 << 10, Report: func(mcp.ResultReport) (json.RawMessage, error) { return nil, nil },
		Later: func(func()) {}}
	answer := func(id, raw string) string {
		var m mcp.Message
		require.NoError(t, json.Unmarshal([]byte(raw), &m))
		return string(rl.Answer(json.RawMessage(id), m, []byte(raw)))
	}
	plain := `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`
	assert.Equal(t, plain, answer("7", plain))
	assert.JSONEq(t, plain, answer("7", `{"jsonrpc":"2.0","id":7.0,"result":{"content":[]}}`))
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"no"}}`,
		answer("7", `{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"no"},"result":{"content":[{"type":"text","text":"hidden"}]}}`))
	assert.JSONEq(t, plain, answer("7", `{"jsonrpc":"2.0","id":7,"result":{"content":[]},"extra":"hidden"}`))
}
