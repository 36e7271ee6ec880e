package risk

import (
	"html"
	"strconv"
	"strings"
	"unicode/utf8"
)

// injectionWords maps each anchor or need word to the rules (a bit per rule
// index) it anchors or satisfies; anchorBytes does the same for symbol
// anchors. ruleNeeds marks the rules that have need words. wordPrefix2 and
// wordPrefix3 mark the two-letter words and the three-letter prefixes of
// longer ones, so most words of ordinary text are skipped without a map
// lookup.
var (
	injectionWords = map[string]wordRules{}
	anchorBytes    [256]uint64
	ruleNeeds      uint64
	wordPrefix2    [26 * 26]bool
	wordPrefix3    [26 * 26 * 26]bool
)

// wordRules says which rules a word anchors and which it satisfies, and
// which obfuscations (encRot13, encReversed) it is a telltale of.
type wordRules struct {
	anchor, need uint64
	enc          uint8
}

// Obfuscations whose telltale words the word pass notices: the rot13 or
// reversed spelling of a key word ("vtaber", "snoitcurtsni") makes the scan
// try the decoded text, which costs nothing on text without them.
// encLeet and encSpaced are set by the same pass for a word mixing letters
// and digits that reads as a key word in leetspeak, and for a run of
// single letters.
const (
	encRot13 uint8 = 1 << iota
	encReversed
	encLeet
	encSpaced
	encLeetSymbol // a leetspeak symbol ("@", "$", "!") before a letter
	encBase64     // a run of base64 characters long enough to decode
	encHex        // a long hex word, \x or 0x escapes, or a run of hex pairs
	encSplit      // a key word split by a hyphen, dot or underscore ("ig-nore")
)

// Byte classes for the word pass.
const (
	clDigit uint8 = 1 << iota
	clLetter
	clBase64Sym // '+', '/', '-', '_': base64 characters that split words
	clHexSep    // what may separate hex pairs: ' ', ':', ',', '-', '\\'
)

var byteClass = func() (t [256]uint8) {
	for c := range t {
		b := byte(c)
		switch {
		case b >= '0' && b <= '9':
			t[c] = clDigit
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z':
			t[c] = clLetter
		}
		if strings.IndexByte("+/-_", b) >= 0 {
			t[c] |= clBase64Sym
		}
		if strings.IndexByte(" :,-\\", b) >= 0 {
			t[c] |= clHexSep
		}
	}
	return t
}()

// minBase64Gate is the run of base64 characters that makes a text worth
// the base64 scan: shorter than minBase64Run, so either half of a blob cut
// in two is enough.
const minBase64Gate = 16

// encTelltales are the words whose rot13 and reversed spellings are
// telltales.
var encTelltales = []string{"ignore", "disregard", "forget", "instructions", "instruction", "prompt",
	"previous", "system", "jailbreak", "override", "reveal", "developer"}

// wordAt is a word (or symbol) of the text and the rules it anchors or
// satisfies.
type wordAt struct {
	pos  int
	mask uint64
}

func init() {
	injectionRules = append(injectionRules, latinRules...)
	if len(injectionRules) > 64 {
		panic("risk: too many injection rules for the rule bitmask")
	}
	addWord := func(w string, anchor, need uint64, enc uint8) {
		wr := injectionWords[w]
		wr.anchor |= anchor
		wr.need |= need
		wr.enc |= enc
		injectionWords[w] = wr
		switch {
		case len(w) == 2 && isLower(w[0]) && isLower(w[1]):
			wordPrefix2[int(w[0]-'a')*26+int(w[1]-'a')] = true
		case len(w) > 2 && isLower(w[0]) && isLower(w[1]) && isLower(w[2]):
			wordPrefix3[(int(w[0]-'a')*26+int(w[1]-'a'))*26+int(w[2]-'a')] = true
		}
	}
	for _, w := range encTelltales {
		addWord(rot13(w), 0, 0, encRot13)
		addWord(reverseString(w), 0, 0, encReversed)
	}
	for i, r := range injectionRules {
		bit := uint64(1) << i
		for _, a := range r.anchors {
			if isLetter(a[0]) {
				addWord(a, bit, 0, 0)
			} else {
				anchorBytes[a[0]] |= bit
			}
		}
		for _, w := range r.need {
			addWord(w, 0, bit, 0)
		}
		if len(r.need) > 0 {
			ruleNeeds |= bit
		}
	}
}

