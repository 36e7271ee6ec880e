package jsonx

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type inner struct {
	Name string `json:"name"`
}

type target struct {
	Tool  string         `json:"tool"`
	Args  map[string]any `json:"args"`
	Count int            `json:"count,omitempty"`
	Inner *inner         `json:"inner,omitempty"`
	List  []inner        `json:"list,omitempty"`
}

func TestDecodeAccepts(t *testing.T) {
	t.Parallel()
	var v target
	require.NoError(t, Decode([]byte(` {"tool":"fs.read","args":{"path":"b","n":1.5},"inner":{"name":"x"},"list":[{"name":"y"}]} `), &v))
	assert.Equal(t, "fs.read", v.Tool)
	assert.Equal(t, json.Number("1.5"), v.Args["n"], "numbers in free-form maps decode exactly, as json.Number")
	assert.Equal(t, "x", v.Inner.Name)
}

func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, body, want string }{
		{"empty", ``, "empty"},
		{"blank", "  \n", "empty"},
		{"syntax", `{"tool":`, "unexpected end"},
		{"trailing value", `{"tool":"a"} {}`, "after the JSON value"},
		{"trailing garbage", `{"tool":"a"}x`, "after the JSON value"},
		// Keys that differ only in case are refused in free-form args too: a
		// policy reading args.path must not be fooled by an executor that
		// looks up "Path".
		{"case-folded keys in args", `{"args":{"Path":"a","path":"b"}}`, `duplicate key "path"`},
		{"unknown field", `{"tool":"a","other":1}`, `unknown field "other"`},
		{"case-folded field", `{"Tool":"a"}`, `unknown field "Tool"`},
		{"case-folded nested field", `{"inner":{"NAME":"a"}}`, `unknown field "inner.NAME"`},
		{"case-folded field in list", `{"list":[{"Name":"a"}]}`, `unknown field "list[0].Name"`},
		{"duplicate", `{"tool":"a","tool":"b"}`, `duplicate key "tool"`},
		{"duplicate other case", `{"tool":"a","TOOL":"b"}`, `duplicate key "TOOL"`},
		{"duplicate in args", `{"args":{"k":1,"k":2}}`, `duplicate key "k"`},
		{"wrong type", `{"tool":1}`, `"tool" must be a string`},
		{"args array", `{"args":[]}`, `"args" must be an object`},
		{"invalid utf-8", "{\"tool\":\"\xc3\x28\"}", "UTF-8"},
		{"too deep", `{"args":` + strings.Repeat(`[`, 100) + strings.Repeat(`]`, 100) + `}`, "deeper than"},
		{"very deep", strings.Repeat(`{"a":`, 10000) + `1` + strings.Repeat(`}`, 10000), "deeper than"},
		{"not an object", `"tool"`, "must be an object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var v target
			err := Decode([]byte(tc.body), &v)
			require.Error(t, err)
			var je *Error
			require.ErrorAs(t, err, &je)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"tool":"a","args":{"x":[1,2,{"y":null}]}}`))
	f.Add([]byte(`{"tool":"a","Tool":"b"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var v target
		_ = Decode(data, &v) // must not panic
	})
}

// TestDecodeKeepsNumbersExact: a 17-digit integer is not rounded to the
// nearest float64 (1e16).
func TestDecodeKeepsNumbersExact(t *testing.T) {
	t.Parallel()
	var v target
	require.NoError(t, Decode([]byte(`{"tool":"t","args":{"amount":10000000000000001,"nested":[{"x":1e400}]}}`), &v))
	assert.Equal(t, json.Number("10000000000000001"), v.Args["amount"])
	nested := v.Args["nested"].([]any)[0].(map[string]any)
	assert.Equal(t, json.Number("1e400"), nested["x"])
}

