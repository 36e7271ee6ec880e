package audit

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonbRecord is sampleRecord with its JSON as jsonb prints what the
// writers store: keys in the canonical order, ", " and ": " between
// tokens, strings escaped as the canonical form escapes them.
func jsonbRecord() Record {
	r := sampleRecord()
	r.Args = json.RawMessage(`{"to": "acme", "memo": "a, b: \"c\", d\\: e\n\u0001 ü", "lines": [1, [2, {}], {"x": null}], "amount": 250}`)
	r.Risk = json.RawMessage(`{"level": "high", "score": 70, "reasons": ["over the cap"], "injection": false}`)
	r.Decision = json.RawMessage(`{"effect": "approve", "rule_id": "big-spend", "policy_version": 3}`)
	r.Data = json.RawMessage(`{"note": ",: 1.50 [2.0, 3.00]"}`)
	return r
}

// sealed returns r sealed after Genesis in format, its hash computed in
// full.
func sealed(t *testing.T, r Record, format int) Record {
	t.Helper()
	r.SealFormat, r.PrevHash, r.Hash = format, Genesis, nil
	var h Hasher
	sum, err := h.Hash(Genesis, &r)
	require.NoError(t, err)
	r.Hash = sum
	return r
}

// full is Hash without its quick path.
func full(t *testing.T, r *Record) []byte {
	t.Helper()
	c := *r
	c.Hash = nil // quickHash needs the sealed hash to compare with
	var h Hasher
	sum, err := h.Hash(c.PrevHash, &c)
	if err != nil {
		return nil
	}
	return sum
}

func TestHashQuickPath(t *testing.T) {
	t.Parallel()
	for _, format := range []int{FormatV1, FormatV2} {
		r := sealed(t, jsonbRecord(), format)
		var h Hasher
		assert.True(t, h.QuickMatches(Genesis, &r), "format %d: jsonb's spelling of canonical values takes the quick path", format)
		sum, err := h.Hash(Genesis, &r)
		require.NoError(t, err)
		assert.Equal(t, []byte(r.Hash), sum)

		// The canonical text itself (as a writer stores it in a json
		// column) takes it too.
		c := r
		c.Args, _ = AppendCanonicalJSON(nil, r.Args)
		assert.True(t, h.QuickMatches(Genesis, &c), "format %d: canonical text", format)

		// jsonb keeps a number's trailing zeros (numeric's scale), which the
		// canonical form drops: so does the quick path.
		for _, args := range []string{
			`{"to": "acme", "memo": "a, b: \"c\", d\\: e\n\u0001 ü", "lines": [1, [2, {}], {"x": null}], "amount": 250.0}`,
			`{"to": "acme", "memo": "a, b: \"c\", d\\: e\n\u0001 ü", "lines": [1.00, [2.0, {}], {"x": null}], "amount": 250.000}`,
		} {
			c := r
			c.Args = json.RawMessage(args)
			assert.True(t, h.QuickMatches(Genesis, &c), "format %d: %s", format, args)
		}

		// Other spellings of the same values miss the quick path, and the
		// full computation finds them unchanged (same); changed values,
		// inside strings too, pass neither.
		for _, c := range []struct {
			args string
			same bool
		}{
			{`{"to": "acme", "memo": "a, b: \"c\", d\\: e\n\u0001 ü", "lines": [1, [2, {}], {"x": null}], "amount": 25.00e1}`, true},
			{`{"to": "acme", "memo": "a, b: \"c\", d\\: e\n\u0001 \u00fc", "lines": [1, [2, {}], {"x": null}], "amount": 250}`, true},
			{`{"memo": "a, b: \"c\", d\\: e\n\u0001 ü", "to": "acme", "lines": [1, [2, {}], {"x": null}], "amount": 2.5e2}`, true},
			{"{\"to\":  \"acme\", \"memo\": \"a, b: \\\"c\\\", d\\\\: e\\n\\u0001 ü\",\n\"lines\": [1, [2, {}], {\"x\": null}], \"amount\": 250}", true},
			{`{"to": "acme", "memo": "a, b: \"c\", d\\: e\n\u0001 ü", "lines": [1, [2, {}], {"x": null}], "amount": 251}`, false},
			{`{"to": "acme", "memo": "a, b: \"c\", d\\: e\n\u0001 ü", "lines": [1, [2, {}], {"x": null}], "amount": 250.01}`, false},
			{`{"to": "acme", "memo": "a, b: \"c\", d\\: e\n\u0001 ü", "lines": [1, [2, {}], {"x": null}], "amount": 2500}`, false},
			{`{"to": "acme", "memo": "a, b: \"c\", d\\: e\n\u0001 ü 1.0", "lines": [1, [2, {}], {"x": null}], "amount": 250}`, false},
			{`{"to": "acme", "memo": "a,b: \"c\", d\\: e\n\u0001 ü", "lines": [1, [2, {}], {"x": null}], "amount": 250}`, false},
			{`{"to": "acme", "memo": "a, b:\"c\", d\\: e\n\u0001 ü", "lines": [1, [2, {}], {"x": null}], "amount": 250}`, false},
			{`{"to": "acme", "memo": "a, b: \"c\", d\\:e\n\u0001 ü", "lines": [1, [2, {}], {"x": null}], "amount": 250}`, false},
		} {
			o := r
			o.Args = json.RawMessage(c.args)
			assert.False(t, h.QuickMatches(Genesis, &o), "format %d: %s", format, c.args)
			sum, err := h.Hash(Genesis, &o)
			require.NoError(t, err)
			assert.Equal(t, c.same, bytes.Equal(r.Hash, sum), "format %d: %s", format, c.args)
		}
	}
}

