package templates

import (
	"fmt"
	"unicode/utf8"

	"github.com/airlockhq/airlock/internal/risk"
)

// Piece is a run of text as the console shows it: plain text, or one
// hidden character shown as its marker.
type Piece struct {
	Text string
	// Mark is the marker shown in the character's place ("⟨U+202E⟩"); ""
	// for plain text.
	Mark string
	// Title names the character ("U+202E RIGHT-TO-LEFT OVERRIDE (bidi)").
	Title string
}

// Visible splits s so that every hidden character (risk.Hidden: bidi
// controls, invisible and control characters) is shown as a marker instead
// of acting on the text around it: "report\u202efdp.exe" shows as
// report⟨U+202E⟩fdp.exe, not report…exe.pdf, and the key "amount\u200b" as
// amount⟨U+200B⟩.
func Visible(s string) []Piece { return pieces(s, false) }

// VisibleDiffLine is Visible for a line of a diff, which also marks the
// stand-ins internal/worktree writes for bytes text cannot carry: control
// pictures (␀ for NUL …), shown as ⟨NUL⟩, ⟨0x1B⟩…, and U+FFFD, shown as
// ⟨not UTF-8⟩.
func VisibleDiffLine(s string) []Piece { return pieces(s, true) }

func pieces(s string, diff bool) []Piece {
	var out []Piece
	start := 0
	for i, r := range s {
		var p Piece
		if h, ok := risk.Hidden(r); ok {
			p = Piece{Mark: h.Marker(), Title: h.Label()}
		} else if diff && (r >= 0x2400 && r < 0x2420 || r == 0x2421) {
			b := byte(r - 0x2400)
			if r == 0x2421 {
				b = 0x7f
			}
			p = Piece{Mark: fmt.Sprintf("⟨0x%02X⟩", b), Title: fmt.Sprintf("control byte 0x%02X in the file", b)}
			if b == 0 {
				p.Mark = "⟨NUL⟩"
			}
		} else if diff && r == utf8.RuneError {
			p = Piece{Mark: "⟨not UTF-8⟩", Title: "a byte that is not UTF-8 in the file"}
		} else {
			continue
		}
		if start < i {
			out = append(out, Piece{Text: s[start:i]})
		}
		out = append(out, p)
		_, n := utf8.DecodeRuneInString(s[i:]) // 1 for a byte that is not UTF-8
		start = i + n
	}
	if start < len(s) {
		out = append(out, Piece{Text: s[start:]})
	}
	return out
}

// VisibleString is s with each hidden character replaced by its marker,
// for attributes (a title) and one-line summaries (risk.Marked).
func VisibleString(s string) string { return risk.Marked(s) }
