package jsonx

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"
)

// badString says what is wrong with a string token, or "": raw is the
// input from the end of the previous token to the end of this one (so it
// ends with the string literal as written), s the decoder's reading of it.
// The decoder turns invalid UTF-8 and lone surrogate escapes into U+FFFD
// and keeps NUL, so the literal itself is what is checked.
func badString(raw []byte, s string) string {
	lit := raw[bytes.IndexByte(raw, '"')+1:]
	if !utf8.Valid(lit) {
		return "invalid UTF-8 in a string"
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "a string holds NUL (U+0000)"
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
