package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func canon(t *testing.T, in string) string {
	t.Helper()
	out, err := AppendCanonicalJSON(nil, []byte(in))
	require.NoError(t, err, in)
	return string(out)
}

func TestCanonicalJSON(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"b": 1, "a": [true, false, null], "aa": {}}`: `{"a":[true,false,null],"b":1,"aa":{}}`,
		" [ ] ":                              `[]`,
		`{"é": 1, "z": 2, "Z": 3, "ab": 4}`:  `{"Z":3,"z":2,"ab":4,"é":1}`,
		`"\u00e9\/\ud83d\ude00"`:             `"é/😀"`,
		"\"tab\\tnl\\nq\\\"bs\\\\\"":         `"tab\tnl\nq\"bs\\"`,
		`"\u0001\u001f\u2028<>&"`:            "\"\\u0001\\u001f\u2028<>&\"",
		`1e2`:                                `100`,
		`100.0`:                              `100`,
		`-0`:                                 `0`,
		`-0.000e5`:                           `0`,
		`1.50`:                               `1.5`,
		`1E-3`:                               `0.001`,
		`-12.340e1`:                          `-123.4`,
		`0.1e1`:                              `1`,
		`10e-1`:                              `1`,
		`123456789012345678901234567890.000`: `123456789012345678901234567890`,
		`5e-8`:                               `0.00000005`,
		`{"n": [0, 7, 1e21]}`:                `{"n":[0,7,1000000000000000000000]}`,
	} {
		assert.Equal(t, want, canon(t, in), in)
	}
	for _, bad := range []string{``, `{`, `{"a":1,"a":2}`, `[1,]`, `01`, `1.`, `1e`, `-`, `"abc`, `{"a" 1}`, `[1] 2`, `tru`, `"\x"`, `"\ud800"`} {
		_, err := AppendCanonicalJSON(nil, []byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}

// TestCanonicalJSONIsSpellingIndependent: compact and indented encodings of
// random documents, with keys in any order, share one canonical form, and
// that form decodes to the same value.
func TestCanonicalJSONIsSpellingIndependent(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		v := randomValue(rng, 0)
		compact, err := json.Marshal(v)
		require.NoError(t, err)
		var indented bytes.Buffer
		require.NoError(t, json.Indent(&indented, compact, "", "   "))
		c1 := canon(t, string(compact))
		assert.Equal(t, c1, canon(t, indented.String()))
		assert.Equal(t, c1, canon(t, c1), "canonical is a fixed point")
		var back any
		require.NoError(t, json.Unmarshal([]byte(c1), &back))
		var orig any
		require.NoError(t, json.Unmarshal(compact, &orig))
		assert.True(t, reflect.DeepEqual(orig, back), "%s vs %s", compact, c1)
	}
}

func randomValue(rng *rand.Rand, depth int) any {
	switch k := rng.IntN(8); {
	case depth < 3 && k == 0:
		m := map[string]any{}
		for range rng.IntN(5) {
			m[randomString(rng)] = randomValue(rng, depth+1)
		}
		return m
	case depth < 3 && k == 1:
		s := []any{}
		for range rng.IntN(4) {
			s = append(s, randomValue(rng, depth+1))
		}
		return s
	case k == 2:
		return rng.IntN(3) == 0
	case k == 3:
		return nil
	case k == 4:
		return float64(rng.IntN(2000000)-1000000) / 1000
	case k == 5:
		return rng.NormFloat64() * 1e6
	}
	return randomString(rng)
}

