package jsonx

import (
	"reflect"
	"sync"
	"unicode/utf8"
)

// accepts is Decode's fast path: one pass over data's bytes that answers
// whether Check and the field-name rule accept data as a value for t,
// without allocating in the common case. It is allowed to be stricter
// than they are, never laxer: whenever it answers false (a refusal, or
// anything it does not look into, such as keys with escapes or outside
// ASCII), Decode asks the token walk, which decides and words the error.
// FuzzFastPath holds the two to that.
func accepts(data []byte, t reflect.Type) bool {
	s := scanner{data: data}
	s.space()
	if s.i == len(data) {
		return false // empty: the slow path words it
	}
	if !s.value(0, t) {
		return false
	}
	s.space()
	return s.i == len(data)
}

// scanner reads one JSON document byte by byte.
type scanner struct {
	data []byte
	i    int
}

func (s *scanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value scans the value at s.i, at depth, that decodes into t (nil: a
// free-form value, whose keys are not matched to fields).
func (s *scanner) value(depth int, t reflect.Type) bool {
	if s.i >= len(s.data) {
		return false
	}
	switch c := s.data[s.i]; {
	case c == '{':
		return depth+1 <= MaxDepth && s.object(depth+1, t)
	case c == '[':
		return depth+1 <= MaxDepth && s.array(depth+1, t)
	case c == '"':
		_, _, ok := s.str()
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return s.number()
	}
	return false
}

func (s *scanner) literal(lit string) bool {
	if len(s.data)-s.i < len(lit) || string(s.data[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, a number
// Check accepts.
func (s *scanner) number() bool {
	start := s.i
	if !s.numberSyntax() {
		return false
	}
	return numberFits(s.data[start:s.i])
}

func (s *scanner) numberSyntax() bool {
	if s.data[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.data) && s.data[s.i] == '0':
		s.i++
	case s.digits() == 0:
		return false
	}
	if s.i < len(s.data) && s.data[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return false
		}
	}
	if s.i < len(s.data) && (s.data[s.i] == 'e' || s.data[s.i] == 'E') {
		s.i++
		if s.i < len(s.data) && (s.data[s.i] == '+' || s.data[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.data) && '0' <= s.data[s.i] && s.data[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// str scans the string literal at s.i and returns its contents as written
// (between the quotes) and whether they are plain: ASCII without escapes,
// so that they are the string itself. It refuses what Check refuses in a
// string: control bytes, NUL and lone surrogates (also escaped), invalid
// UTF-8 and bad escapes.
func (s *scanner) str() (raw []byte, plain, ok bool) {
	s.i++ // the opening quote
	start, plain := s.i, true
	for s.i < len(s.data) {
		c := s.data[s.i]
		switch {
		case c == '"':
			raw = s.data[start:s.i]
			s.i++
			return raw, plain, true
		case c < 0x20:
			return nil, false, false
		case c == '\\':
			plain = false
			if !s.escape() {
				return nil, false, false
			}
		case c >= utf8.RuneSelf:
			plain = false
			r, size := utf8.DecodeRune(s.data[s.i:])
			if r == utf8.RuneError && size <= 1 {
				return nil, false, false
			}
			s.i += size
		default:
			s.i++
		}
	}
	return nil, false, false
}

// escape scans the escape at s.i (a backslash).
func (s *scanner) escape() bool {
	if s.i+1 >= len(s.data) {
		return false
	}
	switch s.data[s.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i += 2
		return true
	case 'u':
	default:
		return false
	}
	r, ok := hex4(s.data, s.i+2)
	switch {
	case !ok, r == 0, 0xDC00 <= r && r < 0xE000:
		return false
	case 0xD800 <= r && r < 0xDC00:
		if s.i+12 > len(s.data) || s.data[s.i+6] != '\\' || s.data[s.i+7] != 'u' {
			return false
		}
		lo, ok := hex4(s.data, s.i+8)
		if !ok || lo < 0xDC00 || lo >= 0xE000 {
			return false
		}
		s.i += 12
		return true
	}
	s.i += 6
	return true
}

// smallObject is how many keys an object may have for the fast path,
// which compares each key with every earlier one.
const smallObject = 32

func (s *scanner) object(depth int, t reflect.Type) bool {
	fields, elem := shape(t)
	s.i++ // {
	s.space()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		return true
	}
	var keys [smallObject][]byte
	n := 0
	for {
		if s.i >= len(s.data) || s.data[s.i] != '"' || n == smallObject {
			return false
		}
		key, plain, ok := s.str()
		if !ok || !plain {
			return false
		}
		for _, k := range keys[:n] {
			if asciiFold(k, key) {
				return false
			}
		}
		keys[n] = key
		n++
		child := elem
		if fields != nil {
			ft, known := fields[string(key)]
			if !known {
				return false
			}
			child = ft
		}
		s.space()
		if s.i >= len(s.data) || s.data[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		if !s.value(depth, child) {
			return false
		}
		s.space()
		if s.i >= len(s.data) {
			return false
		}
		switch s.data[s.i] {
		case ',':
			s.i++
			s.space()
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *scanner) array(depth int, t reflect.Type) bool {
	_, elem := shape(t)
	s.i++ // [
	s.space()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		return true
	}
	for {
		if !s.value(depth, elem) {
			return false
		}
		s.space()
		if s.i >= len(s.data) {
			return false
		}
		switch s.data[s.i] {
		case ',':
			s.i++
			s.space()
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// asciiFold reports whether two ASCII keys are equal ignoring case.
func asciiFold(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// typeShape is what the field-name rule needs of a type: for a struct its
// fields by exact JSON name, else the type of its elements (nil:
// free-form or not checked).
type typeShape struct {
	fields map[string]reflect.Type
	elem   reflect.Type
}

var shapes sync.Map // reflect.Type → typeShape

// shape returns t's fields (a struct) or element type (a slice, array or
// map), as matchNames follows them.
func shape(t reflect.Type) (map[string]reflect.Type, reflect.Type) {
	if t == nil {
		return nil, nil
	}
	if v, ok := shapes.Load(t); ok {
		sh := v.(typeShape)
		return sh.fields, sh.elem
	}
	var sh typeShape
	u := t
	for u.Kind() == reflect.Pointer {
		u = u.Elem()
	}
	if !u.Implements(unmarshalerType) && !reflect.PointerTo(u).Implements(unmarshalerType) {
		switch u.Kind() {
		case reflect.Struct:
			sh.fields = jsonFields(u)
		case reflect.Slice, reflect.Array, reflect.Map:
			sh.elem = u.Elem()
		}
	}
	shapes.Store(t, sh)
	return sh.fields, sh.elem
}
