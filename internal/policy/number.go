package policy

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// argsAdapter gives conditions the arguments' numbers exactly as the agent
// sent them. Args arrive with numbers as json.Number (jsonx keeps them so);
// cel-go's own adapter would round any that is not a plain int64 literal to
// a double, so 10000000000000001 sent as 1.0000000000000001e16, or any
// integer past int64, would compare equal to its neighbour. Each number
// becomes the CEL value that holds it exactly (see numberValue); nested
// maps and lists are adapted the same way, lazily.
type argsAdapter struct{}

// NativeToValue implements types.Adapter.
func (argsAdapter) NativeToValue(v any) ref.Val {
	switch t := v.(type) {
	case json.Number:
		return numberValue(t)
	case map[string]any:
		return types.NewStringInterfaceMap(argsAdapter{}, t)
	case []any:
		return types.NewDynamicList(argsAdapter{}, t)
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}

// numberValue converts a JSON number to the CEL value that represents it
// exactly, so that two different numbers never compare equal:
//
//   - an integer (however written: 5, 5.0, 5e0) that fits int64 is an int,
//     one that fits uint64 a uint;
//   - a number that is the shortest decimal of a double (0.5, 0.1, 1e300)
//     is that double: no other such decimal maps to the same double;
//   - anything else (more digits than a double holds, 1e400) is a decimal,
//     compared exactly with ==, <, <= …; arithmetic on it is an error, and
//     an erroring condition fails closed (deny).
func numberValue(n json.Number) ref.Val {
	s := string(n)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return types.Int(i)
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || len(s) > maxNumberLen {
		return types.NewErr("args: number %.40q is not a decimal number Airlock can compare", s)
	}
	if r.IsInt() {
		if num := r.Num(); num.IsInt64() {
			return types.Int(num.Int64())
		} else if num.IsUint64() {
			return types.Uint(num.Uint64())
		}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) {
		if back, ok := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64)); ok && back.Cmp(r) == 0 {
			return types.Double(f)
		}
	}
	return decimal{r: r, text: s}
}

// maxNumberLen bounds the numbers converted exactly (big.Rat's work grows
// with the exponent); jsonx bounds the body, this the cost per number.
const maxNumberLen = 400

// decimalType is the CEL type of a number no int, uint or double holds
// exactly.
var decimalType = types.NewObjectType("airlock.decimal", traits.ComparerType)

// decimal is an exact rational value read from a JSON number.
type decimal struct {
	r    *big.Rat
	text string
}

// ratOf returns v as an exact rational, if it is a number.
func ratOf(v ref.Val) (*big.Rat, bool) {
	switch t := v.(type) {
	case types.Int:
		return new(big.Rat).SetInt64(int64(t)), true
	case types.Uint:
		return new(big.Rat).SetUint64(uint64(t)), true
	case types.Double:
		if math.IsNaN(float64(t)) || math.IsInf(float64(t), 0) {
			return nil, false
		}
		return new(big.Rat).SetFloat64(float64(t)), true
	case decimal:
		return t.r, true
	}
	return nil, false
}

// ConvertToNative implements ref.Val.
func (d decimal) ConvertToNative(typeDesc reflect.Type) (any, error) {
	if typeDesc.Kind() == reflect.String {
		return d.text, nil
	}
	return nil, fmt.Errorf("decimal %s cannot be converted to %v exactly", d.text, typeDesc)
}

// ConvertToType implements ref.Val.
func (d decimal) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.StringType:
		return types.String(d.text)
	case types.DoubleType:
		f, _ := d.r.Float64()
		return types.Double(f)
	case types.TypeType:
		return decimalType
	case decimalType:
		return d
	}
	return types.NewErr("type conversion error from decimal to '%s'", t.TypeName())
}

// Equal implements ref.Val: exact numeric equality; never equal to a
// non-number.
func (d decimal) Equal(other ref.Val) ref.Val {
	o, ok := ratOf(other)
	return types.Bool(ok && d.r.Cmp(o) == 0)
}

// Compare implements traits.Comparer, exactly.
func (d decimal) Compare(other ref.Val) ref.Val {
	o, ok := ratOf(other)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Int(d.r.Cmp(o))
}

// Type implements ref.Val.
func (d decimal) Type() ref.Type { return decimalType }

// Value implements ref.Val.
func (d decimal) Value() any { return d.text }