// TestDecodeFoldsKeysAsGoDoes: keys that Go's decoder would match to the
// same struct field are duplicates, also under Unicode's case foldings
// that lower-casing misses: "ſ" (U+017F, long s) reads as "s", "K"
// (U+212A, Kelvin) as "k". Before, {"args":…,"argſ":…} passed the check
// and Go took the second as args.
func TestDecodeFoldsKeysAsGoDoes(t *testing.T) {
	t.Parallel()
	type call struct {
		Params map[string]any `json:"params"`
	}
	var goReads call
	require.NoError(t, json.Unmarshal([]byte(`{"params":{"a":1},"paramſ":{"a":2}}`), &goReads))
	require.Equal(t, json.Number("2").String(), fmt.Sprint(goReads.Params["a"]), "Go's decoder fills params from \"paramſ\"")
	for _, doc := range []string{
		`{"tool":"t","args":{"sum":1,"ſum":2}}`,
		`{"tool":"t","argſ":{},"args":{}}`,
		`{"tool":"t","args":{"k":1,"\u212a":2}}`,
		`{"tool":"t","args":{"K":1,"\u212a":2}}`,
		`{"tool":"t","args":{"a":{"ſ":1,"S":2}}}`,
	} {
		err := Check([]byte(doc))
		require.Error(t, err, doc)
		assert.Contains(t, err.Error(), "duplicate key", doc)
		assert.Error(t, CheckUnambiguous([]byte(doc)), doc)
	}
	for _, doc := range []string{`{"ſ":1}`, `{"ü":1,"ű":2}`, `{"ı":1,"i":2}`, `{"ß":1,"ss":2}`} {
		assert.NoError(t, Check([]byte(doc)), "%s: not the same key to Go either", doc)
	}
	assert.Equal(t, FoldKey("PARAMS"), FoldKey("paramſ"))
	assert.Equal(t, FoldKey("k"), FoldKey("\u212a"))
	assert.NotEqual(t, FoldKey("i"), FoldKey("ı"))
}

// TestDecodeBoundsNumbers: a number PostgreSQL cannot store (a request
// that would fail with a 500) or that would print out of all proportion
// is refused, with its field; float64's range and beyond passes exactly.
func TestDecodeBoundsNumbers(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"1e999", "-1e999", "1e-1000", "-12.5e-998", "5E-324", "1.7976931348623157e308", "0", "1e400", "123456789012345678901234567890.5"} {
		var v target
		require.NoError(t, Decode([]byte(`{"tool":"t","args":{"n":`+n+`}}`), &v), n)
		assert.Equal(t, json.Number(n), v.Args["n"])
	}
	for _, n := range []string{"1e1000", "1e200000", "10e999", "1e-1001", "0.0e-1000", "1e99999999999999999999", "1e-99999999999999999999", "-1E+1001"} {
		var v target
		err := Decode([]byte(`{"tool":"t","args":{"a":[{"n":`+n+`}]}}`), &v)
		var je *Error
		require.ErrorAs(t, err, &je, n)
		assert.Equal(t, "args.a[0].n", je.Field, n)
		assert.Contains(t, je.Msg, "at most 1000 digits", n)
		assert.NoError(t, CheckUnambiguous([]byte(`{"n":`+n+`}`)), "%s: every reader reads it alike", n)
	}
}

// TestCheckUnambiguous: NUL passes (every reader reads it alike); a lone
// surrogate, invalid UTF-8, a key twice and trailing data do not.
func TestCheckUnambiguous(t *testing.T) {
	t.Parallel()
	assert.NoError(t, CheckUnambiguous([]byte(`{"a":"x\u0000y","b":[1,{"c":null}]}`)))
	for _, bad := range []string{`{"a":"\ud800"}`, `{"a":"x\udc00"}`, "{\"a\":\"\xff\"}", `{"a":1,"A":2}`, `{"a":1} {}`, ``} {
		assert.Error(t, CheckUnambiguous([]byte(bad)), bad)
	}
}

