package risk

import (
	"fmt"
	"iter"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/airlockhq/airlock/internal/udiff"
)

// HiddenChar is a character a reader does not see as itself: a
// bidirectional control that reorders the text around it, an invisible
// (format, joiner, filler) character, or a control character. "report
// \u202efdp.exe" reads as "reportexe.pdf"; keys "amount" and
// "amount\u200b" read as one.
type HiddenChar struct {
	Rune rune
	// Name is the Unicode name ("RIGHT-TO-LEFT OVERRIDE").
	Name string
	// Kind is "bidi", "invisible" or "control".
	Kind string
}

// Label names the character for a reason: "U+202E RIGHT-TO-LEFT OVERRIDE
// (bidi)".
func (h HiddenChar) Label() string { return fmt.Sprintf("U+%04X %s (%s)", h.Rune, h.Name, h.Kind) }

// Marker is how the console shows the character in its place: "⟨U+202E⟩".
func (h HiddenChar) Marker() string { return fmt.Sprintf("⟨U+%04X⟩", h.Rune) }

// hiddenNames names the hidden characters a reviewer is likely to meet.
var hiddenNames = map[rune]string{
	0x00: "NULL", 0x08: "BACKSPACE", 0x0d: "CARRIAGE RETURN", 0x1b: "ESCAPE", 0x7f: "DELETE",
	0x00ad: "SOFT HYPHEN", 0x034f: "COMBINING GRAPHEME JOINER", 0x061c: "ARABIC LETTER MARK",
	0x115f: "HANGUL CHOSEONG FILLER", 0x1160: "HANGUL JUNGSEONG FILLER",
	0x17b4: "KHMER VOWEL INHERENT AQ", 0x17b5: "KHMER VOWEL INHERENT AA",
	0x180e: "MONGOLIAN VOWEL SEPARATOR",
	0x200b: "ZERO WIDTH SPACE", 0x200c: "ZERO WIDTH NON-JOINER", 0x200d: "ZERO WIDTH JOINER",
	0x200e: "LEFT-TO-RIGHT MARK", 0x200f: "RIGHT-TO-LEFT MARK",
	0x2028: "LINE SEPARATOR", 0x2029: "PARAGRAPH SEPARATOR",
	0x202a: "LEFT-TO-RIGHT EMBEDDING", 0x202b: "RIGHT-TO-LEFT EMBEDDING", 0x202c: "POP DIRECTIONAL FORMATTING",
	0x202d: "LEFT-TO-RIGHT OVERRIDE", 0x202e: "RIGHT-TO-LEFT OVERRIDE",
	0x2060: "WORD JOINER", 0x2061: "FUNCTION APPLICATION", 0x2062: "INVISIBLE TIMES",
	0x2063: "INVISIBLE SEPARATOR", 0x2064: "INVISIBLE PLUS",
	0x2066: "LEFT-TO-RIGHT ISOLATE", 0x2067: "RIGHT-TO-LEFT ISOLATE", 0x2068: "FIRST STRONG ISOLATE",
	0x2069: "POP DIRECTIONAL ISOLATE",
	0x3164: "HANGUL FILLER", 0xfeff: "ZERO WIDTH NO-BREAK SPACE", 0xffa0: "HALFWIDTH HANGUL FILLER",
}

// Hidden reports whether r is a hidden character, and which. Tab and line
// feed are not: they are seen as what they are.
func Hidden(r rune) (HiddenChar, bool) {
	if r < utf8.RuneSelf && r >= 0x20 && r != 0x7f || r == '\t' || r == '\n' {
		return HiddenChar{}, false // the common case first
	}
	name := hiddenNames[r]
	switch {
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return HiddenChar{Rune: r, Name: name, Kind: "bidi"}, true
	case unicode.Is(unicode.Cc, r):
		if name == "" {
			name = "CONTROL CHARACTER"
		}
		return HiddenChar{Rune: r, Name: name, Kind: "control"}, true
	case unicode.Is(unicode.Cf, r), name != "":
		if name == "" {
			name = "FORMAT CHARACTER"
			if r >= 0xe0000 && r <= 0xe007f {
				name = "TAG CHARACTER"
			}
		}
		return HiddenChar{Rune: r, Name: name, Kind: "invisible"}, true
	}
	return HiddenChar{}, false
}

