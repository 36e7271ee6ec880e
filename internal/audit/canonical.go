package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// Record is one audit_events row as stored: the JSON columns as their JSON
// text (nil for SQL NULL), with its seal from audit_seals (zero until the
// sealer reaches the row). It is what the chain hashes, what verification reads and what the
// NDJSON export writes, one Record per line.
type Record struct {
	ID             int64           `json:"id"`
	At             time.Time       `json:"at"`
	Kind           string          `json:"kind"`
	Actor          string          `json:"actor"`
	AgentID        string          `json:"agent_id,omitempty"`
	AgentInstance  string          `json:"agent_instance,omitempty"`
	ConversationID string          `json:"conversation_id,omitempty"`
	StepID         string          `json:"step_id,omitempty"`
	CorrelationID  string          `json:"correlation_id,omitempty"`
	ActionID       string          `json:"action_id,omitempty"`
	Tool           string          `json:"tool,omitempty"`
	Args           json.RawMessage `json:"args,omitempty"`
	Risk           json.RawMessage `json:"risk,omitempty"`
	Decision       json.RawMessage `json:"decision,omitempty"`
	Data           json.RawMessage `json:"data,omitempty"`
	Seq            int64           `json:"seq,omitempty"`
	PrevHash       HexBytes        `json:"prev_hash,omitempty"`
	Hash           HexBytes        `json:"hash,omitempty"`
	// SealFormat is how Hash was computed (FormatV1 or FormatV2; omitted,
	// 0, is FormatV1: the seals made before there was a second format).
	SealFormat int `json:"seal_format,omitempty"`
	// Digest is the content digest its writer stored with the event
	// (audit_events.digest; nil for none). Only the sealer uses it, to seal
	// an event without reading its content back; verification always
	// recomputes it from the content. Never part of an export.
	Digest []byte `json:"-"`
	// Missing marks a seal read without its event: the record holds the
	// seal (and the event's key) only. Never part of an export.
	Missing bool `json:"-"`
}

// Event returns the record as an Event (its JSON objects decoded).
func (r *Record) Event() (Event, error) {
	ev := Event{ID: r.ID, At: r.At, Kind: Kind(r.Kind), Actor: r.Actor, AgentID: r.AgentID,
		AgentInstance: r.AgentInstance, ConversationID: r.ConversationID, StepID: r.StepID,
		CorrelationID: r.CorrelationID, ActionID: r.ActionID, Tool: r.Tool, Risk: r.Risk, Decision: r.Decision}
	for _, f := range [...]struct {
		raw json.RawMessage
		dst *map[string]any
	}{{r.Args, &ev.Args}, {r.Data, &ev.Data}} {
		if len(f.raw) > 0 {
			if err := UnmarshalArgs(f.raw, f.dst); err != nil {
				return ev, fmt.Errorf("audit: event %d: %w", r.ID, err)
			}
		}
	}
	return ev, nil
}

// UnmarshalArgs decodes stored JSON arguments (or event data) into dst,
// keeping numbers exactly as stored (json.Number): decoding them as float64
// would show and compare 10000000000000001 as 1e16.
func UnmarshalArgs(raw []byte, dst *map[string]any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		return fmt.Errorf("decoding arguments: %w", err)
	}
	return nil
}

// HexBytes is a byte string written as lowercase hex in JSON.
type HexBytes []byte

