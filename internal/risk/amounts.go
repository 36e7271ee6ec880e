package risk

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
)

// defaultAmountCap applies when Config.AmountCap is not set.
const defaultAmountCap = 1000

// amountKey reports whether a (normalised) map key names a money amount,
// and whether it is in cents. "amount" always counts; "total" and "value"
// only for payment tools or next to a "currency" key, since elsewhere they
// are as likely to be a count or a setting. Separators do not count, as
// keyName left case out: "amountCents", "amount_cents" and
// "amount_in_cents" are one key.
func amountKey(key string, payment, hasCurrency bool) (ok, cents bool) {
	base, cents := strings.CutSuffix(strings.NewReplacer("_", "", " ", "").Replace(key), "cents")
	if cents {
		base = strings.TrimSuffix(base, "in")
	}
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
		if f, err = strconv.ParseFloat(string(t), 64); err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, false // past the largest double it is infinite: over any cap
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

// parseAmountString strips currency symbols and codes (before or after
// the number), spaces and thousands separators, then parses what is left.
// Digits are read as fold reads them (full-width, mathematical), and an
// e or E is an exponent only where one can be ("1E5", "2.5e+4"; not the
// e of "5000 eur"), as the parsers payment APIs use read them.
func parseAmountString(s string) (float64, bool) {
	if len(s) > 64 {
		return 0, false
	}
	rs := []rune(strings.TrimSpace(s))
	var b strings.Builder
	for i, r := range rs {
		switch r = fold(r); {
		case r < 0: // invisible: not part of what is read
		case r >= '0' && r <= '9', r == '.', r == '-', r == '+':
			b.WriteRune(r)
		case r == 'e' && b.Len() > 0 && exponentAt(rs[i+1:]):
			b.WriteRune(r)
		case r == ',' || r == '_' || r == ' ' || r == '\u00a0' || r == '\'':
		case r >= 'a' && r <= 'z', r == '$', r == '€', r == '£', r == '¥':
		default:
			return 0, false
		}
	}
	if b.Len() == 0 {
		return 0, false
	}
	f, err := strconv.ParseFloat(b.String(), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || math.IsNaN(f) {
		return 0, false
	}
	return math.Abs(f), true
}

// exponentAt reports whether rest, what follows an e, is an exponent's
// digits: a digit, or a sign and a digit.
func exponentAt(rest []rune) bool {
	digit := func(i int) bool {
		if i >= len(rest) {
			return false
		}
		r := fold(rest[i])
		return r >= '0' && r <= '9'
	}
	if len(rest) > 0 && (rest[0] == '+' || rest[0] == '-') {
		return digit(1)
	}
	return digit(0)
}

// formatAmount renders an amount for a reason: 5000, 12.5, 1e+20.
func formatAmount(f float64) string {
	if math.IsInf(f, 0) || math.Abs(f) >= 1e15 {
		return strconv.FormatFloat(f, 'g', 6, 64)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}
