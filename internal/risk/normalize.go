package risk

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normalize folds a string into the canonical form the pattern scans work
// on: lowercase, invisible characters removed, look-alike letters
// (full-width, mathematical, circled, small capitals, common Cyrillic and
// Greek homoglyphs) folded to ASCII, Unicode tag characters (used to smuggle
// hidden ASCII) decoded, fancy quotes and dashes made plain, and runs of
// whitespace collapsed to one space, or one newline if the run held a line
// break. Characters with a Unicode compatibility decomposition (NFKD) are
// decomposed first and their combining marks dropped, so ligatures,
// full-width forms and accented letters read as plain ASCII ("précédentes"
// is "precedentes").
//
// With zwAsSpace, zero-width characters become word breaks instead of being
// dropped: "ig\u200bnore" hides a word by splitting it, while
// "ignore\u200bprevious" hides word breaks, and a scan tries both.
func normalize(s string, zwAsSpace bool) string {
	out, _ := normalizeText(s, zwAsSpace)
	return out
}

// appendFolded appends the normal form of r to buf, with pending the
// whitespace waiting to be written.
func appendFolded(buf []byte, pending byte, r rune) ([]byte, byte) {
	r = fold(r)
	if r < 0 {
		return buf, pending
	}
	if isSpaceRune(r) {
		if isNewlineRune(r) {
			pending = '\n'
		} else if pending == 0 {
			pending = ' '
		}
		return buf, pending
	}
	if pending != 0 {
		buf = append(buf, pending)
		pending = 0
	}
	if r < utf8.RuneSelf {
		return append(buf, byte(r)), 0
	}
	return utf8.AppendRune(buf, r), 0
}

// normalizeText is normalize that also reports whether s held zero-width
// characters.
func normalizeText(s string, zwAsSpace bool) (string, bool) {
	if !zwAsSpace && asciiClean(s) {
		return s, false
	}
	buf := make([]byte, 0, len(s))
	sawZW := false
	var pending byte // ' ' or '\n' when whitespace is waiting to be written
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch asciiClass[c] {
			case classKeep:
				j := i + 1
				for j < len(s) && asciiClass[s[j]] == classKeep {
					j++
				}
				if pending != 0 {
					buf = append(buf, pending)
					pending = 0
				}
				buf = append(buf, s[i:j]...)
				i = j
			case classUpper:
				if pending != 0 {
					buf = append(buf, pending)
					pending = 0
				}
				buf = append(buf, c+'a'-'A')
				i++
			case classSpace:
				if pending == 0 {
					pending = ' '
				}
				i++
			case classNewline:
				pending = '\n'
				i++
			default: // control characters
				i++
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r == utf8.RuneError && size == 1 {
			continue
		}
		if isZeroWidth(r) {
			sawZW = true
			if zwAsSpace {
				if pending == 0 {
					pending = ' '
				}
				continue
			}
		}
		if d := norm.NFKD.PropertiesString(s[i-size : i]).Decomposition(); d != nil {
			// Compatibility forms and accents: "ｉ" is "i", "é" is "e".
			for _, x := range string(d) {
				buf, pending = appendFolded(buf, pending, x)
			}
			continue
		}
		buf, pending = appendFolded(buf, pending, r)
	}
	if pending != 0 {
		buf = append(buf, pending)
	}
	return string(buf), sawZW
}

// Classes of ASCII bytes for normalisation.
const (
	classKeep uint8 = iota
	classUpper
	classSpace
	classNewline
	classDrop
	classNonASCII
)

// asciiClass classifies every byte value; bytes of multi-byte characters
// are classNonASCII.
var asciiClass = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c >= utf8.RuneSelf:
			t[c] = classNonASCII
		case c >= 'A' && c <= 'Z':
			t[c] = classUpper
		case c == ' ' || c == '\t':
			t[c] = classSpace
		case c == '\n' || c == '\r' || c == '\v' || c == '\f':
			t[c] = classNewline
		case c < 0x20 || c == 0x7f:
			t[c] = classDrop
		}
	}
	return t
}()

// asciiClean reports whether s is already in normal form: ASCII, no
// uppercase, no control characters but '\n', no whitespace runs.
func asciiClean(s string) bool {
	prevSpace := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf, c >= 'A' && c <= 'Z', c == 0x7f:
			return false
		case c == ' ' || c == '\n':
			if prevSpace {
				return false
			}
			prevSpace = true
			continue
		case c < 0x20:
			return false
		}
		prevSpace = false
	}
	return true
}

// isZeroWidth reports a character that may stand for nothing or for a
// word break: zero-width ones, and the marks a worker puts for what a
// command printed that is no text (the control pictures, ␀ for a NUL;
// U+FFFD for an invalid byte). Both readings are scanned.
func isZeroWidth(r rune) bool {
	return r >= 0x200b && r <= 0x200f || r >= 0x2060 && r <= 0x2064 || r == 0xfeff || r == 0x180e ||
		r >= 0x2400 && r <= 0x241f || r == 0x2421 || r == utf8.RuneError
}

func isSpaceRune(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || r >= '\t' && r <= '\r'
	}
	return unicode.IsSpace(r)
}

func isNewlineRune(r rune) bool {
	return r == '\n' || r == '\r' || r == '\v' || r == '\f' || r == 0x85 || r == 0x2028 || r == 0x2029
}