// lookupWord returns the rules a word of normalised text anchors or
// satisfies.
func lookupWord(w string) wordRules {
	if len(w) < 2 || len(w) > 16 || !isLower(w[0]) || !isLower(w[1]) {
		return wordRules{}
	}
	p := int(w[0]-'a')*26 + int(w[1]-'a')
	if len(w) == 2 {
		if !wordPrefix2[p] {
			return wordRules{}
		}
	} else if !isLower(w[2]) || !wordPrefix3[p*26+int(w[2]-'a')] {
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
// normalised first (Unicode compatibility forms, case, invisible characters,
// look-alike letters, whitespace) and also tried as leetspeak, spaced-out
// letters, rot13 and reversed text; base64 and hex blobs, percent-encoding
// (repeated) and HTML entities are decoded and the result scanned the same
// way, two layers deep. Phrases are matched in English, French, German,
// Spanish, Portuguese, Italian, Russian, Chinese and Japanese. At most the
// first 1 MiB of s is scanned, and decoding is bounded too. Should the
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
	sc := newInjScanner()
	return sc.scan(s, norm, zw)
}

// Bounds on the work decoding adds to one scan (one Classify call).
const (
	// maxDecodeDepth is how many layers of encoding are peeled:
	// base64 inside percent-encoding is found, a third layer is not.
	maxDecodeDepth = 2
	// maxDecodeBytes is how much decoded or transformed text one scan
	// may produce in all.
	maxDecodeBytes = 512 << 10
	// maxPercentRounds is how often percent-encoding is undone.
	maxPercentRounds = 4
)

// injScanner holds the decoding budget of one scan.
type injScanner struct {
	budget  int
	limited bool // some decoding was skipped for lack of budget
}

func newInjScanner() injScanner { return injScanner{budget: maxDecodeBytes} }

// take charges n bytes of decoded text against the budget.
func (sc *injScanner) take(n int) bool {
	if n > sc.budget {
		sc.limited = true
		return false
	}
	sc.budget -= n
	return true
}

// scan scans raw, whose normal form is norm; zw tells whether raw holds
// zero-width characters.
func (sc *injScanner) scan(raw, norm string, zw bool) []string {
	return sc.layer(raw, norm, zw, "", 0, nil)
}

// layer scans one text as it is and as each obfuscation would read it,
// then what it decodes to, one layer deeper.
func (sc *injScanner) layer(raw, norm string, zw bool, note string, depth int, hits []string) []string {
	hits, enc := matchInjectionEnc(norm, note, hits)
	if !isASCII(raw) {
		hits = matchNative(raw, note, hits)
	}
	if zw {
		hits = matchInjection(normalize(raw, true), note, hits)
	}
	if (enc&encLeet != 0 || enc&encLeetSymbol != 0 && leetWorthTrying(norm)) && sc.take(len(norm)) {
		hits = matchInjection(unleet(norm), note+" (leetspeak)", hits)
	}
	if enc&encSplit != 0 && sc.take(len(norm)) {
		hits = matchInjection(unsplit(norm), note+" (split words)", hits)
	}
	if enc&encSpaced != 0 && sc.take(len(norm)) {
		hits = matchSpaced(norm, note, hits)
	}
	if enc&encRot13 != 0 && sc.take(len(norm)) {
		hits = matchInjection(rot13(norm), note+" (rot13)", hits)
	}
	if enc&encReversed != 0 && sc.take(len(raw)) {
		rev := reverseString(raw)
		hits = matchInjection(normalize(rev, false), note+" (reversed)", hits)
		if !isASCII(rev) {
			hits = matchNative(rev, note+" (reversed)", hits)
		}
	}
	if depth >= maxDecodeDepth {
		return hits
	}
	if strings.IndexByte(raw, '%') >= 0 {
		dec, changed := raw, false
		for range maxPercentRounds {
			d, ok := percentDecode(dec)
			if !ok {
				break
			}
			dec, changed = d, true
		}
		if changed {
			hits = sc.decoded(dec, note+" (url-encoded)", depth, hits)
		}
	}
	if strings.IndexByte(raw, '&') >= 0 && strings.IndexByte(raw, ';') >= 0 {
		if dec := html.UnescapeString(raw); dec != raw {
			hits = sc.decoded(dec, note+" (html-escaped)", depth, hits)
		}
	}
	if enc&encBase64 != 0 {
		hits = sc.scanBase64(raw, note, depth, hits)
	}
	if enc&encHex != 0 {
		hits = sc.scanHex(raw, note, depth, hits)
	}
	return hits
}

// hexWord updates the run of hex pairs with one word of the text and sets
// encHex once the run, or the word itself, spells minHexBytes bytes.
func hexWord(w string, pairs int, enc uint8) (int, uint8) {
	if len(w) >= 2*minHexBytes && allHex(w) {
		return 0, enc | encHex
	}
	switch {
	case len(w) == 2 && allHex(w),
		len(w) == 3 && w[0] == 'x' && allHex(w[1:]),
		len(w) == 4 && w[0] == '0' && w[1] == 'x' && allHex(w[2:]):
		if pairs++; pairs >= minHexBytes {
			enc |= encHex
		}
		return pairs, enc
	}
	return 0, enc
}

func allHex(w string) bool {
	for i := 0; i < len(w); i++ {
		if !isHex(w[i]) {
			return false
		}
	}
	return true
}

// decoded scans text decoded from a layer, one layer deeper.
func (sc *injScanner) decoded(text, note string, depth int, hits []string) []string {
	if !sc.take(len(text)) {
		return hits
	}
	n, zw := normalizeText(text, false)
	return sc.layer(text, n, zw, note, depth+1, hits)
}

// matchInjection appends a description for every rule that matches text:
// a fake role marker first, then the others in the order the matches start.
func matchInjection(text, note string, hits []string) []string {
	hits, _ = matchInjectionEnc(text, note, hits)
	return hits
}

// matchInjectionEnc is matchInjection that also reports the telltales of
// obfuscations seen in the text. Each rule reports at most once. One pass
// over the words of the text finds the anchors, the need words and the
// telltales; a pattern then runs, anchored, only where one of its anchors
// has one of its need words within reach.
func matchInjectionEnc(text, note string, hits []string) ([]string, uint8) {
	var abuf, nbuf [32]wordAt
	anchors, needs := abuf[:0], nbuf[:0]
	roleFound := false
	var enc uint8
	singles := 0   // single letters in a row
	b64run := 0    // base64 characters in a row
	hexPairs := 0  // hex pairs or escapes in a row
	prevWord := -1 // start of the previous word
	prevEnd := -1  // and its end
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
			if leetBytes[c] != 0 && i+1 < len(text) && isLower(text[i+1]) {
				enc |= encLeetSymbol
			}
			k := byteClass[c]
			if k&clBase64Sym != 0 {
				b64run++
			} else {
				b64run = 0
			}
			if k&clHexSep == 0 {
				hexPairs = 0
			}
			i++
			continue
		}
		j, cls := i, uint8(0)
		for j < len(text) {
			k := byteClass[text[j]]
			if k&(clDigit|clLetter) == 0 {
				break
			}
			cls |= k
			j++
		}
		digit, letter := cls&clDigit != 0, cls&clLetter != 0
		if b64run += j - i; b64run >= minBase64Gate {
			enc |= encBase64
		}
		if j-i == 1 {
			singles++
			if singles >= minSpacedRun {
				enc |= encSpaced
			}
			hexPairs = 0
		} else {
			singles = 0
			if digit && letter && enc&encLeet == 0 && leetWord(text[i:j]) {
				enc |= encLeet
			}
			if digit || j-i >= 2*minHexBytes {
				hexPairs, enc = hexWord(text[i:j], hexPairs, enc)
			} else {
				hexPairs = 0
			}
		}
		if enc&encSplit == 0 && prevEnd == i-1 && prevEnd > 0 && isWordSplit(text[prevEnd]) && j-prevWord <= 17 && splitWord(text[prevWord:j]) {
			enc |= encSplit
		}
		prevWord, prevEnd = i, j
		if wr := lookupWord(text[i:j]); wr != (wordRules{}) {
			if wr.anchor != 0 {
				anchors = append(anchors, wordAt{i, wr.anchor})
			}
			if wr.need != 0 {
				needs = append(needs, wordAt{i, wr.need})
			}
			enc |= wr.enc
		}
		i = j
	}
	var found uint64
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
	return hits, enc
}

// tryRules runs the rules in mask anchored at text[i].
func tryRules(text string, i int, mask, found uint64, note string, hits []string) (uint64, []string) {
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
