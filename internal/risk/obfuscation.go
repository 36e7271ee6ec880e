package risk

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Readings of normalised text that undo common obfuscations of a phrase:
// leetspeak ("1gn0r3"), spaced-out letters ("i g n o r e"), rot13 and
// reversed text. Each is cheap to rule out, so ordinary text pays a scan of
// its bytes at most.

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// leetBytes maps the characters leetspeak uses for letters; 0 for others.
var leetBytes = func() (t [256]byte) {
	for k, v := range map[byte]byte{'0': 'o', '1': 'i', '3': 'e', '4': 'a', '5': 's', '7': 't', '8': 'b', '9': 'g',
		'@': 'a', '$': 's', '!': 'i', '|': 'l'} {
		t[k] = v
	}
	return t
}()

// leetToken returns the end of the token starting at text[i]: letters and
// leetspeak characters, and whether it mixes the two.
func leetToken(text string, i int) (end int, mixed bool) {
	letters, leet := false, false
	for end = i; end < len(text); end++ {
		c := text[end]
		switch {
		case isLower(c):
			letters = true
		case leetBytes[c] != 0:
			leet = true
		default:
			return end, letters && leet
		}
	}
	return end, letters && leet
}

// leetWord reports whether a word of letters and digits, read as
// leetspeak, is one the injection rules look for.
func leetWord(w string) bool {
	var buf [16]byte
	if len(w) > len(buf) {
		return false
	}
	for k := 0; k < len(w); k++ {
		if l := leetBytes[w[k]]; l != 0 {
			buf[k] = l
		} else {
			buf[k] = w[k]
		}
	}
	return lookupWord(string(buf[:len(w)])) != (wordRules{})
}

// leetWorthTrying reports whether some word of text, letters and
// leetspeak characters, is one the injection rules look for when read as
// leetspeak.
func leetWorthTrying(text string) bool {
	for i := 0; i < len(text); {
		c := text[i]
		if !isLower(c) && leetBytes[c] == 0 {
			i++
			continue
		}
		end, mixed := leetToken(text, i)
		if mixed && leetWord(text[i:end]) {
			return true
		}
		i = end
	}
	return false
}

// unleet reads the words of text that mix letters and leetspeak characters
// as letters.
func unleet(text string) string {
	b := []byte(text)
	for i := 0; i < len(b); {
		c := b[i]
		if !isLower(c) && leetBytes[c] == 0 {
			i++
			continue
		}
		end, mixed := leetToken(text, i)
		if mixed {
			for k := i; k < end; k++ {
				if l := leetBytes[b[k]]; l != 0 {
					b[k] = l
				}
			}
		}
		i = end
	}
	return string(b)
}

// minSpacedRun is how many single letters in a row make spaced-out text.
const minSpacedRun = 6

// spacedPhrases are injection phrases as spaced-out letters read them: all
// word breaks gone.
var spacedPhrases = regexp.MustCompile(
	`(?:ignor(?:e|ing)|disregard|forget|override|bypass|dismiss)(?:all|any|every|the|your|my|of|these|those|previous|previously|prior|above|preceding|earlier|system|developer|original|initial|existing)*(?:instructions?|prompts?|rules|directives?|guidelines)` +
		`|youarenow(?:dan|unrestricted|unfiltered|jailbroken|indevelopermode|evil|free)` +
		`|(?:print|reveal|show|repeat|output)(?:me)?(?:your|the)(?:full|original|initial|hidden|secret)*(?:systemprompt|instructions|prompt)` +
		`|newsystemprompt|newinstructions|doanythingnow|developermode|jailbr(?:eak|oken)|actasdan`)

