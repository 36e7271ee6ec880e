package risk

import (
	"html"
	"strconv"
	"strings"
	"unicode/utf8"
)

// injectionWords maps each anchor or need word to the rules (a bit per rule
// index) it anchors or satisfies; anchorBytes does the same for symbol
// anchors. ruleNeeds marks the rules that have need words. wordPrefix marks
// the two-letter prefixes of all those words, so most words of ordinary
// text are skipped without a map lookup.
var (
	injectionWords = map[string]wordRules{}
	anchorBytes    [256]uint32
	ruleNeeds      uint32
	wordPrefix     [26 * 26]bool
)

// wordRules says which rules a word anchors and which it satisfies.
type wordRules struct{ anchor, need uint32 }

// wordAt is a word (or symbol) of the text and the rules it anchors or
// satisfies.
type wordAt struct {
	pos  int
	mask uint32
}

func init() {
	if len(injectionRules) > 32 {
		panic("risk: too many injection rules for the rule bitmask")
	}
	addWord := func(w string, anchor, need uint32) {
		wr := injectionWords[w]
		wr.anchor |= anchor
		wr.need |= need
		injectionWords[w] = wr
		if len(w) >= 2 && isLower(w[0]) && isLower(w[1]) {
			wordPrefix[int(w[0]-'a')*26+int(w[1]-'a')] = true
		}
	}
	for i, r := range injectionRules {
		bit := uint32(1) << i
		for _, a := range r.anchors {
			if isLetter(a[0]) {
				addWord(a, bit, 0)
			} else {
				anchorBytes[a[0]] |= bit
			}
		}
		for _, w := range r.need {
			addWord(w, 0, bit)
		}
		if len(r.need) > 0 {
			ruleNeeds |= bit
		}
	}
}

// lookupWord returns the rules a word of normalised text anchors or
// satisfies.
func lookupWord(w string) wordRules {
	if len(w) < 2 || len(w) > 16 || !isLower(w[0]) || !isLower(w[1]) || !wordPrefix[int(w[0]-'a')*26+int(w[1]-'a')] {
		return wordRules{}
	}
	return injectionWords[w]
}

// injectionWindow bounds the text after an anchor that a pattern can span.
const injectionWindow = 240

// lineWindow bounds how much text a role-marker match looks at.
const lineWindow = 320

// maxSnippet bounds the quoted text in a hit description.
const maxSnippet = 80

// ScanInjection scans one string for prompt-injection patterns and returns
// human-readable descriptions of the hits (nil if clean), each the matched
// text quoted, e.g. "\"ignore previous instructions\"", with a note when it
// was found only after decoding ("(base64-encoded)"). The string is
// normalised first (case, invisible characters, look-alike letters,
// whitespace); base64 blobs, percent-encoding and HTML entities are decoded
// once and rescanned. At most the first 1 MiB of s is scanned. Should the
// scanner itself fail, the string is reported as a hit rather than as clean.
func ScanInjection(s string) (hits []string) {
	defer func() {
		if recover() != nil {
			hits = []string{"scanner error: treated as a possible injection"}
		}
	}()
	if len(s) > maxScanBytes {
		s = truncateUTF8(s, maxScanBytes)
	}
	norm, zw := normalizeText(s, false)
	return scanInjection(s, norm, zw)
}

// scanInjection scans raw, whose normal form is norm; zw tells whether raw
// holds zero-width characters.
func scanInjection(raw, norm string, zw bool) []string {
	var hits []string
	hits = matchInjection(norm, "", hits)
	if zw {
		hits = matchInjection(normalize(raw, true), "", hits)
	}
	if strings.IndexByte(raw, '%') >= 0 {
		if dec, ok := percentDecode(raw); ok {
			hits = matchInjection(normalize(dec, false), " (url-encoded)", hits)
		}
	}
	if strings.IndexByte(raw, '&') >= 0 && strings.IndexByte(raw, ';') >= 0 {
		if dec := html.UnescapeString(raw); dec != raw {
			hits = matchInjection(normalize(dec, false), " (html-escaped)", hits)
		}
	}
	return scanBase64(raw, hits)
}