// MarshalText implements encoding.TextMarshaler.
func (h HexBytes) MarshalText() ([]byte, error) { return hex.AppendEncode(nil, h), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (h *HexBytes) UnmarshalText(b []byte) error {
	out, err := hex.AppendDecode(nil, b)
	if err != nil {
		return fmt.Errorf("audit: invalid hex: %w", err)
	}
	*h = out
	return nil
}

func (h HexBytes) String() string { return hex.EncodeToString(h) }

// HashSize is the length of a chain hash (SHA-256).
const HashSize = sha256.Size

// Genesis is the prev_hash of the first event in the chain (seq 1).
var Genesis = make([]byte, HashSize)

// canonicalMagic opens every canonical encoding, so that a hash of the
// chain can never be mistaken for a hash of something else, and names the
// encoding's version.
const canonicalMagic = "airlock.audit.event.v1"

// AppendCanonical appends the canonical encoding of r to dst: the exact
// bytes the chain hashes. It covers every column but the seal (seq,
// prev_hash, hash) and is defined so that anyone can recompute it from an
// export, in any language:
//
// The encoding is a sequence of 16 fields, each a 4-byte big-endian length
// followed by that many bytes, in this order:
//
//	"airlock.audit.event.v1"
//	id               decimal, e.g. "42"
//	at               UTC, always 6 fractional digits: "2026-01-02T15:04:05.000000Z"
//	kind, actor, agent_id, agent_instance, conversation_id, step_id,
//	correlation_id   UTF-8 as stored ("" stays empty)
//	action_id        lowercase 8-4-4-4-12 UUID, or empty for NULL
//	tool             UTF-8 as stored
//	args, risk, decision, data
//	                 canonical JSON (see AppendCanonicalJSON), or empty for NULL
//
// The hash of a sealed event is SHA-256(prev_hash || canonical encoding),
// see ChainHash.
func AppendCanonical(dst []byte, r *Record) ([]byte, error) {
	return appendCanonical(dst, r, new(jsonCanon).canonical)
}

// appendCanonical appends r's FormatV1 encoding, its JSON texts put in by
// appendJSON.
func appendCanonical(dst []byte, r *Record, appendJSON jsonAppender) ([]byte, error) {
	dst = appendField(dst, canonicalMagic)
	dst = appendKey(dst, r.ID, r.At)
	return appendContent(dst, r, appendJSON)
}

// jsonAppender appends the form of the JSON text src that the encoding
// holds: its canonical form (jsonCanon.canonical), or, on verification's
// quick path, the text itself less jsonb's separator spaces (appendTrimmed).
type jsonAppender func(dst, src []byte) ([]byte, error)

// appendKey appends the fields of the event's key: id in decimal and at in
// UTC with 6 fractional digits.
func appendKey(dst []byte, id int64, at time.Time) []byte {
	start := len(dst)
	dst = strconv.AppendInt(append(dst, 0, 0, 0, 0), id, 10)
	dst = endField(dst, start)
	start = len(dst)
	dst = appendTime(append(dst, 0, 0, 0, 0), at)
	return endField(dst, start)
}

// appendContent appends the fields after the key: the text columns,
// action_id, tool and the JSON columns.
func appendContent(dst []byte, r *Record, appendJSON jsonAppender) ([]byte, error) {
	var start int
	for _, s := range [...]string{r.Kind, r.Actor, r.AgentID, r.AgentInstance, r.ConversationID, r.StepID, r.CorrelationID} {
		dst = appendField(dst, s)
	}
	start = len(dst)
	dst = append(dst, 0, 0, 0, 0)
	for i := 0; i < len(r.ActionID); i++ {
		c := r.ActionID[i]
		if 'A' <= c && c <= 'F' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	dst = endField(dst, start)
	dst = appendField(dst, r.Tool)
	for _, j := range [...]json.RawMessage{r.Args, r.Risk, r.Decision, r.Data} {
		start = len(dst)
		dst = append(dst, 0, 0, 0, 0)
		if j != nil {
			var err error
			if dst, err = appendJSON(dst, j); err != nil {
				return dst, fmt.Errorf("audit: event %d: %w", r.ID, err)
			}
		}
		dst = endField(dst, start)
	}
	return dst, nil
}

// appendTime appends t in UTC as 2006-01-02T15:04:05.000000Z (what
// t.UTC().AppendFormat does with that layout, for years 0–9999, faster).
func appendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(dst, "2006-01-02T15:04:05.000000Z07:00")
	}
	hour, minute, sec := t.Clock()
	digits := func(dst []byte, v, n int) []byte {
		var b [6]byte
		for i := n - 1; i >= 0; i-- {
			b[i] = byte('0' + v%10)
			v /= 10
		}
		return append(dst, b[:n]...)
	}
	dst = digits(dst, year, 4)
	dst = digits(append(dst, '-'), int(month), 2)
	dst = digits(append(dst, '-'), day, 2)
	dst = digits(append(dst, 'T'), hour, 2)
	dst = digits(append(dst, ':'), minute, 2)
	dst = digits(append(dst, ':'), sec, 2)
	dst = digits(append(dst, '.'), t.Nanosecond()/1000, 6)
	return append(dst, 'Z')
}