// HasHidden reports whether s holds a hidden character.
func HasHidden(s string) bool {
	for _, r := range s {
		if _, ok := Hidden(r); ok {
			return true
		}
	}
	return false
}

// Marked is s with each hidden character replaced by its marker
// (HiddenChar.Marker: "⟨U+202E⟩"), for text shown on one line or outside
// the console (a notification): "report\u202efdp.exe" reads
// report⟨U+202E⟩fdp.exe, not report…exe.pdf.
func Marked(s string) string {
	if !HasHidden(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for _, r := range s {
		if h, ok := Hidden(r); ok {
			b.WriteString(h.Marker())
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Weights of hidden characters in the arguments: their floors (medium,
// high) are what they add; an injection hidden with them is scored as the
// injection.
const (
	weightHidden = 0
	weightBidi   = 10
)

// hiddenSignals flags the hidden characters of one string (a value, or a
// map key when mapKey): a bidi control makes the call at least high, any
// other hidden character at least medium. The reason names the character
// and where it is.
func (a *assessor) hiddenSignals(s string, w *walker, mapKey bool) {
	var first HiddenChar
	n := 0
	bidi := false
	for _, r := range s {
		h, ok := Hidden(r)
		if !ok {
			continue
		}
		if n == 0 || h.Kind == "bidi" && first.Kind != "bidi" {
			first = h
		}
		bidi = bidi || h.Kind == "bidi"
		n++
	}
	if n == 0 {
		return
	}
	where := w.pathString()
	if mapKey {
		where = "a key at " + where
	}
	r := where + " contains " + first.Label()
	if n > 1 {
		r += fmt.Sprintf(" (+%d more hidden characters)", n-1)
	}
	if bidi {
		a.signal(kindBidi, groupText, weightBidi, High, r)
		return
	}
	a.signal(kindHidden, groupText, weightHidden, Medium, r)
}

// PreviewFlags are what a merge preview's diff hides from a reader.
type PreviewFlags struct {
	// Reasons name each file and what it holds, for the action's risk.
	Reasons []string
	// Floor is the least level the action has with them ("" for none).
	Floor Level
}

// maxPreviewReasons bounds the reasons one diff adds.
const maxPreviewReasons = 8

// Control pictures stand in a diff for the bytes JSON cannot carry as
// text (internal/worktree writes NUL as U+2400 and so on); U+FFFD for
// bytes that are not UTF-8.
const (
	controlPictures    = 0x2400
	controlPictureDel  = 0x2421
	replacementCharRep = utf8.RuneError
)

// DiffFlags reads a unified diff as internal/worktree renders it and flags,
// per file, changed lines holding NUL or other control bytes or invalid
// UTF-8 (binary content a reader cannot see), bidi controls or invisible
// characters, and command lines that are risky to merge (a download piped
// into a shell). Control bytes and bidi controls make the merge at least
// high, the rest at least medium.
func DiffFlags(diff string) PreviewFlags {
	var f flagger
	add := f.adder("more hidden content in the diff not listed")
	for _, l := range udiff.Parse(diff) {
		// Only changed lines: file headers and hunk lines are read as
		// git apply reads them (udiff), so an added line whose text starts
		// with "++" is an added line, not a "+++" header.
		if l.Kind != udiff.Added && l.Kind != udiff.Removed {
			continue
		}
		change, text := "an added", l.Text[1:]
		if l.Kind == udiff.Removed {
			change = "a removed"
		}
		var control, bidi, invisible string
		for _, r := range text {
			switch {
			case r >= controlPictures && r < controlPictures+0x20 && r != controlPictures+'\r' || r == controlPictureDel:
				// worktree writes control bytes as their pictures; a
				// carriage return (␍) is a line end, not hidden
				if control == "" {
					control = "control byte " + byteName(pictureByte(r))
				}
			case r == replacementCharRep:
				if control == "" {
					control = "bytes that are not UTF-8"
				}
			case r == '\r': // CRLF line ends: seen as such, not hidden
			default:
				if h, ok := Hidden(r); ok {
					if h.Kind == "bidi" && bidi == "" {
						bidi = h.Label()
					} else if h.Kind != "bidi" && invisible == "" {
						invisible = h.Label()
					}
				}
			}
		}
		where := "merge preview: " + l.File + ": " + change + " line"
		if control != "" {
			add(where+" holds "+control+": binary content", High)
		}
		if bidi != "" {
			add(where+" contains "+bidi, High)
		}
		if invisible != "" {
			add(where+" contains "+invisible, Medium)
		}
		if l.Kind == udiff.Added {
			scanCommand(text, false, func(h cmdHit) {
				if h.floor.Rank() >= High.Rank() {
					add(where+": "+h.reason, h.floor)
				}
			})
		}
	}
	return f.flags()
}

// flagger collects the reasons of PreviewFlags: each once, at most
// maxPreviewReasons, and the highest floor.
type flagger struct {
	f    PreviewFlags
	seen map[string]bool
	rank int
}

// adder returns the function adding a reason with its floor; more is the
// reason listed once there are more than maxPreviewReasons.
func (g *flagger) adder(more string) func(reason string, floor Level) {
	g.seen = map[string]bool{}
	return func(reason string, floor Level) {
		if g.seen[reason] {
			return
		}
		g.seen[reason] = true
		if len(g.f.Reasons) < maxPreviewReasons {
			g.f.Reasons = append(g.f.Reasons, reason)
		} else if len(g.f.Reasons) == maxPreviewReasons {
			g.f.Reasons = append(g.f.Reasons, more)
		}
		if floor.Rank() > g.rank {
			g.rank = floor.Rank()
		}
	}
}

func (g *flagger) flags() PreviewFlags {
	f := g.f
	if g.rank > 0 {
		f.Floor = [...]Level{Low, Medium, High, Critical}[g.rank]
	}
	return f
}

// CommandFlags flags the command lines of a command set (file, the file
// that declares it; cmds, each command's name and line) as DiffFlags flags
// an added line of a diff: a line holding control characters (at least
// high), bidi controls (high) or invisible characters (medium), and a
// command line risky to run (a download piped into a shell: high or more).
// Approving a command set approves every command in it, so each is judged
// as if it were the one run.
func CommandFlags(file string, cmds iter.Seq2[string, string]) PreviewFlags {
	var f flagger
	add := f.adder("more risky commands in " + file + " not listed")
	for name, line := range cmds {
		where := fmt.Sprintf("command set %s: command %q", file, name)
		var control, bidi, invisible string
		for _, r := range line {
			h, ok := Hidden(r)
			if !ok {
				continue
			}
			switch {
			case h.Kind == "control" && control == "":
				control = h.Label()
			case h.Kind == "bidi" && bidi == "":
				bidi = h.Label()
			case h.Kind == "invisible" && invisible == "":
				invisible = h.Label()
			}
		}
		if control != "" {
			add(where+" contains "+control, High)
		}
		if bidi != "" {
			add(where+" contains "+bidi, High)
		}
		if invisible != "" {
			add(where+" contains "+invisible, Medium)
		}
		scanCommand(line, false, func(h cmdHit) {
			if h.floor.Rank() >= High.Rank() {
				add(where+": "+h.reason, h.floor)
			}
		})
	}
	return f.flags()
}

// pictureByte is the byte a control picture stands for.
func pictureByte(r rune) byte {
	if r == controlPictureDel {
		return 0x7f
	}
	return byte(r - controlPictures)
}

// byteName names a control byte: "0x00 (NUL)", "0x1B".
func byteName(b byte) string {
	if b == 0 {
		return "0x00 (NUL)"
	}
	return fmt.Sprintf("0x%02X", b)
}

// Raise returns a with reasons added (once: a reason a already lists is
// not added again) and its level at least floor.
func (a Assessment) Raise(reasons []string, floor Level) Assessment {
	out := a
	out.Reasons = append([]string{}, a.Reasons...)
	for _, r := range reasons {
		if !slices.Contains(out.Reasons, r) {
			out.Reasons = append(out.Reasons, r)
		}
	}
	if floor.Valid() && out.Score < minScore(floor) {
		out.Score = minScore(floor)
	}
	out.Level = LevelForScore(out.Score)
	return out
}
