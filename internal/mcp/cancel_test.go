package mcp_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/airlockhq/airlock/internal/mcp"
)

// TestCancelledID: notifications/cancelled names its request by
// params.requestId, compared as clients compare ids; params without one,
// a null one, or one under a key only Go's folding reads name none.
func TestCancelledID(t *testing.T) {
	t.Parallel()
	id, ok := mcp.CancelledID(json.RawMessage(`{"requestId":7,"reason":"timed out"}`))
	assert.True(t, ok)
	assert.True(t, id.Same(mcp.NewID(json.RawMessage(`7.0`))))
	assert.True(t, id.Same(mcp.NewID(json.RawMessage(`"7"`))))
	assert.False(t, id.Same(mcp.NewID(json.RawMessage(`8`))))
	for _, params := range []string{``, `null`, `[]`, `{}`, `{"requestId":null}`, `{"RequestId":7}`, `{"requestid":7}`} {
		_, ok := mcp.CancelledID(json.RawMessage(params))
		assert.False(t, ok, params)
	}
}