func appendField(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

// endField writes the length of the field that starts (with its 4-byte
// length placeholder) at start.
func endField(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// ChainHash returns SHA-256(prev || canonical).
func ChainHash(prev, canonical []byte) []byte {
	h := sha256.New()
	h.Write(prev)
	h.Write(canonical)
	return h.Sum(make([]byte, 0, HashSize))
}

// The seal formats: how a seal's hash covers its event.
const (
	// FormatV1: hash = SHA-256(prev_hash || canonical encoding), see
	// AppendCanonical. The sealer reads every event's content to seal it.
	FormatV1 = 1
	// FormatV2: hash = SHA-256(prev_hash || link encoding), the link
	// encoding being 4 fields as in AppendCanonical:
	//
	//	"airlock.audit.event.v2"
	//	id, at           as in FormatV1
	//	digest           32 bytes: SHA-256 of the content encoding
	//
	// and the content encoding the fields of FormatV1 after id and at, behind
	// their own version tag: "airlock.audit.content.v2", kind, actor,
	// agent_id, agent_instance, conversation_id, step_id, correlation_id,
	// action_id, tool, args, risk, decision, data (14 fields). A writer,
	// which knows an event's content but not yet its id and time, stores the
	// digest with it, so that the sealer reads 3 columns of each event
	// instead of 15 and canonicalizes no JSON; verification recomputes the
	// digest from the content, so a wrong stored digest is a hash mismatch.
	FormatV2 = 2
)

const (
	linkMagic    = "airlock.audit.event.v2"
	contentMagic = "airlock.audit.content.v2"
)

// Hasher computes events' chain hashes, reusing its buffer. The zero value
// is ready to use; a Hasher is not safe for concurrent use.
type Hasher struct {
	buf   []byte
	canon jsonCanon
}

// Hash returns r's chain hash after prev, in r's seal format, computed from
// r's content (never from its stored Digest): what verification checks.
//
// It first tries the quick path (quickHash): the hash of r's JSON texts
// as stored, with no canonical form worked out. When that is r's sealed
// Hash it is the answer; otherwise the hash is computed in full.
func (h *Hasher) Hash(prev []byte, r *Record) ([]byte, error) {
	if sum, ok := h.quickHash(prev, r); ok {
		return sum, nil
	}
	return h.hash(prev, r, h.canon.canonical)
}

// sealed reports whether r's Hash is its chain hash after its PrevHash:
// whether r is the event that was sealed.
func (h *Hasher) sealed(r *Record) bool {
	sum, err := h.Hash(r.PrevHash, r)
	return err == nil && bytes.Equal(sum, r.Hash)
}

// hash returns r's chain hash after prev in r's seal format, its JSON
// texts put in the encoding by appendJSON.
func (h *Hasher) hash(prev []byte, r *Record, appendJSON jsonAppender) ([]byte, error) {
	switch r.SealFormat {
	case 0, FormatV1:
		var err error
		h.buf, err = appendCanonical(append(h.buf[:0], prev...), r, appendJSON)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(h.buf)
		return sum[:], nil
	case FormatV2:
		d, err := h.digest(r, appendJSON)
		if err != nil {
			return nil, err
		}
		return h.Link(prev, r.ID, r.At, d), nil
	}
	return nil, fmt.Errorf("audit: event %d: unknown seal format %d", r.ID, r.SealFormat)
}

// quickHash is Hash without canonical JSON: r's encoding with each JSON
// text as stored, less the single space jsonb prints after every ',' and
// ':' between tokens (appendTrimmed), in r's seal format. It reports
// whether the sum is r's sealed Hash, and only then is it Hash's answer:
// the texts jsonb prints of the values the writers store are their
// canonical forms once those spaces are dropped (jsonb orders keys as the
// canonical form does and escapes strings alike), so this is the hash of
// almost every event, without parsing, sorting or respelling any JSON.
//
// It cannot pass a changed event. Dropping whitespace between tokens does
// not change a JSON text's value, so a stored text that, without those
// spaces, is the canonical text that was sealed holds the value that was
// sealed; anything else (a changed value, another spelling of the same one,
// a text that is not JSON) gives another sum, and Hash computes the hash in
// full, which says which of these it is.
func (h *Hasher) quickHash(prev []byte, r *Record) ([]byte, bool) {
	if len(r.Hash) != HashSize { // nothing sealed to compare with
		return nil, false
	}
	sum, err := h.hash(prev, r, appendTrimmed)
	return sum, err == nil && bytes.Equal(sum, r.Hash)
}

// appendTrimmed appends the JSON text src to dst less what jsonb's output
// text has and the canonical form does not: every space that directly
// follows a ',' or a ':' outside a string, and the trailing zeros of a
// number's fraction (jsonb keeps numeric's scale, 1.50 and 7.00; the
// canonical form writes 1.5 and 7), with its '.' when nothing else is
// left of the fraction. A number with an exponent is left as it is (jsonb
// never prints one). Nothing else is changed or checked: each change
// keeps the value, which is all the quick path's soundness asks.
func appendTrimmed(dst, src []byte) ([]byte, error) {
	start := 0
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '"': // to the string's closing quote: the first not escaped
			for {
				j := bytes.IndexByte(src[i+1:], '"')
				if j < 0 {
					i = len(src)
					break
				}
				i += 1 + j
				k := i
				for k > 0 && src[k-1] == '\\' {
					k--
				}
				if (i-k)%2 == 0 { // an even run of backslashes escapes one another, not the quote
					break
				}
			}
		case ',', ':':
			if i+1 < len(src) && src[i+1] == ' ' {
				dst = append(dst, src[start:i+1]...)
				i++
				start = i + 1
			}
		case '.': // outside a string: a number's fraction
			if keep, end := fractionZeros(src, i); keep < end {
				dst = append(dst, src[start:keep]...)
				start = end
				i = end - 1
			}
		}
	}
	return append(dst, src[start:]...), nil
}