// TestDecodeRefusesBadStrings: NUL, lone surrogates and invalid UTF-8 in
// any string, value or key, at any depth, are refused with the field.
func TestDecodeRefusesBadStrings(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, body, field, want string }{
		{"NUL in a value", `{"tool":"t","args":{"path":"a\u0000b"}}`, "args.path", "NUL"},
		{"NUL in a nested value", `{"tool":"t","args":{"a":{"b":[1,"x\u0000"]}}}`, "args.a.b[1]", "NUL"},
		{"NUL in a key", `{"tool":"t","args":{"a\u0000b":1}}`, `args["a\x00b"]`, "NUL"},
		{"NUL in a nested key", `{"tool":"t","args":{"a":[{"\u0000":1}]}}`, `args.a[0]["\x00"]`, "NUL"},
		{"NUL in a top-level field", `{"tool":"t\u0000","args":{}}`, "tool", "NUL"},
		{"lone high surrogate", `{"tool":"t","args":{"s":"\ud800"}}`, "args.s", "lone surrogate"},
		{"high surrogate then text", `{"tool":"t","args":{"s":"\ud800x"}}`, "args.s", "lone surrogate"},
		{"high surrogate then non-low", `{"tool":"t","args":{"s":"\ud800\u0041"}}`, "args.s", "lone surrogate"},
		{"lone low surrogate", `{"tool":"t","args":{"s":"a\udc00"}}`, "args.s", "lone surrogate"},
		{"lone surrogate in a key", `{"tool":"t","args":{"k\uDBFF":1}}`, `args["k\ufffd"]`, "lone surrogate"},
		{"invalid UTF-8 in a value", "{\"tool\":\"t\",\"args\":{\"s\":\"a\xffb\"}}", "args.s", "UTF-8"},
		{"invalid UTF-8 in a key", "{\"tool\":\"t\",\"args\":{\"\xc3\":1}}", `args["\ufffd"]`, "UTF-8"},
		{"NUL in a top-level string", `"\u0000"`, "body", "NUL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var v target
			err := Decode([]byte(c.body), &v)
			var je *Error
			require.ErrorAs(t, err, &je)
			assert.Equal(t, c.field, je.Field)
			assert.Contains(t, je.Msg, c.want)
		})
	}
}

func TestDecodeAcceptsGoodEscapes(t *testing.T) {
	t.Parallel()
	var v target
	require.NoError(t, Decode([]byte(`{"tool":"t","args":{"pair":"\ud83d\ude00","slash":"\\ud800","rtl":"\u202e"}}`), &v))
	assert.Equal(t, "😀", v.Args["pair"])
	assert.Equal(t, `\ud800`, v.Args["slash"], "an escaped backslash before u is no escape")
	assert.Equal(t, "\u202e", v.Args["rtl"])
}

// fastCorpus is every document the tests above use, for the fast path's
// differential tests.
var fastCorpus = []string{
	` {"tool":"fs.read","args":{"path":"b","n":1.5},"inner":{"name":"x"},"list":[{"name":"y"}]} `,
	``, "  \n", `{"tool":`, `{"tool":"a"} {}`, `{"tool":"a"}x`, `{"args":{"Path":"a","path":"b"}}`,
	`{"tool":"a","other":1}`, `{"Tool":"a"}`, `{"inner":{"NAME":"a"}}`, `{"list":[{"Name":"a"}]}`,
	`{"tool":"a","tool":"b"}`, `{"tool":"a","TOOL":"b"}`, `{"args":{"k":1,"k":2}}`, `{"tool":1}`, `{"args":[]}`,
	"{\"tool\":\"\xc3\x28\"}", `{"args":` + strings.Repeat(`[`, 64) + strings.Repeat(`]`, 64) + `}`,
	`{"args":` + strings.Repeat(`[`, 63) + strings.Repeat(`]`, 63) + `}`, `"tool"`,
	`{"tool":"t","args":{"amount":10000000000000001,"nested":[{"x":1e400}]}}`,
	`{"tool":"t","args":{"path":"a\u0000b"}}`, `{"tool":"t","args":{"a\u0000b":1}}`, `{"tool":"t","args":{"s":"\ud800"}}`,
	`{"tool":"t","args":{"s":"\ud800\u0041"}}`, `{"tool":"t","args":{"s":"a\udc00"}}`, "{\"tool\":\"t\",\"args\":{\"s\":\"a\xffb\"}}",
	`{"tool":"t","args":{"pair":"\ud83d\ude00","slash":"\\ud800","rtl":"\u202e"}}`,
	`{"tool":"t","args":{"n":-0.5e+3,"m":0,"z":[true,false,null,"x"]}}`, `{"tool":"t","args":{"n":01}}`,
	`{"tool":"t","args":{"n":1.}}`, `{"tool":"t","args":{"n":-}}`, `{"tool":"t","args":{"a":1,}}`, `[1,]`,
	`{"tool":"t","args":{"ü":1,"Ü":2}}`, `{"tool":"t","args":{"\u0041":1,"a":2}}`, "{\"tool\":\"t\",\"args\":{\"a\":\"\t\"}}",
	`{"tool":"t","count":3,"inner":null,"list":null}`, `{"tool":"t","count":"3"}`, `{"tool":"t","args":{"s":"\x"}}`,
	`{"tool":"t","args":{"n":1e1000}}`, `{"tool":"t","args":{"n":1e1001}}`, `{"tool":"t","args":{"n":1e-1000,"m":-12.5e-998}}`,
	`{"tool":"t","args":{"n":0.0e-1000}}`, `{"tool":"t","args":{"n":1e99999999999999999999}}`, `{"tool":"t","args":{"n":5E-324,"m":1.7976931348623157e308}}`,
	`{"tool":"t","args":{"sum":1,"ſum":2}}`, `{"tool":"t","args":{"k":1,"\u212a":2}}`,
}

