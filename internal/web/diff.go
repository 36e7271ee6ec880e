package web

import (
	"strings"

	"github.com/airlockhq/airlock/web/templates"
)

// maxDiffLines bounds the documents lineDiff compares (its table is
// quadratic); policies are far smaller.
const maxDiffLines = 3000

// lineDiff returns the lines of a and b as a diff: unchanged lines, lines
// only in a ('-') and lines only in b ('+'), from a longest common
// subsequence.
func lineDiff(a, b string) []templates.DiffLine {
	x, y := splitLines(a), splitLines(b)
	if len(x) > maxDiffLines || len(y) > maxDiffLines {
		out := make([]templates.DiffLine, 0, len(x)+len(y))
		for _, l := range x {
			out = append(out, templates.DiffLine{Op: '-', Text: l})
		}
		for _, l := range y {
			out = append(out, templates.DiffLine{Op: '+', Text: l})
		}
		return out
	}
	// lcs[i][j] is the LCS length of x[i:] and y[j:].
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	out := make([]templates.DiffLine, 0, len(x)+len(y))
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		switch {
		case x[i] == y[j]:
			out = append(out, templates.DiffLine{Op: ' ', Text: x[i]})
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, templates.DiffLine{Op: '-', Text: x[i]})
			i++
		default:
			out = append(out, templates.DiffLine{Op: '+', Text: y[j]})
			j++
		}
	}
	for ; i < len(x); i++ {
		out = append(out, templates.DiffLine{Op: '-', Text: x[i]})
	}
	for ; j < len(y); j++ {
		out = append(out, templates.DiffLine{Op: '+', Text: y[j]})
	}
	return out
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