// fractionZeros returns the part of src to drop for the '.' at src[i]:
// [keep, end) is the trailing zeros of the fraction it starts (with the
// '.' when the fraction is all zeros), keep == end for nothing. Only a
// number as jsonb prints it qualifies: an optional '-' and digits after
// the start of the text, a ',', ':', '[' or space; one or more digits
// after the '.'; then the end of the text, a ',', ']', '}' or space. So a
// text that is not JSON stays as it is (and takes the full path).
func fractionZeros(src []byte, i int) (keep, end int) {
	digit := func(c byte) bool { return '0' <= c && c <= '9' }
	d := i
	for d > 0 && digit(src[d-1]) {
		d--
	}
	if d == i {
		return i, i
	}
	if d > 0 && src[d-1] == '-' {
		d--
	}
	if d > 0 && !strings.ContainsRune(",:[ ", rune(src[d-1])) {
		return i, i
	}
	end = i + 1
	for end < len(src) && digit(src[end]) {
		end++
	}
	if end == i+1 || end < len(src) && !strings.ContainsRune(",]} ", rune(src[end])) {
		return i, i
	}
	keep = end
	for keep > i+1 && src[keep-1] == '0' {
		keep--
	}
	if keep == i+1 {
		keep = i
	}
	return keep, end
}

// Seal returns r's FormatV2 hash after prev, from the Digest its writer
// stored when there is one (else from its content): what the sealer writes.
func (h *Hasher) Seal(prev []byte, r *Record) ([]byte, error) {
	d := r.Digest
	if len(d) != HashSize {
		var err error
		if d, err = h.Digest(r); err != nil {
			return nil, err
		}
	}
	return h.Link(prev, r.ID, r.At, d), nil
}

// Digest returns SHA-256 of r's content encoding (FormatV2).
func (h *Hasher) Digest(r *Record) ([]byte, error) { return h.digest(r, h.canon.canonical) }