// TestHashQuickPathNeverPassesWhatTheFullOneRefuses edits stored texts at
// random (a byte dropped, doubled or replaced, a space added or taken
// away): whenever the quick path takes an edited event for the sealed one,
// the full computation must too.
func TestHashQuickPathNeverPassesWhatTheFullOneRefuses(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(14, 32))
	alphabet := []byte(` ,:"\{}[]0123456789.-eEabnrtfu`)
	quick, fullPasses := 0, 0
	for _, format := range []int{FormatV1, FormatV2} {
		r := sealed(t, jsonbRecord(), format)
		for range 20000 {
			o := r
			b := []byte(o.Args)
			for range 1 + rng.IntN(3) {
				b = randomEdit(rng, b, alphabet, 5)
			}
			o.Args = b
			var h Hasher
			if h.QuickMatches(Genesis, &o) {
				quick++
				require.Equal(t, []byte(r.Hash), full(t, &o), "format %d: the quick path passed %q", format, b)
			}
			if string(full(t, &o)) == string(r.Hash) {
				fullPasses++
			}
		}
	}
	// The edits must reach both outcomes for the test to say anything.
	assert.Positive(t, quick, "no edit kept the quick path")
	assert.Greater(t, fullPasses, quick, "no edit took the full path to a pass")
}

// TestTrimmedKeepsValidityAndValue: what the quick path drops of a stored
// text (appendTrimmed) must keep the text exactly as valid as it was, and
// its value: the canonical form of the text and of what is left are the
// same. Checked on texts made to fool the trimming of a number's fraction
// zeros and on random edits of a text full of numbers.
func TestTrimmedKeepsValidityAndValue(t *testing.T) {
	t.Parallel()
	base := `{"a": [1.50, -2.0, 0.00, 3.000e1, 10.10, 100], "b": {"c": 7.00, "d": "x 1.0, 2.50"}, "e": 1.0}`
	texts := []string{base, `1.0.0`, `[.0]`, `[-.0]`, `[1.]`, `[01.0]`, `1.0x`, `[1.0 2.0]`, `{"a" 1.0}`, `-0.0`, `[1.0e]`,
		`[1.00,2.50]`, `{"a":1.0}`, `"1.0"`, `[1.0]]`, `[0.0.0]`, `[1.0-1]`, `[--1.0]`, `[1.0"]`}
	rng := rand.New(rand.NewPCG(7, 11))
	alphabet := []byte(` ,:"[]{}0123456789.-eE`)
	for range 20000 {
		b := []byte(base)
		for range 1 + rng.IntN(3) {
			b = randomEdit(rng, b, alphabet, 3)
		}
		texts = append(texts, string(b))
	}
	trimmedAny := 0
	for _, text := range texts {
		trimmed, err := appendTrimmed(nil, []byte(text))
		require.NoError(t, err)
		if string(trimmed) != text {
			trimmedAny++
		}
		require.Equal(t, json.Valid([]byte(text)), json.Valid(trimmed), "%q -> %q", text, trimmed)
		want, wantErr := AppendCanonicalJSON(nil, []byte(text))
		got, gotErr := AppendCanonicalJSON(nil, trimmed)
		require.Equal(t, wantErr == nil, gotErr == nil, "%q -> %q", text, trimmed)
		require.Equal(t, string(want), string(got), "%q -> %q", text, trimmed)
	}
	assert.Greater(t, trimmedAny, len(texts)/2, "most texts had something to trim")
}

// randomEdit returns b with one random edit of the first kinds of these:
// a byte dropped, a byte doubled, a byte replaced by one of alphabet, a
// space added, the next space taken away.
func randomEdit(rng *rand.Rand, b, alphabet []byte, kinds int) []byte {
	i := rng.IntN(len(b))
	switch rng.IntN(kinds) {
	case 0:
		b = append(b[:i:i], b[i+1:]...)
	case 1:
		b = append(b[:i+1:i+1], b[i:]...)
	case 2:
		b = append(b[:i:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[i+1:]...)...)
	case 3:
		b = append(b[:i:i], append([]byte{' '}, b[i:]...)...)
	case 4:
		if j := strings.IndexByte(string(b[i:]), ' '); j >= 0 {
			b = append(b[:i+j:i+j], b[i+j+1:]...)
		}
	}
	return b
}
