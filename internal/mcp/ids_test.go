package mcp_test

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/mcp"
)

// TestSameID: ids are the same when a client SDK could take one for the
// other: the TypeScript SDK (Number(id)), the Python SDK (int(id) of a
// string) and the Go SDK (int64 of a float64); a string that none of them
// reads as that number is not.
func TestSameID(t *testing.T) {
	t.Parallel()
	for _, p := range [][2]string{
		{`7`, `7`}, {`7`, `7.0`}, {`7`, `7e0`}, {`7`, `70e-1`}, {`7`, `0.7e1`}, {`7`, `"7"`}, {`7`, `" 7\n"`},
		{`7`, `"0x7"`}, {`7`, `"7.0"`}, {`7`, `"+7"`}, {`7`, `"07"`}, {`7`, `"７"`}, {`7`, `"\u0667"`},
		{`10`, `"1_0"`}, {`0`, `""`}, {`0`, `-0`}, {`0`, `"-0"`}, {`7`, `7.5`}, {`-1`, `-1.9`},
		{`9007199254740993`, `9007199254740992`}, {`"abc"`, `"abc"`}, {`"7"`, `7`}, {`1.5`, `"1.5"`},
	} {
		assert.True(t, mcp.SameID(json.RawMessage(p[0]), json.RawMessage(p[1])), "%s %s", p[0], p[1])
		assert.True(t, mcp.SameID(json.RawMessage(p[1]), json.RawMessage(p[0])), "%s %s", p[1], p[0])
	}
	for _, p := range [][2]string{
		{`7`, `8`}, {`7`, `"a7"`}, {`7`, `"7a"`}, {`7`, `"7_"`}, {`7`, `"0x7_"`}, {`7`, `"-0x7"`}, {`7`, `null`},
		{`1`, `true`}, {`7`, `"7.5"`}, {`"abc"`, `"abd"`}, {`"abc"`, `" abc"`}, {`7`, `1e400`}, {`7`, `"1e400"`},
		{`0`, `null`}, {`7`, `[7]`}, {`7`, `"Infinity"`},
	} {
		assert.False(t, mcp.SameID(json.RawMessage(p[0]), json.RawMessage(p[1])), "%s %s", p[0], p[1])
	}
	assert.False(t, mcp.SameID(json.RawMessage(`7`), json.RawMessage(`1e999999999`)), "a huge exponent is not worked out")
}

// TestReadMessages: a message or a batch is read when every reader reads
// it alike; anything else is refused.
func TestReadMessages(t *testing.T) {
	t.Parallel()
	elems, msgs, batch, err := mcp.ReadMessages([]byte(` [{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"x"}] `))
	require.NoError(t, err)
	assert.True(t, batch)
	require.Len(t, elems, 2)
	assert.True(t, msgs[0].IsResponse())
	assert.False(t, msgs[1].IsResponse())
	assert.True(t, mcp.Message{ID: json.RawMessage(`1`), Method: "x", Result: json.RawMessage(`{}`)}.IsResponse(),
		"a result beside a method may be read as a response")
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{},"reſult":{}}`,
		`{"jsonrpc":"2.0","id":1,"ID":2,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"n":NaN}}`,
		"\uFEFF{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
		`{"jsonrpc":"2.0","id":1,"result":{"t":"\ud800"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{}} {}`,
		`[{"jsonrpc":"2.0","id":1,"result":{}}, 5]`,
		``, `not json`,
	} {
		_, _, _, err := mcp.ReadMessages([]byte(body))
		assert.Error(t, err, body)
	}
	ids, parsed := mcp.LooseIDs([]byte(`{"id":1,"ID":2,"result":{}}`))
	assert.True(t, parsed)
	assert.ElementsMatch(t, []string{"1", "2"}, []string{string(ids[0]), string(ids[1])})
	_, parsed = mcp.LooseIDs([]byte(`{"id":1,"result":NaN}`))
	assert.False(t, parsed)
}

// TestEventReader: lines end at CRLF, LF or CR (also split across
// reads), a leading BOM is skipped, a data field's value loses one
// space, an event without data or past the limit is told apart, and an
// unfinished event is returned at the end.
func TestEventReader(t *testing.T) {
	t.Parallel()
	stream := "\uFEFF: hi\r\n\r\nid: 1\revent: message\rdata: {\"a\":\r\rdata:1}\n\n" +
		"data\r\n\r\n" + "data: " + strings.Repeat("x", 100) + "\n\n" + "data: after\r\n\r\n" + "data: tail"
	for _, r := range []io.Reader{strings.NewReader(stream), iotest.OneByteReader(strings.NewReader(stream))} {
		er := mcp.NewEventReader(r, 64)
		var got []mcp.Event
		for {
			ev, err := er.Next()
			if len(ev.Lines) > 0 || ev.Over {
				got = append(got, ev)
			}
			if err != nil {
				require.ErrorIs(t, err, io.EOF)
				break
			}
		}
		require.Len(t, got, 7)
		assert.Equal(t, [][]byte{[]byte(": hi")}, got[0].Lines)
		assert.False(t, got[0].HasData)
		assert.Equal(t, [][]byte{[]byte("id: 1"), []byte("event: message"), []byte(`data: {"a":`)}, got[1].Lines)
		assert.Equal(t, `{"a":`, string(got[1].Data), "a lone CR ends a line and an event")
		assert.Equal(t, "1}", string(got[2].Data))
		assert.True(t, got[3].HasData)
		assert.Empty(t, got[3].Data)
		assert.True(t, got[4].Over)
		assert.Nil(t, got[4].Lines)
		assert.Equal(t, "after", string(got[5].Data))
		assert.Equal(t, "tail", string(got[6].Data), "the unfinished event at the end")
	}
	var b bytes.Buffer
	mcp.RewriteEvent(&b, [][]byte{[]byte("id: 2"), []byte("event: other"), []byte("data: x"), []byte("data: y"), []byte(": c")},
		[]byte("{\"a\":\r\n1}"))
	assert.Equal(t, "id: 2\nevent: message\ndata: {\"a\":\ndata: 1}\n: c\n\n", b.String())
}