// matchInjection appends a description for every rule that matches text:
// a fake role marker first, then the others in the order the matches start.
// Each rule reports at most once. One pass
// over the words of the text finds the anchors and the need words; a
// pattern then runs, anchored, only where one of its anchors has one of its
// need words within reach.
func matchInjection(text, note string, hits []string) []string {
	var abuf, nbuf [32]wordAt
	anchors, needs := abuf[:0], nbuf[:0]
	roleFound := false
	for i := 0; i < len(text); {
		if !roleFound && (i == 0 || text[i-1] == '\n') {
			if m := matchRoleLine(text, i); m != "" {
				hits = appendHit(hits, snippet(m), note)
				roleFound = true
			}
		}
		c := text[i]
		if !alnumBytes[c] {
			if mask := anchorBytes[c]; mask != 0 {
				anchors = append(anchors, wordAt{i, mask})
			}
			i++
			continue
		}
		j := i + 1
		for j < len(text) && alnumBytes[text[j]] {
			j++
		}
		if wr := lookupWord(text[i:j]); wr != (wordRules{}) {
			if wr.anchor != 0 {
				anchors = append(anchors, wordAt{i, wr.anchor})
			}
			if wr.need != 0 {
				needs = append(needs, wordAt{i, wr.need})
			}
		}
		i = j
	}
	var found uint32
	n := 0 // first need after the current anchor
	for _, a := range anchors {
		for n < len(needs) && needs[n].pos <= a.pos {
			n++
		}
		near := ^ruleNeeds
		for k := n; k < len(needs) && needs[k].pos < a.pos+injectionWindow; k++ {
			near |= needs[k].mask
		}
		if mask := a.mask & near &^ found; mask != 0 {
			found, hits = tryRules(text, a.pos, mask, found, note, hits)
		}
	}
	return hits
}

// tryRules runs the rules in mask anchored at text[i].
func tryRules(text string, i int, mask, found uint32, note string, hits []string) (uint32, []string) {
	end := min(len(text), i+injectionWindow)
	for end < len(text) && isWordByte(text[end]) && end-i < injectionWindow+64 {
		end++
	}
	for k := range injectionRules {
		if mask&(1<<k) == 0 {
			continue
		}
		if m := injectionRules[k].re.FindString(text[i:end]); m != "" {
			found |= 1 << k
			hits = appendHit(hits, snippet(m), note)
		}
	}
	return found, hits
}

// matchRoleLine tries roleLine on the line starting at text[i] (and the
// line after it, for "System:\nyou ...").
func matchRoleLine(text string, i int) string {
	k := i
	for k < len(text) && k-i < 16 && strings.IndexByte(" \t>*", text[k]) >= 0 {
		k++
	}
	if k >= len(text) {
		return ""
	}
	if text[k] != '#' {
		e := k
		for e < len(text) && isLetter(text[e]) {
			e++
		}
		if !roleWords[text[k:e]] {
			return ""
		}
	}
	end := len(text)
	if n := strings.IndexByte(text[k:], '\n'); n >= 0 {
		end = k + n + 1
		if n2 := strings.IndexByte(text[end:], '\n'); n2 >= 0 {
			end += n2 + 1
		} else {
			end = len(text)
		}
	}
	return roleLine.FindString(text[i:min(end, i+lineWindow)])
}

// appendHit adds `"snippet"note` unless that snippet is already reported.
func appendHit(hits []string, snip, note string) []string {
	q := strconv.Quote(snip)
	for _, h := range hits {
		if strings.HasPrefix(h, q) {
			return hits
		}
	}
	return append(hits, q+note)
}

// snippet trims a match for display: one line, at most maxSnippet bytes.
func snippet(m string) string {
	m = strings.TrimSpace(strings.ReplaceAll(m, "\n", " "))
	if len(m) > maxSnippet {
		m = truncateUTF8(m, maxSnippet) + "…"
	}
	return m
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// percentDecode decodes %XX escapes leniently (malformed ones stay as they
// are) and reports whether anything changed.
func percentDecode(s string) (string, bool) {
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			if b == nil {
				b = make([]byte, 0, len(s))
				b = append(b, s[:i]...)
			}
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		if b != nil {
			b = append(b, s[i])
		}
	}
	if b == nil {
		return s, false
	}
	return string(b), true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