// TestFastPathAgrees: whatever the fast path accepts, the token walk
// accepts too, and Decode gives the same value either way.
func TestFastPathAgrees(t *testing.T) {
	t.Parallel()
	accepted := 0
	for _, doc := range fastCorpus {
		if fastAgrees(t, []byte(doc)) {
			accepted++
		}
	}
	assert.Greater(t, accepted, 5, "the fast path accepts the plain documents")
	assert.True(t, accepts([]byte(fastCorpus[0]), reflect.TypeFor[*target]()))
	assert.False(t, accepts([]byte(`{"tool":"a","TOOL":"b"}`), reflect.TypeFor[*target]()))
}

// fastAgrees checks one document and says whether the fast path took it.
func fastAgrees(t *testing.T, data []byte) bool {
	t.Helper()
	if accepts(data, nil) { // Check's and CheckUnambiguous's fast path
		for _, unambiguousOnly := range []bool{false, true} {
			if err := check(data, unambiguousOnly); err != nil {
				t.Fatalf("the fast path accepts %q as a free-form value, the walk (unambiguousOnly %v) refuses it: %v", data, unambiguousOnly, err)
			}
		}
	}
	typ := reflect.TypeFor[*target]()
	if !accepts(data, typ) {
		return false
	}
	slow := check(data, false) // the walk itself (Check takes the fast path)
	if slow == nil {
		slow = checkFieldNames(data, typ)
	}
	if slow != nil {
		t.Fatalf("the fast path accepts %q, the walk refuses it: %v", data, slow)
	}
	return true
}

func FuzzFastPath(f *testing.F) {
	for _, doc := range fastCorpus {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) { fastAgrees(t, data) })
}

func BenchmarkDecodeSubmit(b *testing.B) {
	body := []byte(`{"tool":"payments.send","args":{"amount":250,"to":"acme","memo":"invoice 42"},"conversation_id":"bench","reason":"pay the invoice"}`)
	type submit struct {
		Tool           string         `json:"tool"`
		Args           map[string]any `json:"args"`
		ConversationID string         `json:"conversation_id"`
		Reason         string         `json:"reason"`
	}
	b.ReportAllocs()
	for b.Loop() {
		var v submit
		if err := Decode(body, &v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeManyKeys: a submit whose args hold 5,000 keys, past the
// fast path: the slow path's cost per key.
func BenchmarkDecodeManyKeys(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"tool":"x.y","args":{`)
	for i := range 5000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"k%d":"v%d"`, i, i)
	}
	sb.WriteString(`}}`)
	body := []byte(sb.String())
	type submit struct {
		Tool string         `json:"tool"`
		Args map[string]any `json:"args"`
	}
	b.ReportAllocs()
	for b.Loop() {
		var v submit
		if err := Decode(body, &v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckUnambiguous: an MCP tool call's answer as the relays read
// every upstream message (mcp.ReadMessages).
func BenchmarkCheckUnambiguous(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"Echo: hello through the proxy"}],"isError":false}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckUnambiguous(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeNamesOneUnknownFieldAlways: with several unknown fields the
// error names the same one every time (the first by key), not one picked
// by map order.
func TestDecodeNamesOneUnknownFieldAlways(t *testing.T) {
	t.Parallel()
	var v struct {
		Name string `json:"name"`
	}
	for range 50 {
		err := Decode([]byte(`{"reason":"x","name":"n","admin":true,"zeta":{"q":1}}`), &v)
		require.Error(t, err)
		assert.Equal(t, `unknown field "admin"`, err.Error())
	}
}
