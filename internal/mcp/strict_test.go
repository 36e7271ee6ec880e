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

// TestFoldedFieldNamesAreRefused: a key Go reads as one of the fields the
// relays decide on only by folding it is refused, in a call's params and
// in a message: JavaScript and Python servers read only the exact
// spelling, so with "Arguments" the policy and the reviewers would decide
// on arguments the tool never gets (it would run on its defaults). Keys
// of other names pass, unread.
func TestFoldedFieldNamesAreRefused(t *testing.T) {
	t.Parallel()
	for _, params := range []string{
		`{"name":"deploy","Arguments":{"dry_run":true}}`,
		`{"name":"deploy","ARGUMENTS":{"dry_run":true}}`,
		`{"name":"deploy","argumentſ":{"dry_run":true}}`,
		`{"Name":"deploy","arguments":{}}`,
		`{"name":"deploy","arguments":{},"Task":{"ttl":1}}`,
		`{"name":"deploy","arguments":{},"_META":{"correlation_id":"c"}}`,
		`{"name":"deploy","arguments":{},"_meta":{"Correlation_ID":"c"}}`,
	} {
		_, err := DecodeCall(json.RawMessage(params))
		require.Error(t, err, params)
		assert.Contains(t, err.Error(), "must be spelled", params)
	}
	c, err := DecodeCall(json.RawMessage(`{"name":"deploy","arguments":{"Dry_Run":true},"extra":1,"_meta":{"progressToken":7,"vendor/x":"y"}}`))
	require.NoError(t, err, "unknown keys and any argument names pass")
	assert.Equal(t, map[string]any{"Dry_Run": true}, c.Arguments)

	for _, bad := range []string{
		`{"jsonrpc":"2.0","ID":1,"method":"tools/call","params":{"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","Params":{"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":1,"Result":{}}`,
		`{"jsonrpc":"2.0","id":1,"reſult":{}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","Id":2,"method":"ping"}]`,
	} {
		err := CheckMessage([]byte(bad))
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "must be spelled", bad)
	}
	assert.NoError(t, CheckMessage([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping","x-vendor":{"Id":1}}`)))
}
