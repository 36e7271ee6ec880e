package risk

import (
	"fmt"
	"strings"
)

// maxJoinElems bounds how many elements of one list are joined for the
// injection scan.
const maxJoinElems = 256

// listInjection scans the strings of a list read together: joined with
// spaces, so a phrase split across elements ("ignore all previous",
// "instructions") is seen whole, and joined without a separator, so a
// base64 blob cut into pieces decodes. Hits that one element holds on its
// own are left to that element's scan.
func (a *assessor) listInjection(w *walker, l list) {
	n := min(l.len(), maxJoinElems)
	if n < 2 {
		return
	}
	size, strs := 0, 0
	for i := 0; i < n; i++ {
		if s, ok := l.str(i); ok {
			size += len(s) + 1
			strs++
		}
	}
	if strs < 2 || a.joinBudget+2*size > maxJoin {
		return
	}
	a.joinBudget += 2 * size
	var spacedB, bareB strings.Builder
	spacedB.Grow(size)
	for i := 0; i < n; i++ {
		if s, ok := l.str(i); ok {
			if spacedB.Len() > 0 {
				spacedB.WriteByte(' ')
			}
			spacedB.WriteString(s)
		}
	}
	spaced := spacedB.String()
	norm, zw := normalizeText(spaced, false)
	hits := a.inj.scan(spaced, norm, zw)
	if size-strs >= minBase64Run {
		bareB.Grow(size)
		for i := 0; i < n; i++ {
			if s, ok := l.str(i); ok {
				bareB.WriteString(s)
			}
		}
		hits = a.inj.scanBase64(bareB.String(), "", 0, hits)
	}
	if len(hits) == 0 {
		return
	}
	elems := make([]string, 0, strs)
	for i := 0; i < n; i++ {
		if s, ok := l.str(i); ok {
			elems = append(elems, s)
		}
	}
	var fresh []string
	for _, h := range hits {
		if !inOneElement(h, elems) {
			fresh = append(fresh, h)
		}
	}
	if len(fresh) == 0 {
		return
	}
	a.injection = true
	r := "possible prompt injection across the elements of " + w.pathString() + ": " + fresh[0]
	if len(fresh) > 1 {
		r += fmt.Sprintf(" (+%d more)", len(fresh)-1)
	}
	a.signal(kindInjection, groupInjection, weightInjection, High, r)
}

// inOneElement reports whether the text a hit quotes is found in one
// element by itself.
func inOneElement(hit string, elems []string) bool {
	end := strings.LastIndexByte(hit, '"')
	if !strings.HasPrefix(hit, `"`) || end <= 0 {
		return false
	}
	snip := strings.TrimSuffix(hit[1:end], "…")
	for _, e := range elems {
		if len(e) >= len(snip) && strings.Contains(normalize(e, false), snip) {
			return true
		}
	}
	return false
}