// fold maps one rune to its normal form, or -1 to drop it.
func fold(r rune) rune {
	if r < utf8.RuneSelf {
		switch {
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		case r == 0x7f, r < 0x20 && !isSpaceRune(r):
			return -1
		}
		return r
	}
	switch {
	case isInvisible(r):
		return -1
	case r >= 0x2400 && r <= 0x241f, r == 0x2421, r == utf8.RuneError: // isZeroWidth
		return -1
	case r >= 0xe0020 && r <= 0xe007e: // tag characters carry hidden ASCII
		return fold(r - 0xe0000)
	case r >= 0xe0000 && r <= 0xe007f:
		return -1
	case r >= 0xff01 && r <= 0xff5e: // full-width ASCII
		return fold(r - 0xfee0)
	case r == 0x3000:
		return ' '
	case r >= 0x1d400 && r <= 0x1d6a3: // mathematical alphanumeric letters
		return 'a' + (r-0x1d400)%52%26
	case r >= 0x1d7ce && r <= 0x1d7ff: // mathematical digits
		return '0' + (r-0x1d7ce)%10
	case r >= 0x24b6 && r <= 0x24cf: // circled capitals
		return 'a' + r - 0x24b6
	case r >= 0x24d0 && r <= 0x24e9: // circled small letters
		return 'a' + r - 0x24d0
	case r >= 0x249c && r <= 0x24b5: // parenthesized small letters
		return 'a' + r - 0x249c
	case r >= 0x1f130 && r <= 0x1f149: // squared capitals
		return 'a' + r - 0x1f130
	case r >= 0x1f150 && r <= 0x1f169: // negative circled capitals
		return 'a' + r - 0x1f150
	case r >= 0x1f170 && r <= 0x1f189: // negative squared capitals
		return 'a' + r - 0x1f170
	case r >= 0x1f1e6 && r <= 0x1f1ff: // regional indicators
		return 'a' + r - 0x1f1e6
	}
	l := unicode.ToLower(r)
	if m, ok := confusables[l]; ok {
		return m
	}
	return l
}

// isInvisible reports format and joiner characters that render as nothing
// and are used to split words so they escape matching, plus the Latin
// combining diacritics ("ïgnore").
func isInvisible(r rune) bool {
	switch {
	case r >= 0x200b && r <= 0x200f, r >= 0x202a && r <= 0x202e,
		r >= 0x2060 && r <= 0x2064, r >= 0x2066 && r <= 0x2069,
		r >= 0xfe00 && r <= 0xfe0f, r >= 0xe0100 && r <= 0xe01ef,
		r >= 0x0300 && r <= 0x036f, r >= 0x1ab0 && r <= 0x1aff,
		r >= 0x1dc0 && r <= 0x1dff, r >= 0x20d0 && r <= 0x20ff,
		r >= 0xfe20 && r <= 0xfe2f, r >= 0x180b && r <= 0x180e,
		r >= 0x1bca0 && r <= 0x1bca3:
		return true
	}
	switch r {
	case 0xfeff, 0x00ad, 0x034f, 0x061c, 0x115f, 0x1160, 0x17b4, 0x17b5, 0x3164, 0xffa0:
		return true
	}
	return false
}

// confusables maps lowercase look-alikes to the ASCII they imitate.
var confusables = map[rune]rune{
	// Cyrillic
	'а': 'a', 'в': 'b', 'е': 'e', 'ё': 'e', 'і': 'i', 'ї': 'i', 'ј': 'j',
	'к': 'k', 'м': 'm', 'н': 'h', 'о': 'o', 'р': 'p', 'с': 'c', 'т': 't',
	'у': 'y', 'х': 'x', 'ѕ': 's', 'ԁ': 'd', 'ԛ': 'q', 'ԝ': 'w', 'һ': 'h',
	'ӏ': 'l', 'ɡ': 'g', 'ո': 'n', 'ս': 'u', 'օ': 'o', 'հ': 'h',
	// Greek
	'α': 'a', 'β': 'b', 'ε': 'e', 'ι': 'i', 'κ': 'k', 'ν': 'v', 'ο': 'o',
	'ρ': 'p', 'τ': 't', 'υ': 'u', 'χ': 'x', 'γ': 'y', 'η': 'n', 'ω': 'w',
	// Latin look-alikes and letterlike symbols
	'ı': 'i', 'ℓ': 'l', 'ſ': 's', 'ℯ': 'e', 'ℊ': 'g', 'ℎ': 'h', 'ℴ': 'o',
	'ℹ': 'i', 'ⅰ': 'i', 'ⅼ': 'l', 'ⅽ': 'c', 'ⅾ': 'd', 'ⅿ': 'm', 'ⅴ': 'v',
	'ⅹ': 'x',
	// small capitals
	'ᴀ': 'a', 'ʙ': 'b', 'ᴄ': 'c', 'ᴅ': 'd', 'ᴇ': 'e', 'ɢ': 'g', 'ʜ': 'h',
	'ɪ': 'i', 'ᴊ': 'j', 'ᴋ': 'k', 'ʟ': 'l', 'ᴍ': 'm', 'ɴ': 'n', 'ᴏ': 'o',
	'ᴘ': 'p', 'ʀ': 'r', 'ꜱ': 's', 'ᴛ': 't', 'ᴜ': 'u', 'ᴠ': 'v', 'ᴡ': 'w',
	'ʏ': 'y', 'ᴢ': 'z',
	// punctuation
	'‘': '\'', '’': '\'', '‛': '\'', '′': '\'', 'ʼ': '\'', '“': '"', '”': '"',
	'‐': '-', '‑': '-', '‒': '-', '–': '-', '—': '-', '―': '-', '−': '-',
	'﹤': '<', '﹥': '>', '‹': '<', '›': '>',
}
