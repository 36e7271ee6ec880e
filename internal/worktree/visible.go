package worktree

import (
	"strings"
	"unicode/utf8"
)

// VisibleDiff makes a git diff's bytes text that JSON, Postgres and a
// browser all carry and show as it is: NUL and the other control bytes but
// tab and line feed become their Unicode control pictures (NUL as ␀, ESC
// as ␛, DEL as ␡, a carriage return as ␍), and bytes that are not UTF-8
// become U+FFFD. Nothing else changes. A NUL could otherwise not be stored
// at all (jsonb refuses \u0000) and a carriage return would hide the start
// of its line; risk.DiffFlags flags what these pictures stand for.
func VisibleDiff(diff string) string {
	clean := true
	for i := 0; i < len(diff); i++ {
		if c := diff[i]; c < 0x20 && c != '\t' && c != '\n' || c == 0x7f || c >= utf8.RuneSelf {
			clean = false
			break
		}
	}
	if clean {
		return diff
	}
	var b strings.Builder
	b.Grow(len(diff) + 16)
	for i := 0; i < len(diff); {
		c := diff[i]
		switch {
		case c == '\t' || c == '\n' || c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
			i++
		case c < 0x20:
			b.WriteRune(0x2400 + rune(c))
			i++
		case c == 0x7f:
			b.WriteRune(0x2421)
			i++
		default:
			r, n := utf8.DecodeRuneInString(diff[i:])
			b.WriteRune(r) // U+FFFD for a byte that is not UTF-8
			i += n
		}
	}
	return b.String()
}
