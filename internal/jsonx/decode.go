// Package jsonx decodes request bodies strictly. Go's encoding/json is
// lenient in ways an API that guards actions must not be: it matches field
// names case-insensitively, keeps the last of duplicate keys, silently
// replaces invalid UTF-8 and lone surrogates with U+FFFD, rounds numbers to
// float64 and accepts trailing data. Decode refuses all of these (numbers it
// keeps exactly, as json.Number), and bounds nesting depth, before anything
// is decoded.
package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of objects and arrays Decode accepts.
const MaxDepth = 64

// Error describes why a document was refused. Its message is safe to show
// to the client.
type Error struct {
	Msg string
	// Field is where in the document the problem lies ("args.path[2].to"),
	// when it is known; "" otherwise.
	Field string
}

func (e *Error) Error() string { return e.Msg }

func fail(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// Decode parses data as exactly one JSON value into v, which must be a
// pointer to a struct. Unknown fields, fields spelled in another case,
// duplicate keys (also in another case), strings Check refuses, nesting
// deeper than MaxDepth, wrong types and trailing data are refused with an
// *Error. Numbers in free-form values (any, map[string]any) decode as
// json.Number, exactly as sent.
func Decode(data []byte, v any) error {
	if !accepts(data, reflect.TypeOf(v)) { // fast.go; the walk below decides
		if err := Check(data); err != nil {
			return err
		}
		if err := checkFieldNames(data, reflect.TypeOf(v)); err != nil {
			return err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return describe(err)
	}
	return nil
}

// Check validates data as exactly one well-formed JSON value: valid UTF-8,
// no string (value or key, at any depth) holding NUL, a lone surrogate
// escape or invalid UTF-8, no duplicate object keys (compared as Go's
// decoder matches them to fields: FoldKey), no number PostgreSQL could
// not store or that would print out of all proportion (more than
// MaxNumberDigits digits before or after the point when written out),
// nesting at most MaxDepth, nothing after the value. A refused string or
// number is named in the *Error's Field.
func Check(data []byte) error {
	if accepts(data, nil) { // the fast path (fast.go): never laxer than the walk
		return nil
	}
	return check(data, false)
}

// CheckUnambiguous validates data as exactly one JSON value that Go's
// decoder reads as every other reader does: Check's rules except the two
// that are about what Airlock stores (NUL and the size of numbers, which
// every reader reads alike). A relay that decides on its own reading of
// a message and forwards the bytes needs this: with "paramſ" beside
// "params" Go would read one and a JavaScript or Python server the other.
func CheckUnambiguous(data []byte) error {
	if accepts(data, nil) { // what Check accepts, this does
		return nil
	}
	return check(data, true)
}

func check(data []byte, unambiguousOnly bool) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return fail("request body is empty")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	c := checker{data: data, dec: dec, unambiguousOnly: unambiguousOnly}
	if err := c.walk(0, ""); err != nil {
		return err
	}
	if !utf8.Valid(data) { // outside strings, which walk checked with their field
		return fail("request body is not valid UTF-8")
	}
	if _, err := dec.Token(); err != io.EOF {
		return fail("unexpected data after the JSON value")
	}
	return nil
}

// checker walks a document's tokens.
type checker struct {
	data []byte
	dec  *json.Decoder
	// unambiguousOnly: CheckUnambiguous's rules (NUL and large numbers
	// pass).
	unambiguousOnly bool
}

// token reads the next token; for a string it also checks the string's
// text as written (which the decoder has already unescaped, replacing
// lone surrogates and invalid bytes) and reports a bad one at field.
func (c *checker) token(field func(s string) string) (json.Token, error) {
	start := c.dec.InputOffset()
	tok, err := c.dec.Token()
	if err != nil {
		return nil, describe(err)
	}
	switch v := tok.(type) {
	case string:
		msg := badString(c.data[start:c.dec.InputOffset()], v)
		if msg == "" && !c.unambiguousOnly && strings.IndexByte(v, 0) >= 0 {
			msg = "a string holds NUL (U+0000)"
		}
		if msg != "" {
			f := field(v)
			return nil, &Error{Msg: fmt.Sprintf("%s: %s", f, msg), Field: f}
		}
	case json.Number:
		if !c.unambiguousOnly && !numberFits(string(v)) {
			f := field("")
			return nil, &Error{Msg: fmt.Sprintf("%s: a number may have at most %d digits before and %d after the point when written out without an exponent", f, MaxNumberDigits, MaxNumberDigits), Field: f}
		}
	}
	return tok, nil
}

// walk consumes one value (at path) from the decoder, checking strings,
// depth and duplicate keys.
func (c *checker) walk(depth int, path string) error {
	tok, err := c.token(func(string) string { return orBody(path) })
	if err != nil {
		return err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth+1 > MaxDepth {
		return fail("JSON nested deeper than %d levels", MaxDepth)
	}
	switch delim {
	case '{':
		seen := map[string]string{}
		for c.dec.More() {
			kt, err := c.token(func(key string) string { return keyPath(path, key) })
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			folded := FoldKey(key)
			if prev, dup := seen[folded]; dup {
				if prev == key {
					return fail("duplicate key %q", key)
				}
				return fail("duplicate key %q (also given as %q)", key, prev)
			}
			seen[folded] = key
			if err := c.walk(depth+1, joinPath(path, key)); err != nil {
				return err
			}
		}
	case '[':
		for i := 0; c.dec.More(); i++ {
			if err := c.walk(depth+1, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	if _, err := c.dec.Token(); err != nil { // closing delimiter
		return describe(err)
	}
	return nil
}

// checkFieldNames refuses object keys that Go would match to a struct field
// only case-insensitively (e.g. "Tool" for `json:"tool"`). It follows nested
// structs, pointers, slices and maps of structs; map[string]any values are
// free-form and not checked. data must be valid JSON (Check first).
func checkFieldNames(data []byte, t reflect.Type) error {
	return matchNames(data, t, "", false)
}

// CheckExactNames refuses data when one of its objects has a key that Go's
// decoder would match to a field of v (a pointer to a struct, or to a
// slice of structs) only by folding it — another case, "ſ" for "s", the
// Kelvin sign for "k" — while a key of another name passes, unread: the
// relays decode a message's few fields and forward the rest as it is, and
// a JavaScript or Python reader takes only the exact spelling, so with
// {"Arguments":{…}} Go would decide on arguments the upstream never reads.
// data must be valid JSON (CheckUnambiguous first).
func CheckExactNames(data []byte, v any) error {
	return matchNames(data, reflect.TypeOf(v), "", true)
}

// matchNames refuses a key of data that is not the exact name of a field
// of t, following t's fields; with open, a key that folds to no field's
// name passes (unfollowed), and only one that does is refused. Each level
// is decoded only as far as t has names to check (json.RawMessage below
// it): a free-form value (any, map[string]any, a json.Unmarshaler) is
// never decoded, so a call's large arguments cost one scan, not a tree.
func matchNames(data []byte, t reflect.Type, path string, open bool) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if !hasNames(t) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) != nil {
			return nil // not an object: a type error the decoder reports
		}
		fields := jsonFields(t)
		// By key, so that with two unknown fields the error always names
		// the same one.
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			ft, exact := fields[k]
			if !exact && !open {
				return fail("unknown field %q", joinPath(path, k))
			}
			if !exact {
				if name, folds := foldsTo(k, fields); folds {
					return fail("field %q must be spelled %q", joinPath(path, k), name)
				}
				continue
			}
			if err := matchNames(obj[k], ft, joinPath(path, k), open); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		var arr []json.RawMessage
		if json.Unmarshal(data, &arr) != nil {
			return nil
		}
		for i, el := range arr {
			if err := matchNames(el, t.Elem(), fmt.Sprintf("%s[%d]", path, i), open); err != nil {
				return err
			}
		}
	case reflect.Map:
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) != nil {
			return nil
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if err := matchNames(obj[k], t.Elem(), joinPath(path, k), open); err != nil {
				return err
			}
		}
	}
	return nil
}

// hasNames reports whether a value of t can hold an object whose keys
// matchNames checks: a struct (not decoded by its own UnmarshalJSON), or
// a slice, array or map of one.
func hasNames(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return false
	}
	switch t.Kind() {
	case reflect.Struct:
		return true
	case reflect.Slice, reflect.Array, reflect.Map:
		return hasNames(t.Elem())
	}
	return false
}

// foldsTo returns the field name key matches under Go's folding of keys
// (FoldKey), if any.
func foldsTo(key string, fields map[string]reflect.Type) (string, bool) {
	fk := FoldKey(key)
	for name := range fields {
		if FoldKey(name) == fk {
			return name, true
		}
	}
	return "", false
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// jsonFields maps the exact JSON names of t's exported fields to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// describe turns decoder errors into client-safe messages.
func describe(err error) error {
	var je *Error
	if errors.As(err, &je) {
		return je
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fail("invalid JSON at byte %d: %s", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "body"
		}
		return fail("field %q must be %s, not %s", field, typeName(typ.Type), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return fail("invalid JSON: unexpected end of input")
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return fail("%s", strings.TrimPrefix(err.Error(), "json: "))
	default:
		return fail("invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return t.String()
}
