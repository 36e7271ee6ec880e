package jsonx

import (
	"bytes"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// badString says what is wrong with a string token, or "": raw is the
// input from the end of the previous token to the end of this one (so it
// ends with the string literal as written), s the decoder's reading of it.
// The decoder turns invalid UTF-8 and lone surrogate escapes into U+FFFD,
// so the literal itself is what is checked. (NUL, which it keeps, the
// caller checks.)
func badString(raw []byte, s string) string {
	lit := raw[bytes.IndexByte(raw, '"')+1:]
	if !utf8.Valid(lit) {
		return "invalid UTF-8 in a string"
	}
	for i := bytes.IndexByte(lit, '\\'); i >= 0 && i+1 < len(lit); {
		if lit[i+1] != 'u' {
			i = next(lit, i+2)
			continue
		}
		r, ok := hex4(lit, i+2)
		switch {
		case !ok:
			return "" // a syntax error the decoder reports
		case 0xD800 <= r && r < 0xDC00:
			if lo, ok := hex4(lit, i+8); ok && lit[i+6] == '\\' && lit[i+7] == 'u' && 0xDC00 <= lo && lo < 0xE000 {
				i = next(lit, i+12)
				continue
			}
			return "a string holds a lone surrogate (\\u" + string(lit[i+2:i+6]) + ")"
		case 0xDC00 <= r && r < 0xE000:
			return "a string holds a lone surrogate (\\u" + string(lit[i+2:i+6]) + ")"
		}
		i = next(lit, i+6)
	}
	return ""
}

// FoldKey is key as Go's decoder compares an object key with a struct
// field's name: two keys with the same FoldKey fill the same field. Not
// only ASCII case folds: so do Unicode's simple case foldings, such as
// "ſ" (U+017F) with "s" and "K" (U+212A, the Kelvin sign) with "k", which
// strings.ToLower leaves apart.
func FoldKey(key string) string {
	var b strings.Builder
	b.Grow(len(key))
	for _, r := range key {
		if 'a' <= r && r <= 'z' {
			r -= 'a' - 'A'
		} else if r >= utf8.RuneSelf {
			r = foldRune(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// foldRune is the smallest rune of r's simple case folding orbit, as
// encoding/json folds names.
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// MaxNumberDigits bounds a number's digits before and after the point
// when written out without an exponent. PostgreSQL cannot store a number
// beyond 131,072 digits before it or 16,383 after (the request would
// fail), and prints the ones it can in full: "1e99999" (7 bytes) would be
// a 100,000-byte number in every answer that shows the action. 1,000
// holds every float64 (up to 309 and 324 digits) and more.
const MaxNumberDigits = 1000

// numberFits reports whether the JSON number literal lit (valid syntax)
// has at most MaxNumberDigits digits before and after the point when
// written out.
func numberFits[T string | []byte](lit T) bool {
	i := 0
	if i < len(lit) && lit[i] == '-' {
		i++
	}
	var intDigits, fracDigits, exp int64
	for ; i < len(lit) && '0' <= lit[i] && lit[i] <= '9'; i++ {
		intDigits++
	}
	if i < len(lit) && lit[i] == '.' {
		for i++; i < len(lit) && '0' <= lit[i] && lit[i] <= '9'; i++ {
			fracDigits++
		}
	}
	if i < len(lit) && (lit[i] == 'e' || lit[i] == 'E') {
		i++
		neg := i < len(lit) && lit[i] == '-'
		if i < len(lit) && (lit[i] == '-' || lit[i] == '+') {
			i++
		}
		for ; i < len(lit) && '0' <= lit[i] && lit[i] <= '9'; i++ {
			if exp < 1e9 { // saturates far beyond any limit
				exp = exp*10 + int64(lit[i]-'0')
			}
		}
		if neg {
			exp = -exp
		}
	}
	return max(intDigits+exp, 1) <= MaxNumberDigits && max(fracDigits-exp, 0) <= MaxNumberDigits
}

// next returns the index of the next backslash in lit at or after from, or -1.
func next(lit []byte, from int) int {
	if from >= len(lit) {
		return -1
	}
	j := bytes.IndexByte(lit[from:], '\\')
	if j < 0 {
		return -1
	}
	return from + j
}

// hex4 reads four hex digits at lit[at:].
func hex4(lit []byte, at int) (rune, bool) {
	if at+4 > len(lit) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(lit[at:at+4]), 16, 32)
	return rune(v), err == nil
}

// orBody names the document root "body".
func orBody(path string) string {
	if path == "" {
		return "body"
	}
	return path
}

// keyPath names a refused key under path: the key quoted, so that what
// made it refused is visible ("args[\"a\\x00b\"]").
func keyPath(path, key string) string {
	return orBody(path) + "[" + strconv.QuoteToASCII(key) + "]"
}
