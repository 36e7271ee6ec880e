// Package udiff reads unified diffs (git diff output, or a patch git apply
// takes) line by line, the way git apply does: a line's kind inside a hunk
// comes from its first byte, and a hunk holds exactly the lines its
// "@@ -a,b +c,d @@" header counts. Whoever colours a diff or judges what it
// adds reads it here, so that neither mistakes a changed line for a file
// header: the added line "+++ $(curl … | sh)" is an added line, not a
// "+++ b/file" header.
package udiff

import (
	"strconv"
	"strings"
)

// Kind is what a line of a diff is.
type Kind uint8

const (
	// Other is a line outside any hunk that is neither a header nor
	// starts with '+' or '-' (text git apply skips).
	Other Kind = iota
	// Header is a file header line: "diff --git", the extended headers
	// (index, modes, renames, copies, similarity), the "---"/"+++" pair
	// and "Binary files … differ".
	Header
	// Hunk is a hunk's "@@ -a,b +c,d @@" line.
	Hunk
	// Context is an unchanged line in a hunk.
	Context
	// Added is an added line: one in a hunk starting with '+', or any line
	// outside a hunk starting with '+' that is not a file header.
	Added
	// Removed is a removed line, as Added with '-'.
	Removed
	// NoNewline is "\ No newline at end of file" (or its translation).
	NoNewline
)

// Line is one line of a diff.
type Line struct {
	Kind Kind
	// Text is the line as it stands in the diff, its prefix included.
	Text string
	// File is the file the line belongs to: the new name of the last
	// "diff --git" line (or "+++" header of a patch without one), "" before
	// any.
	File string
}

// gitHeaders start the lines git apply reads as the extended header of a
// "diff --git" (parse_git_diff_header), and the binary ones that end it.
var gitHeaders = []string{
	"--- ", "+++ ", "old mode ", "new mode ", "deleted file mode ", "new file mode ",
	"copy from ", "copy to ", "rename old ", "rename new ", "rename from ", "rename to ",
	"similarity index ", "dissimilarity index ", "index ", "Binary files ", "GIT binary patch",
}