// digest returns SHA-256 of r's content encoding, its JSON texts put in by
// appendJSON.
func (h *Hasher) digest(r *Record, appendJSON jsonAppender) ([]byte, error) {
	var err error
	h.buf, err = appendContent(appendField(h.buf[:0], contentMagic), r, appendJSON)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(h.buf)
	return sum[:], nil
}

// Link returns the FormatV2 hash of the event (id, at) with content digest
// d, sealed after prev.
func (h *Hasher) Link(prev []byte, id int64, at time.Time, d []byte) []byte {
	b := append(h.buf[:0], prev...)
	b = appendField(b, linkMagic)
	b = appendKey(b, id, at)
	b = binary.BigEndian.AppendUint32(b, uint32(len(d)))
	b = append(b, d...)
	h.buf = b
	sum := sha256.Sum256(b)
	return sum[:]
}

// ContentDigest returns the FormatV2 digest of r's content, or nil when it
// cannot be worked out (JSON the canonical form refuses, such as a repeated
// key): the sealer then works it out from what the database stored. For
// writers, which store it with the event.
func ContentDigest(r *Record) []byte {
	h := hashers.Get().(*Hasher)
	defer hashers.Put(h)
	d, err := h.Digest(r)
	if err != nil {
		return nil
	}
	return d
}

// QuickMatches reports whether r's sealed hash after prev is the one
// Hash's quick path computes, from r's JSON texts as stored with no
// canonical form worked out: what verifying an event the writers stored
// costs. For tests and measurements; Hash falls back to the full
// computation when it is not.
func (h *Hasher) QuickMatches(prev []byte, r *Record) bool {
	_, ok := h.quickHash(prev, r)
	return ok
}

var hashers = sync.Pool{New: func() any { return new(Hasher) }}

// maxExponent bounds the decimal exponent of a JSON number the canonical
// form writes out in full. PostgreSQL's jsonb prints every number without an
// exponent and at most ~147,000 digits long, far inside it.
const maxExponent = 1 << 20

var errJSON = errors.New("invalid JSON")

// AppendCanonicalJSON appends the canonical form of the JSON text src to
// dst. The canonical form is the same for every spelling of the same value
// (in particular jsonb's output, the text the application sent, and an
// export re-indented by a tool that keeps numbers exact):
//
//   - no whitespace between tokens;
//   - object members sorted by key: shorter keys (in UTF-8 bytes) first,
//     keys of the same length by their bytes; a key appearing twice is an
//     error. (This is the order PostgreSQL's jsonb keeps keys in, so what
//     the database prints is already in order.)
//   - strings hold their decoded text, with `"` and `\` escaped as `\"` and
//     `\\`, U+0008, U+0009, U+000A, U+000C, U+000D as `\b \t \n \f \r`,
//     the other characters below U+0020 as `\u00xx` (lowercase hex), and
//     everything else as plain UTF-8;
//   - numbers in plain decimal notation with no exponent, no leading zeros,
//     no trailing zeros after the point and no point when nothing follows it,
//     "0" for zero (so 1e2, 100.0 and 100 are all "100"; -0 is "0");
//   - true, false and null as themselves.
func AppendCanonicalJSON(dst, src []byte) ([]byte, error) {
	return new(jsonCanon).canonical(dst, src)
}

// jsonCanon canonicalizes JSON text. It keeps the scratch space of objects
// (one per nesting level) between calls.
type jsonCanon struct {
	src     []byte
	pos     int
	scratch []objectScratch
}

type objectScratch struct {
	buf     []byte
	members []member
}

func (p *jsonCanon) canonical(dst, src []byte) ([]byte, error) {
	p.src, p.pos = src, 0
	defer func() { p.src = nil }()
	p.ws()
	dst, err := p.value(dst, 0)
	if err != nil {
		return dst, err
	}
	p.ws()
	if p.pos != len(p.src) {
		return dst, fmt.Errorf("%w: data after the value at offset %d", errJSON, p.pos)
	}
	return dst, nil
}