// matchSpaced finds runs of single letters split by one to three separator
// characters ("i g n o r e  p r e v i o u s", "i.g.n.o.r.e") and matches
// them, squashed, against spacedPhrases.
func matchSpaced(text, note string, hits []string) []string {
	for i := 0; i < len(text); i++ {
		if !isSingleAt(text, i) {
			continue
		}
		var squashed []byte
		j := i
		for {
			squashed = append(squashed, text[j])
			k := j + 1
			for k < len(text) && k-j <= 3 && !alnumBytes[text[k]] && text[k] != '\n' {
				k++
			}
			if k == j+1 || k-j > 4 || !isSingleAt(text, k) {
				break
			}
			j = k
		}
		if len(squashed) >= minSpacedRun {
			for k, c := range squashed {
				if l := leetBytes[c]; l != 0 {
					squashed[k] = l
				}
			}
			if m := spacedPhrases.Find(squashed); m != nil {
				hits = appendHit(hits, string(m), note+" (spaced out)")
			}
		}
		i = j
	}
	return hits
}

// isSingleAt reports whether text[i] is a letter or digit standing alone.
func isSingleAt(text string, i int) bool {
	return i < len(text) && alnumBytes[text[i]] && (i == 0 || !alnumBytes[text[i-1]]) &&
		(i+1 >= len(text) || !alnumBytes[text[i+1]])
}

// rot13 rotates the ASCII letters of s by 13.
func rot13(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = 'a' + (c-'a'+13)%26
		case c >= 'A' && c <= 'Z':
			b[i] = 'A' + (c-'A'+13)%26
		}
	}
	return string(b)
}

// reverseString reverses s character by character.
func reverseString(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

// hasNativeScript reports whether s holds Cyrillic, Chinese or Japanese
// characters, which nativeRules look at.
func hasNativeScript(s string) bool {
	for _, r := range s {
		if r >= 0x400 && r <= 0x4ff || r >= 0x3000 && r <= 0x9fff || r >= 0xf900 && r <= 0xfaff || r >= 0xff00 && r <= 0xffef {
			return true
		}
	}
	return false
}

// nativeForm is the normal form for scripts other than Latin: Unicode NFKC,
// lowercase, invisible characters gone and whitespace runs one space, but
// letters kept in their script (the normal form would fold Cyrillic
// look-alikes to Latin).
func nativeForm(s string) string {
	s = norm.NFKC.String(s)
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		switch {
		case r == utf8.RuneError, isInvisible(r), isZeroWidth(r), r >= 0xe0000 && r <= 0xe007f:
			continue
		case isSpaceRune(r):
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// matchNative runs nativeRules over raw text in a script they cover.
func matchNative(raw, note string, hits []string) []string {
	if !hasNativeScript(raw) {
		return hits
	}
	text := nativeForm(raw)
	for _, r := range nativeRules {
		for _, t := range r.triggers {
			if strings.Contains(text, t) {
				if m := r.re.FindString(text); m != "" {
					hits = appendHit(hits, snippet(m), note)
				}
				break
			}
		}
	}
	return hits
}

// isWordSplit reports the characters that split a word without breaking
// it for a reader: "ig-nore", "ig.nore", "ig_nore".
func isWordSplit(c byte) bool { return c == '-' || c == '.' || c == '_' }

// splitWord reports whether w, two words joined by a split character, is a
// word the injection rules look for once the split is removed.
func splitWord(w string) bool {
	var buf [16]byte
	n := 0
	for i := 0; i < len(w); i++ {
		if isWordSplit(w[i]) {
			continue
		}
		if n == len(buf) {
			return false
		}
		buf[n] = w[i]
		n++
	}
	return lookupWord(string(buf[:n])) != (wordRules{})
}

// unsplit removes split characters that sit between two letters.
func unsplit(text string) string {
	b := make([]byte, 0, len(text))
	for i := 0; i < len(text); i++ {
		if isWordSplit(text[i]) && i > 0 && i+1 < len(text) && isLower(text[i-1]) && isLower(text[i+1]) {
			continue
		}
		b = append(b, text[i])
	}
	return string(b)
}
