package audittool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/jsonx"
)

// decodeStrict decodes data, one JSON object, into v (a pointer to a
// struct without nested structs) only if every reader reads it as Go
// does: no key given twice (in any case, at any depth), every key one of
// v's fields spelled exactly, nothing after the object. encoding/json
// alone would match "KIND" to kind and keep the last of two: an export
// line that says "action.denied" to jq and "action.approved" to the
// verifier would pass verification.
//
// It is jsonx.Decode without the rules about what Airlock stores (NUL, a
// number's size: jsonx.CheckUnambiguous), which an event's free-form
// values need not meet, and with the names checked by one scan of the
// object's keys (jsonx.CheckExactNames decodes the object again: it made
// an offline verification four times slower).
func decodeStrict(data []byte, v any) error {
	if err := jsonx.CheckUnambiguous(data); err != nil {
		return err
	}
	if err := checkNames(data, fieldNames(reflect.TypeOf(v).Elem())); err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// parseCheckpoint reads one line of a file of kept checkpoints (or of the
// server's checkpoints export) strictly (decodeStrict) and checks its
// signature against its own key.
func parseCheckpoint(line []byte) (audit.Checkpoint, error) {
	var cp audit.Checkpoint
	if err := decodeStrict(line, &cp); err != nil {
		return cp, err
	}
	return cp, cp.Verify()
}

var fieldNamesOf sync.Map // reflect.Type → map[string]bool

// fieldNames returns the JSON names of struct type t's fields.
func fieldNames(t reflect.Type) map[string]bool {
	if names, ok := fieldNamesOf.Load(t); ok {
		return names.(map[string]bool)
	}
	names := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names[name] = true
	}
	fieldNamesOf.Store(t, names)
	return names
}

// checkNames refuses an object (data, valid JSON) with a key that is not
// in names, spelled exactly.
func checkNames(data []byte, names map[string]bool) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return fmt.Errorf("not a JSON object")
	}
	depth, key := 0, false // key: the next string at depth 1 is a key
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '{', '[':
			depth++
			key = depth == 1
		case '}', ']':
			depth--
		case ',':
			key = depth == 1
		case '"':
			end := i + 1
			for data[end] != '"' {
				if data[end] == '\\' {
					end++
				}
				end++
			}
			if key && !names[string(data[i+1:end])] { // a field's name as written: no escapes
				var name string
				_ = json.Unmarshal(data[i:end+1], &name)
				return unknownName(name, names)
			}
			key = false
			i = end
		}
	}
	return nil
}

// unknownName says what is wrong with key, not one of names.
func unknownName(key string, names map[string]bool) error {
	if names[key] {
		return fmt.Errorf("field %q is written with escapes", key)
	}
	for name := range names {
		if jsonx.FoldKey(name) == jsonx.FoldKey(key) {
			return fmt.Errorf("field %q must be spelled %q", key, name)
		}
	}
	return fmt.Errorf("unknown field %q", key)
}
