package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
)

// How a JSON-RPC client matches a response's id with its request's. Not
// by the id's bytes: the TypeScript SDK looks a response up by
// Number(response.id) (so 1, 1.0, 1e0, "1", " 1 ", "0x1" and "1e0" all
// answer request 1, and "" answers request 0); the Python SDK turns a
// string id into int(id) ("1", " +1 ", "1_0" is 10, and Unicode digits
// such as "１" count); the Go SDK reads a number id through float64 and
// truncates it to int64 (1.5 answers request 1). A relay that recognised
// the answer to a call by its id's exact spelling would let an upstream
// answer with a respelled id that the client takes for the answer
// unchecked. So ids are compared as every one of those readers compares
// them: two ids are the same when any reading of one equals any reading
// of the other (a string is also never the same as a number unless one
// of those readers turns it into that number).

// ID is a JSON-RPC id with its readings.
type ID struct {
	Raw  json.RawMessage
	keys []string
}

// maxIDDigits bounds the digits of an integer reading: every float64
// and every id a client picks has fewer; a longer one is not read as an
// integer (a number of that size is read through float64 still).
const maxIDDigits = 400

// NewID returns raw's readings.
func NewID(raw json.RawMessage) ID {
	id := ID{Raw: raw}
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return id
	}
	add := func(k string) {
		for _, have := range id.keys {
			if have == k {
				return
			}
		}
		id.keys = append(id.keys, k)
	}
	switch c := t[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(t, &s) != nil {
			add("raw:" + string(t))
			return id
		}
		add("s:" + s)
		if f, ok := jsNumber(s); ok {
			addFloat(add, f, false)
		}
		if n, ok := pyInt(s); ok {
			add("n:" + n)
		}
	case c == '-' || ('0' <= c && c <= '9'):
		lit := string(t)
		if f, ok := parseFloat(lit); ok {
			addFloat(add, f, true)
		}
		if n, ok := exactInteger(lit); ok {
			add("n:" + n)
		}
		if len(id.keys) == 0 {
			add("raw:" + Compact(t))
		}
	default:
		add("raw:" + Compact(t))
	}
	return id
}

// addFloat adds the readings of f, a number as JavaScript holds it: the
// number itself (Number(a) === Number(b)) and, for a JSON number (trunc),
// its truncation (the Go SDK's int64(f)).
func addFloat(add func(string), f float64, trunc bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return
	}
	if f == 0 {
		f = 0 // -0 is 0
	}
	add("f:" + strconv.FormatFloat(f, 'g', -1, 64))
	if !trunc {
		if f != math.Trunc(f) {
			return
		}
	}
	tr := math.Trunc(f)
	if tr == 0 {
		tr = 0
	}
	add("n:" + new(big.Float).SetFloat64(tr).Text('f', 0))
}

// Same reports whether a client could take a response carrying id b
// for the answer to its request with id a (or the other way round).
func (a ID) Same(b ID) bool {
	for _, k := range a.keys {
		for _, l := range b.keys {
			if k == l {
				return true
			}
		}
	}
	return false
}

// SameID is NewID(a).Same(NewID(b)).
func SameID(a, b json.RawMessage) bool { return NewID(a).Same(NewID(b)) }

// exactInteger is the JSON number literal lit written out as an integer
// without leading zeros, when its value is one of at most maxIDDigits
// digits.
func exactInteger(lit string) (string, bool) {
	neg := strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	mant, exp := lit, 0
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		mant = lit[:i]
		e, err := strconv.Atoi(lit[i+1:])
		if err != nil || e > 10*maxIDDigits || e < -10*maxIDDigits {
			return "", false
		}
		exp = e
	}
	digits := mant
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		digits = mant[:i] + mant[i+1:]
		exp -= len(mant) - i - 1
	}
	digits = strings.TrimLeft(digits, "0")
	for exp < 0 && strings.HasSuffix(digits, "0") {
		digits = digits[:len(digits)-1]
		exp++
	}
	switch {
	case digits == "":
		return "0", true
	case exp < 0 || len(digits)+exp > maxIDDigits:
		return "", false
	}
	if neg {
		digits = "-" + digits
	}
	return digits + strings.Repeat("0", exp), true
}

// jsSpace is JavaScript's StrWhiteSpaceChar, which Number() trims.
func jsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0xFEFF, 0x2028, 0x2029:
		return true
	}
	return unicode.Is(unicode.Zs, r)
}

// jsNumber is JavaScript's Number(s) for a string, when it is finite.
func jsNumber(s string) (float64, bool) {
	s = strings.TrimFunc(s, jsSpace)
	if s == "" {
		return 0, true
	}
	if len(s) > 2 && s[0] == '0' {
		base := 0
		switch s[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			digits := strings.TrimLeft(s[2:], "0")
			if digits == "" {
				digits = "0"
			}
			if len(digits) > 1100 { // beyond float64 in any of the bases
				return 0, false
			}
			n, ok := new(big.Int).SetString(digits, base)
			if !ok || strings.ContainsRune(digits, '_') {
				return 0, false
			}
			f, _ := new(big.Float).SetInt(n).Float64()
			return f, !math.IsInf(f, 0)
		}
	}
	if !jsDecimal(s) {
		return 0, false
	}
	return parseFloat(s)
}

// parseFloat is the float64 nearest to the decimal literal s, when it is
// finite (a literal too small for a float64 is 0, as in JavaScript).
func parseFloat(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	return f, !math.IsInf(f, 0) && !math.IsNaN(f)
}

// jsDecimal reports whether s is a StrDecimalLiteral other than Infinity:
// a sign, digits with at most one point and at least one digit, and an
// exponent.
func jsDecimal(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
			exp++
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(s)
}

// pySpace is what Python's int() trims (str.isspace), with U+FEFF too.
func pySpace(r rune) bool {
	return unicode.IsSpace(r) || (0x1C <= r && r <= 0x1F) || r == 0xFEFF || jsSpace(r)
}

// pyInt is Python's int(s) for a string, written out without leading
// zeros: a sign, decimal digits (any Unicode decimal digit) with single
// underscores between them.
func pyInt(s string) (string, bool) {
	s = strings.TrimFunc(s, pySpace)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	var b strings.Builder
	underscore := true // no leading underscore
	for _, r := range s {
		if r == '_' {
			if underscore {
				return "", false
			}
			underscore = true
			continue
		}
		d, ok := digitValue(r)
		if !ok {
			return "", false
		}
		underscore = false
		if b.Len() == 0 && d == 0 {
			continue
		}
		if b.Len() >= maxIDDigits {
			return "", false
		}
		b.WriteByte(byte('0' + d))
	}
	if underscore { // empty, or a trailing underscore
		return "", false
	}
	if b.Len() == 0 {
		return "0", true
	}
	if neg {
		return "-" + b.String(), true
	}
	return b.String(), true
}

// digitValue is the value of a Unicode decimal digit (category Nd, which
// Unicode encodes in runs of ten from zero to nine).
func digitValue(r rune) (int, bool) {
	if '0' <= r && r <= '9' {
		return int(r - '0'), true
	}
	if !unicode.IsDigit(r) {
		return 0, false
	}
	start := r
	for unicode.IsDigit(start - 1) {
		start--
	}
	return int(r-start) % 10, true
}
