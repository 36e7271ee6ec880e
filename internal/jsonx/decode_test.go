package jsonx

import (
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
	assert.Equal(t, 1.5, v.Args["n"], "numbers in free-form maps decode as float64")
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
