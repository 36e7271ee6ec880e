package mcp

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCheckMessage: messages the gate and an upstream could read
// differently are refused; ordinary ones pass.
func TestCheckMessage(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":[1,{"b":2}],"c":{}}}}`,
		`{"jsonrpc":"2.0","id":"x","result":{}}`,
		`[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`,
		`{"a":{"x":1},"b":{"x":2},"c":[{"x":1},{"x":2}]}`,
	} {
		assert.NoError(t, CheckMessage([]byte(ok)), ok)
	}
	for _, bad := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete-repo","Name":"echo"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","METHOD":"tools/call"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"p":"/a","p":"/etc"}}}`,
		`{"jsonrpc":"2.0","id":1,"id":2}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"ec\xffho\"}}",
		`{"jsonrpc":"2.0",`,
	} {
		assert.Error(t, CheckMessage([]byte(bad)), bad)
	}
}
