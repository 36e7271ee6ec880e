package risk

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAmountSpellings: an amount is read whatever way of writing it a
// payment API also reads, so the cap cannot be passed by re-spelling it.
// Found by a review: "1E5" read as 15 (the exponent's capital E was
// skipped as a letter) and made a payment medium, "within cap", below the
// default escalate_at, where "1e5" is critical; "5000 eur" was no amount
// (its "e" taken for an exponent) where "5000 EUR" was one; a JSON number
// past the largest double (1e400) was no amount where an infinite one is
// critical.
func TestAmountSpellings(t *testing.T) {
	for _, tc := range []struct {
		amount any
		level  Level
		reason string
	}{
		{"1E5", Critical, "amount 100000 exceeds cap 1000 by more than 10x"},
		{"1e5", Critical, "amount 100000 exceeds cap 1000 by more than 10x"},
		{"2.5E+4", Critical, "amount 25000 exceeds cap 1000 by more than 10x"},
		{"5000 eur", High, "amount 5000 exceeds cap 1000"},
		{"5000 EUR", High, "amount 5000 exceeds cap 1000"},
		{"5000 pesos", High, "amount 5000 exceeds cap 1000"},
		{"1.5e3 eur", High, "amount 1500 exceeds cap 1000"},
		{"5000€", High, "amount 5000 exceeds cap 1000"},
		{"€5000", High, "amount 5000 exceeds cap 1000"},
		{"５０００", High, "amount 5000 exceeds cap 1000"},
		{json.Number("1e400"), Critical, "exceeds cap 1000 by more than 10x"},
		{json.Number("-1e400"), Critical, "exceeds cap 1000 by more than 10x"},
		{"1e400", Critical, "exceeds cap 1000 by more than 10x"},
		{"250 eur", Medium, "amount 250 within cap 1000"},
	} {
		got := Classify("payments.send", map[string]any{"amount": tc.amount, "to": "acct_1"}, Config{})
		require.Equal(t, tc.level, got.Level, "%q: %v", tc.amount, got.Reasons)
		require.True(t, slices.ContainsFunc(got.Reasons, func(r string) bool { return strings.Contains(r, tc.reason) }),
			"%q: %v", tc.amount, got.Reasons)
	}
}

func ptr[T any](v T) *T { return &v }

// TestAmountCapZero: a cap of 0 (settings.amount_cap: 0) is a cap every
// positive amount passes, not "no cap set" (found by a review: it was
// read as the default, 1000).
func TestAmountCapZero(t *testing.T) {
	got := Classify("orders.create", map[string]any{"amount": json.Number("500")}, Config{AmountCap: ptr(0.0)})
	require.Equal(t, Critical, got.Level, "%v", got.Reasons)
	require.Contains(t, got.Reasons, "amount 500 exceeds cap 0 by more than 10x")
	got = Classify("payments.send", map[string]any{"amount": json.Number("0")}, Config{AmountCap: ptr(0.0)})
	require.Contains(t, got.Reasons, "amount 0 within cap 0")
	got = Classify("orders.create", map[string]any{"amount": json.Number("500")}, Config{})
	require.NotContains(t, got.Reasons, "amount 500 exceeds cap 1000", "no cap given is 1000")
	require.Equal(t, Medium, got.Level, "%v", got.Reasons)
}

// TestAmountKeySpellings: the keys an amount is read from are read in any
// case and with any separator, as APIs name them ("amountCents" is
// "amount_cents"). Found by a review: only snake_case was, so
// {"amountCents": 500000} was no amount while {"amount_cents": 500000}
// was 5000, over the cap.
func TestAmountKeySpellings(t *testing.T) {
	for _, key := range []string{"amount_cents", "amountCents", "AmountCents", "amount-cents", "amountInCents", "amount_in_cents", "AMOUNT_CENTS"} {
		got := Classify("payments.send", map[string]any{key: json.Number("5000000"), "to": "acct_1"}, Config{})
		require.Equal(t, Critical, got.Level, "%s: %v", key, got.Reasons)
		require.Contains(t, got.Reasons, "amount 50000 exceeds cap 1000 by more than 10x", key)
	}
	got := Classify("invoice.create", map[string]any{"totalCents": json.Number("500000"), "currency": "eur"}, Config{})
	require.Contains(t, got.Reasons, "amount 5000 exceeds cap 1000", "total next to a currency")
	got = Classify("config.set", map[string]any{"percents": json.Number("5000000")}, Config{})
	require.NotContains(t, got.Reasons, "amount", "no amount key")
}