const maxJSONDepth = 10000

func (p *jsonCanon) ws() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonCanon) fail(what string) error {
	return fmt.Errorf("%w: %s at offset %d", errJSON, what, p.pos)
}

func (p *jsonCanon) value(dst []byte, depth int) ([]byte, error) {
	if p.pos >= len(p.src) {
		return dst, p.fail("unexpected end")
	}
	if depth > maxJSONDepth {
		return dst, p.fail("nesting too deep")
	}
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object(dst, depth)
	case c == '[':
		p.pos++
		dst = append(dst, '[')
		p.ws()
		if p.pos < len(p.src) && p.src[p.pos] == ']' {
			p.pos++
			return append(dst, ']'), nil
		}
		for {
			var err error
			if dst, err = p.value(dst, depth+1); err != nil {
				return dst, err
			}
			p.ws()
			if p.pos >= len(p.src) {
				return dst, p.fail("unterminated array")
			}
			switch p.src[p.pos] {
			case ',':
				p.pos++
				p.ws()
				dst = append(dst, ',')
			case ']':
				p.pos++
				return append(dst, ']'), nil
			default:
				return dst, p.fail("expected , or ]")
			}
		}
	case c == '"':
		s, err := p.str()
		if err != nil {
			return dst, err
		}
		return appendJSONString(dst, s), nil
	case c == '-' || ('0' <= c && c <= '9'):
		return p.number(dst)
	default:
		for _, lit := range [...]string{"true", "false", "null"} {
			if bytes.HasPrefix(p.src[p.pos:], []byte(lit)) {
				p.pos += len(lit)
				return append(dst, lit...), nil
			}
		}
		return dst, p.fail("unexpected character")
	}
}

type member struct {
	key        []byte // decoded
	start, end int    // the canonical `"key":value` in the object's buffer
}

func (p *jsonCanon) object(dst []byte, depth int) ([]byte, error) {
	p.pos++ // {
	p.ws()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		return append(dst, '{', '}'), nil
	}
	for len(p.scratch) <= depth {
		p.scratch = append(p.scratch, objectScratch{})
	}
	buf, members := p.scratch[depth].buf[:0], p.scratch[depth].members[:0]
	for {
		if p.pos >= len(p.src) || p.src[p.pos] != '"' {
			return dst, p.fail("expected a key")
		}
		key, err := p.str()
		if err != nil {
			return dst, err
		}
		start := len(buf)
		buf = appendJSONString(buf, key)
		p.ws()
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return dst, p.fail("expected :")
		}
		p.pos++
		p.ws()
		buf = append(buf, ':')
		if buf, err = p.value(buf, depth+1); err != nil {
			return dst, err
		}
		members = append(members, member{key: key, start: start, end: len(buf)})
		p.ws()
		if p.pos >= len(p.src) {
			return dst, p.fail("unterminated object")
		}
		if p.src[p.pos] == '}' {
			p.pos++
			break
		}
		if p.src[p.pos] != ',' {
			return dst, p.fail("expected , or }")
		}
		p.pos++
		p.ws()
	}
	if !slices.IsSortedFunc(members, compareMembers) {
		slices.SortFunc(members, compareMembers)
	}
	p.scratch[depth].buf, p.scratch[depth].members = buf, members // kept for the next object at this depth
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			if bytes.Equal(m.key, members[i-1].key) {
				return dst, fmt.Errorf("%w: duplicate key %q", errJSON, m.key)
			}
			dst = append(dst, ',')
		}
		dst = append(dst, buf[m.start:m.end]...)
	}
	return append(dst, '}'), nil
}

func compareMembers(a, b member) int {
	if len(a.key) != len(b.key) {
		return len(a.key) - len(b.key)
	}
	return bytes.Compare(a.key, b.key)
}

// str reads a string token and returns its decoded bytes (a slice of src
// when it holds no escape).
func (p *jsonCanon) str() ([]byte, error) {
	p.pos++ // "
	start := p.pos
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case '"':
			s := p.src[start:p.pos]
			p.pos++
			return s, nil
		case '\\':
			return p.strEscaped(start)
		}
		p.pos++
	}
	return nil, p.fail("unterminated string")
}

