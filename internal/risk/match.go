package risk

import (
	"regexp"
	"slices"
	"strings"
)

// A textRule is one pattern with the literal trigger words that must occur
// in the text for the pattern to possibly match. Triggers keep scanning cheap:
// strings.Index runs at memory speed, and the regular expression only runs
// on windows of text around trigger occurrences.
type textRule struct {
	triggers []string
	re       *regexp.Regexp
}

const (
	// smallText is the length up to which a triggered rule runs over the
	// whole text instead of over windows.
	smallText = 512
	// windowBefore and windowAfter bound the text around a trigger that a
	// pattern can span.
	windowBefore = 160
	windowAfter  = 240
	// lineWindow bounds how much text a role-marker match looks at.
	lineWindow = 320
)

// compileRule builds a textRule; {S} in the pattern stands for sep.
func compileRule(triggers []string, pattern string) textRule {
	return textRule{triggers: triggers, re: regexp.MustCompile(expandSep(pattern))}
}

// find returns the first match of the rule in text, or "".
func (r *textRule) find(text string) string {
	if len(text) <= smallText {
		for _, t := range r.triggers {
			if strings.Contains(text, t) {
				return r.re.FindString(text)
			}
		}
		return ""
	}
	var wins [][2]int
	for _, t := range r.triggers {
		for off := 0; ; {
			i := strings.Index(text[off:], t)
			if i < 0 {
				break
			}
			i += off
			wins = append(wins, [2]int{max(0, i-windowBefore), min(len(text), i+len(t)+windowAfter)})
			off = i + len(t)
		}
	}
	if len(wins) == 0 {
		return ""
	}
	slices.SortFunc(wins, func(a, b [2]int) int { return a[0] - b[0] })
	merged := wins[:1]
	for _, w := range wins[1:] {
		last := &merged[len(merged)-1]
		if w[0] <= last[1] {
			last[1] = max(last[1], w[1])
			continue
		}
		merged = append(merged, w)
	}
	for _, w := range merged {
		start, end := w[0], w[1]
		// Widen to word boundaries so \b at a window edge means what it
		// means in the whole text.
		for start > 0 && isWordByte(text[start-1]) && w[0]-start < 64 {
			start--
		}
		for end < len(text) && isWordByte(text[end]) && end-w[1] < 64 {
			end++
		}
		if m := r.re.FindString(text[start:end]); m != "" {
			return m
		}
	}
	return ""
}

func isWordByte(c byte) bool { return wordBytes[c] }

// alnumBytes marks ASCII letters and digits: the words the injection scan
// looks up ("previous___instructions" is two words).
var alnumBytes = func() (t [256]bool) {
	for c := range t {
		b := byte(c)
		t[c] = b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
	}
	return t
}()

// wordBytes marks ASCII letters, digits and '_' (regexp's \w).
var wordBytes = func() (t [256]bool) {
	for c := range t {
		b := byte(c)
		t[c] = b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_'
	}
	return t
}()