// Parse splits diff into its lines (a last newline ends the last line and
// starts none) and says what each is. It reads any text: a line is a
// header only where a file header can stand (outside a hunk), and where a
// hunk is malformed its lines are read by their first byte, so that no
// line starting with '+' or '-' that git apply would add or remove is
// ever Context, Header or Other.
func Parse(diff string) []Line {
	texts := strings.Split(strings.TrimSuffix(diff, "\n"), "\n")
	out := make([]Line, 0, len(texts))
	var (
		file      string
		gitHeader bool   // in the extended header of a "diff --git"
		inHunk    bool   // in a hunk whose counts have not run out
		oldLeft   uint64 // the hunk's old and new lines still to come
		newLeft   uint64
		plusOK    bool   // the line before was a "--- " header of a pair
		oldName   string // that line's name
		hunkEnded bool   // the line before was a hunk's last
	)
	for i, text := range texts {
		if inHunk {
			kind := hunkLine(text, &oldLeft, &newLeft)
			if kind != Other {
				out = append(out, Line{Kind: kind, Text: text, File: file})
				if oldLeft == 0 && newLeft == 0 {
					inHunk, hunkEnded = false, true
				}
				continue
			}
			// A byte no hunk line starts with: git apply calls the patch
			// corrupt. The hunk ends here; the line is read as any other
			// outside a hunk (it may be the next file's header).
			inHunk = false
		}
		line := Line{Kind: Other, Text: text, File: file}
		afterPlusOK, afterHunk := plusOK, hunkEnded
		plusOK, hunkEnded = false, false
		switch {
		case strings.HasPrefix(text, "diff --git "):
			file = newName(text)
			line.Kind, line.File, gitHeader = Header, file, true
		case strings.HasPrefix(text, "@@ -"):
			gitHeader = false
			if o, n, ok := hunkHeader(text); ok {
				line.Kind, oldLeft, newLeft = Hunk, o, n
				inHunk = o > 0 || n > 0
			}
		case gitHeader && hasAnyPrefix(text, gitHeaders):
			line.Kind = Header
		case strings.HasPrefix(text, "--- ") && i+2 < len(texts) &&
			strings.HasPrefix(texts[i+1], "+++ ") && strings.HasPrefix(texts[i+2], "@@ -"):
			// A patch's own header pair, as git apply finds one
			// (find_header): "--- ", "+++ " and a hunk, in a row.
			line.Kind, plusOK, oldName = Header, true, traditionalName(text, "--- ", "a/")
		case afterPlusOK:
			// texts[i] is the "+++ " of the pair (checked above).
			if file = traditionalName(text, "+++ ", "b/"); file == "/dev/null" {
				file = oldName // a deleted file
			}
			line.Kind, line.File = Header, file
		default:
			gitHeader = false
			switch {
			case strings.HasPrefix(text, "+"):
				line.Kind = Added
			case strings.HasPrefix(text, "-"):
				line.Kind = Removed
			case afterHunk && strings.HasPrefix(text, `\`):
				// git apply takes the marker after a hunk's last line
				// as the hunk's.
				line.Kind = NoNewline
			}
		}
		out = append(out, line)
	}
	return out
}

// hunkLine says what a line inside a hunk is, counting it against the
// hunk's old and new lines left, or Other for a line no hunk holds. As git
// apply, an empty line is an empty context line.
func hunkLine(text string, oldLeft, newLeft *uint64) Kind {
	first := byte(' ')
	if text != "" {
		first = text[0]
	}
	switch first {
	case ' ':
		dec(oldLeft)
		dec(newLeft)
		return Context
	case '+':
		dec(newLeft)
		return Added
	case '-':
		dec(oldLeft)
		return Removed
	case '\\':
		return NoNewline
	}
	return Other
}

// dec counts one line off n, never below zero (a hunk with more lines of
// a kind than its header says is malformed; its lines keep their kinds).
func dec(n *uint64) {
	if *n > 0 {
		*n--
	}
}

// hunkHeader reads the old and new line counts of "@@ -a[,b] +c[,d] @@…"
// (a count left out is 1), as git apply's parse_fragment_header.
func hunkHeader(text string) (oldLines, newLines uint64, ok bool) {
	rest := strings.TrimPrefix(text, "@@ -")
	if oldLines, rest, ok = hunkRange(rest); !ok {
		return 0, 0, false
	}
	if rest, ok = strings.CutPrefix(rest, " +"); !ok {
		return 0, 0, false
	}
	if newLines, rest, ok = hunkRange(rest); !ok {
		return 0, 0, false
	}
	if !strings.HasPrefix(rest, " @@") {
		return 0, 0, false
	}
	return oldLines, newLines, true
}

// hunkRange reads "a[,b]" at the start of s and returns b (1 when left
// out) and what follows.
func hunkRange(s string) (count uint64, rest string, ok bool) {
	_, rest, ok = number(s)
	if !ok {
		return 0, s, false
	}
	count = 1
	if after, found := strings.CutPrefix(rest, ","); found {
		if count, rest, ok = number(after); !ok {
			return 0, s, false
		}
	}
	return count, rest, true
}

// number reads the decimal digits at the start of s; a number too large
// for a uint64 is the largest one (a hunk that long runs to the first
// line no hunk holds).
func number(s string) (n uint64, rest string, ok bool) {
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	if end == 0 {
		return 0, s, false
	}
	n, err := strconv.ParseUint(s[:end], 10, 64)
	if err != nil {
		n = ^uint64(0)
	}
	return n, s[end:], true
}

// newName reads the new name from a "diff --git a/x b/y" line.
func newName(line string) string {
	rest := strings.TrimPrefix(line, "diff --git ")
	if i := strings.LastIndex(rest, " b/"); i >= 0 {
		return rest[i+3:]
	}
	return rest
}

// traditionalName reads the name from a "+++ b/x\t<date>" line (header
// "+++ ", dir "b/") or its "---" line.
func traditionalName(line, header, dir string) string {
	name := strings.TrimPrefix(line, header)
	if i := strings.IndexByte(name, '\t'); i >= 0 {
		name = name[:i]
	}
	return strings.TrimPrefix(name, dir)
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
