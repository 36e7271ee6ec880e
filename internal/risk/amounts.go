package risk

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// defaultAmountCap applies when Config.AmountCap is not set.
const defaultAmountCap = 1000

// amountKey reports whether a (normalised) map key names a money amount,
// and whether it is in cents. "amount" always counts; "total" and "value"
// only for payment tools or next to a "currency" key, since elsewhere they
// are as likely to be a count or a setting.
func amountKey(key string, payment, hasCurrency bool) (ok, cents bool) {
	base, cents := strings.CutSuffix(key, "_cents")
	switch base {
	case "amount":
		return true, cents
	case "total", "value":
		return payment || hasCurrency, cents
	}
	return false, false
}

// parseAmount reads an amount from a JSON number, a Go number or a string
// such as "5000", "$5,000.00" or "5000 USD".
func parseAmount(v any) (float64, bool) {
	var f float64
	switch t := v.(type) {
	case float64:
		f = t
	case float32:
		f = float64(t)
	case int:
		f = float64(t)
	case int32:
		f = float64(t)
	case int64:
		f = float64(t)
	case uint:
		f = float64(t)
	case uint32:
		f = float64(t)
	case uint64:
		f = float64(t)
	case json.Number:
		var err error
		if f, err = strconv.ParseFloat(string(t), 64); err != nil {
			return 0, false
		}
	case string:
		return parseAmountString(t)
	default:
		return 0, false
	}
	if math.IsNaN(f) {
		return 0, false
	}
	return math.Abs(f), true
}

// parseAmountString strips currency symbols and codes, spaces, and
// thousands separators, then parses what is left.
func parseAmountString(s string) (float64, bool) {
	if len(s) > 64 {
		return 0, false
	}
	var b strings.Builder
	for _, r := range strings.TrimSpace(s) {
		switch {
		case r >= '0' && r <= '9', r == '.', r == '-', r == '+', r == 'e' && b.Len() > 0:
			b.WriteRune(r)
		case r == ',' || r == '_' || r == ' ' || r == '\u00a0' || r == '\'':
		case r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z', r == '$', r == '€', r == '£', r == '¥':
			if b.Len() > 0 && !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z') {
				return 0, false
			}
		default:
			return 0, false
		}
	}
	if b.Len() == 0 {
		return 0, false
	}
	f, err := strconv.ParseFloat(b.String(), 64)
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	return math.Abs(f), true
}

// formatAmount renders an amount for a reason: 5000, 12.5, 1e+20.
func formatAmount(f float64) string {
	if math.IsInf(f, 0) || math.Abs(f) >= 1e15 {
		return strconv.FormatFloat(f, 'g', 6, 64)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}
