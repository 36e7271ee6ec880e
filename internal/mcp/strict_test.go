package mcp

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		// Keys Go folds together that lower-casing keeps apart: Go fills
		// params from "paramſ" (U+017F, long s), arguments from
		// "argumentſ"; a JavaScript or Python upstream reads the others.
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_repo","arguments":{"repo":"prod"}},"paramſ":{"name":"search","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"q","arguments":{"sql":"DROP TABLE t"},"argumentſ":{"sql":"SELECT 1"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cp","arguments":{"source":"/tmp/ok","ſource":"/etc/shadow"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"k","arguments":{"k":"a","\u212a":"b"}}}`,
		// A lone surrogate: Go reads U+FFFD, the upstream the escape.
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"s":"\ud800"}}}`,
	} {
		assert.Error(t, CheckMessage([]byte(bad)), bad)
	}
}

// TestCheckMessageAgreesWithGo: the long-s message above is one Go reads
// as the harmless call, which is why it is refused.
func TestCheckMessageAgreesWithGo(t *testing.T) {
	t.Parallel()
	var m Message
	require.NoError(t, json.Unmarshal([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_repo"},"paramſ":{"name":"search"}}`), &m))
	c, err := DecodeCall(m.Params)
	require.NoError(t, err)
	assert.Equal(t, "search", c.Name, "Go's decoder takes \"paramſ\" as params")
}

// TestDecodeCallRefusesWhatTheAPIRefuses: arguments the API would refuse
// in a submit (NUL, a number PostgreSQL cannot store) are refused with
// the field, not met later as a failure to record the action.
func TestDecodeCallRefusesWhatTheAPIRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ params, want string }{
		{`{"name":"echo","arguments":{"s":"a\u0000b"}}`, "s: a string holds NUL"},
		{`{"name":"echo","arguments":{"n":[1e200000]}}`, "n[0]: a number may have at most 1000 digits"},
		{`{"name":"echo","arguments":{"a":1,"A":2}}`, "duplicate key"},
		{`{"name":"echo","arguments":{"n":1e400}}`, "the number 1e400 is read as +Inf"}, // by a float64 reader
	} {
		_, err := DecodeCall(json.RawMessage(tc.params))
		require.Error(t, err, tc.params)
		assert.Contains(t, err.Error(), tc.want)
		assert.Contains(t, err.Error(), "params.arguments")
	}
	c, err := DecodeCall(json.RawMessage(`{"name":"echo","arguments":{"n":1e300,"s":"ok"}}`))
	require.NoError(t, err)
	assert.Equal(t, json.Number("1e300"), c.Arguments["n"])
}