func randomString(rng *rand.Rand) string {
	alphabet := []rune("abcAB\"\\/\n\t\x01 é😀<>&\u2028")
	var b strings.Builder
	for range rng.IntN(8) {
		b.WriteRune(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

func sampleRecord() Record {
	return Record{ID: 42, At: time.Date(2026, 1, 2, 15, 4, 5, 120000000, time.FixedZone("CET", 3600)),
		Kind: "action.submitted", Actor: "agent:billing-bot", AgentID: "billing-bot", AgentInstance: "pod-7",
		ConversationID: "conv-1", StepID: "step-3", CorrelationID: "corr-42",
		ActionID: "0194F3A2-7C1E-7B44-9A51-5D1C2E3F4A5B", Tool: "payments.send",
		Args: json.RawMessage(`{"to": "acme", "amount": 250.00}`), Risk: json.RawMessage(`{"level":"high"}`),
		Decision: json.RawMessage(`{"effect":"approve","rule_id":"big-spend","policy_version":3}`)}
}

// TestCanonicalEncoding pins the encoding: changing it would break every
// chain already sealed, so a change must be a new version, not an edit.
func TestCanonicalEncoding(t *testing.T) {
	t.Parallel()
	r := sampleRecord()
	enc, err := AppendCanonical(nil, &r)
	require.NoError(t, err)
	var fields []string
	for b := enc; len(b) > 0; {
		require.GreaterOrEqual(t, len(b), 4)
		n := int(b[0])<<24 | int(b[1])<<16 | int(b[2])<<8 | int(b[3])
		fields = append(fields, string(b[4:4+n]))
		b = b[4+n:]
	}
	assert.Equal(t, []string{"airlock.audit.event.v1", "42", "2026-01-02T14:04:05.120000Z", "action.submitted",
		"agent:billing-bot", "billing-bot", "pod-7", "conv-1", "step-3", "corr-42",
		"0194f3a2-7c1e-7b44-9a51-5d1c2e3f4a5b", "payments.send",
		`{"to":"acme","amount":250}`, `{"level":"high"}`, `{"effect":"approve","rule_id":"big-spend","policy_version":3}`, ""}, fields)

	h, err := new(Hasher).Hash(Genesis, &r)
	require.NoError(t, err)
	sum := sha256.Sum256(append(append([]byte{}, Genesis...), enc...))
	assert.Equal(t, sum[:], h)
	assert.Equal(t, h, ChainHash(Genesis, enc))
	assert.Equal(t, "9a802d9de98b2ab4e31b4a0e7637baea9288a998bc10981baf5a0da7e925e632", hex.EncodeToString(h))

	// Every column counts, NULL differs from empty JSON.
	for name, change := range map[string]func(*Record){
		"id": func(r *Record) { r.ID++ }, "at": func(r *Record) { r.At = r.At.Add(time.Microsecond) },
		"kind": func(r *Record) { r.Kind += "x" }, "actor": func(r *Record) { r.Actor = "alice" },
		"agent_instance": func(r *Record) { r.AgentInstance = "" }, "step": func(r *Record) { r.StepID = "x" },
		"action_id": func(r *Record) { r.ActionID = "" }, "tool": func(r *Record) { r.Tool = "payments.refund" },
		"args":  func(r *Record) { r.Args = json.RawMessage(`{"to":"acme","amount":251}`) },
		"data":  func(r *Record) { r.Data = json.RawMessage(`null`) },
		"shift": func(r *Record) { r.Actor, r.AgentID = r.Actor+r.AgentID, "" },
	} {
		r2 := sampleRecord()
		change(&r2)
		h2, err := new(Hasher).Hash(Genesis, &r2)
		require.NoError(t, err)
		assert.NotEqual(t, h, h2, name)
	}
}

// TestSealFormatV2 pins format 2, computed independently (in Python, from
// the description in canonical.go): the content digest covers every column
// but the key, the link covers the key and the digest, and Hash recomputes
// the digest from the content, never trusting a stored one.
func TestSealFormatV2(t *testing.T) {
	t.Parallel()
	r := sampleRecord()
	r.SealFormat = FormatV2
	var h Hasher
	d, err := h.Digest(&r)
	require.NoError(t, err)
	assert.Equal(t, "0f937d4570dfd2cca5367ddd6091ccdf37cd6ad2750aaf26b59ccab5928f4da7", hex.EncodeToString(d))
	sum, err := h.Hash(Genesis, &r)
	require.NoError(t, err)
	assert.Equal(t, "d897acc1df83ee9efb155d06f0c12b0f2835b5f0b01ed55ab2d96509740fe5c3", hex.EncodeToString(sum))
	assert.Equal(t, d, ContentDigest(&r))

	// The sealer's path: from the stored digest, the same hash.
	r.Digest = d
	sealed, err := h.Seal(Genesis, &r)
	require.NoError(t, err)
	assert.Equal(t, sum, sealed)
	// A stored digest that is not the content's: the sealer seals what it
	// was given, and verification's Hash, from the content, disagrees.
	r.Digest = bytes.Repeat([]byte{1}, HashSize)
	wrong, err := h.Seal(Genesis, &r)
	require.NoError(t, err)
	assert.NotEqual(t, sum, wrong)
	again, err := h.Hash(Genesis, &r)
	require.NoError(t, err)
	assert.Equal(t, sum, again, "Hash ignores the stored digest")

	// The format is inside what is hashed: the same event read as format 1
	// hashes otherwise, and an unknown format is an error.
	r.SealFormat = FormatV1
	v1, err := h.Hash(Genesis, &r)
	require.NoError(t, err)
	assert.NotEqual(t, sum, v1)
	r.SealFormat = 3
	_, err = h.Hash(Genesis, &r)
	require.Error(t, err)

	// Every content column counts, and so does the key.
	for name, change := range map[string]func(*Record){
		"id": func(r *Record) { r.ID++ }, "at": func(r *Record) { r.At = r.At.Add(time.Microsecond) },
		"kind": func(r *Record) { r.Kind += "x" }, "actor": func(r *Record) { r.Actor = "alice" },
		"correlation_id": func(r *Record) { r.CorrelationID = "" }, "action_id": func(r *Record) { r.ActionID = "" },
		"args": func(r *Record) { r.Args = json.RawMessage(`{"to":"acme","amount":251}`) },
		"data": func(r *Record) { r.Data = json.RawMessage(`null`) },
	} {
		r2 := sampleRecord()
		r2.SealFormat = FormatV2
		change(&r2)
		h2, err := h.Hash(Genesis, &r2)
		require.NoError(t, err)
		assert.NotEqual(t, sum, h2, name)
	}

	// A spelling the canonical form refuses (a repeated key) has no digest:
	// the writer stores none and the sealer reads what the database kept.
	r3 := sampleRecord()
	r3.Args = json.RawMessage(`{"to":"a","to":"b"}`)
	assert.Nil(t, ContentDigest(&r3))
}

func TestCheckpointSignature(t *testing.T) {
	t.Parallel()
	key, err := NewSigningKey(bytes.Repeat([]byte{7}, 32))
	require.NoError(t, err)
	hash := sha256.Sum256([]byte("head"))
	cp := key.Sign(12, hash[:], time.Date(2026, 3, 4, 5, 6, 7, 891234567, time.UTC))
	require.NoError(t, cp.Verify())
	assert.Equal(t, "airlock.audit.checkpoint.v1\n12\n"+hex.EncodeToString(hash[:])+"\n2026-03-04T05:06:07.891234Z\n", string(cp.Message()))

	line, err := json.Marshal(cp)
	require.NoError(t, err)
	for _, form := range []string{string(line), base64.StdEncoding.EncodeToString(line), base64.RawURLEncoding.EncodeToString(line)} {
		got, err := ParseCheckpoint(form)
		require.NoError(t, err)
		assert.Equal(t, cp.Seq, got.Seq)
		assert.True(t, got.At.Equal(cp.At))
	}
	for name, change := range map[string]func(*Checkpoint){
		"seq": func(c *Checkpoint) { c.Seq++ }, "hash": func(c *Checkpoint) { c.Hash = make([]byte, 32) },
		"at": func(c *Checkpoint) { c.At = c.At.Add(time.Second) },
		"key": func(c *Checkpoint) {
			other, _ := NewSigningKey(bytes.Repeat([]byte{8}, 32))
			c.PublicKey = other.Public()
		},
	} {
		c := cp
		change(&c)
		assert.Error(t, c.Verify(), name)
		b, _ := json.Marshal(c)
		_, err := ParseCheckpoint(string(b))
		assert.Error(t, err, name)
	}
	_, err = ParseCheckpoint("not a checkpoint")
	assert.Error(t, err)
	_, err = NewSigningKey([]byte("short"))
	assert.Error(t, err)
	assert.Equal(t, fmt.Sprint(len(key.Public())), "32")
}

func BenchmarkHash(b *testing.B) {
	r := sampleRecord()
	var h Hasher
	for b.Loop() {
		if _, err := h.Hash(Genesis, &r); err != nil {
			b.Fatal(err)
		}
	}
}

func TestAppendTimeMatchesTimeFormat(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		tm := time.Unix(rng.Int64N(1<<36)-1<<35, rng.Int64N(1e9)).In(time.FixedZone("x", rng.IntN(50000)-25000))
		assert.Equal(t, tm.UTC().Format("2006-01-02T15:04:05.000000Z07:00"), string(appendTime(nil, tm)))
	}
}