func (p *jsonCanon) strEscaped(start int) ([]byte, error) {
	out := append([]byte(nil), p.src[start:p.pos]...)
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == '"':
			p.pos++
			return out, nil
		case c != '\\':
			out = append(out, c)
			p.pos++
			continue
		}
		if p.pos+1 >= len(p.src) {
			break
		}
		e := p.src[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return nil, p.fail("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if p.pos+1 < len(p.src) && p.src[p.pos] == '\\' && p.src[p.pos+1] == 'u' {
					p.pos += 2
					if r2, ok = p.hex4(); !ok {
						return nil, p.fail("invalid \\u escape")
					}
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return nil, p.fail("invalid surrogate pair")
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, p.fail("invalid escape")
		}
	}
	return nil, p.fail("unterminated string")
}

func (p *jsonCanon) hex4() (rune, bool) {
	if p.pos+4 > len(p.src) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(p.src[p.pos:p.pos+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	p.pos += 4
	return rune(v), true
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a canonical JSON string.
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// number reads a JSON number and appends it in canonical decimal form.
func (p *jsonCanon) number(dst []byte) ([]byte, error) {
	src := p.src
	i := p.pos
	neg := false
	if src[i] == '-' {
		neg = true
		i++
	}
	intStart := i
	for i < len(src) && '0' <= src[i] && src[i] <= '9' {
		i++
	}
	intDigits := src[intStart:i]
	if len(intDigits) == 0 || (len(intDigits) > 1 && intDigits[0] == '0') {
		return dst, p.fail("invalid number")
	}
	var fracDigits []byte
	if i < len(src) && src[i] == '.' {
		i++
		fracStart := i
		for i < len(src) && '0' <= src[i] && src[i] <= '9' {
			i++
		}
		fracDigits = src[fracStart:i]
		if len(fracDigits) == 0 {
			return dst, p.fail("invalid number")
		}
	}
	exp := 0
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		expNeg := false
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			expNeg = src[i] == '-'
			i++
		}
		expStart := i
		for i < len(src) && '0' <= src[i] && src[i] <= '9' {
			if exp <= maxExponent {
				exp = exp*10 + int(src[i]-'0')
			}
			i++
		}
		if i == expStart {
			return dst, p.fail("invalid number")
		}
		if exp > maxExponent {
			return dst, p.fail("number exponent out of range")
		}
		if expNeg {
			exp = -exp
		}
	}
	p.pos = i

	// The value is digits × 10^exp, digits = intDigits ++ fracDigits.
	exp -= len(fracDigits)
	lead := 0 // leading zeros across intDigits ++ fracDigits
	for lead < len(intDigits) && intDigits[lead] == '0' {
		lead++
	}
	if lead == len(intDigits) {
		for lead-len(intDigits) < len(fracDigits) && fracDigits[lead-len(intDigits)] == '0' {
			lead++
		}
	}
	total := len(intDigits) + len(fracDigits)
	if lead == total {
		return append(dst, '0'), nil
	}
	digit := func(k int) byte {
		if k < len(intDigits) {
			return intDigits[k]
		}
		return fracDigits[k-len(intDigits)]
	}
	end := total // strip trailing zeros into the exponent
	for digit(end-1) == '0' {
		end--
		exp++
	}
	n := end - lead // significant digits
	if neg {
		dst = append(dst, '-')
	}
	switch {
	case exp >= 0:
		for k := lead; k < end; k++ {
			dst = append(dst, digit(k))
		}
		for range exp {
			dst = append(dst, '0')
		}
	case -exp < n:
		point := end + exp
		for k := lead; k < point; k++ {
			dst = append(dst, digit(k))
		}
		dst = append(dst, '.')
		for k := point; k < end; k++ {
			dst = append(dst, digit(k))
		}
	default:
		dst = append(dst, '0', '.')
		for range -exp - n {
			dst = append(dst, '0')
		}
		for k := lead; k < end; k++ {
			dst = append(dst, digit(k))
		}
	}
	return dst, nil
}
