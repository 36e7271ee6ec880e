package risk

import (
	"encoding/base64"
	"strings"
	"unicode"
)

const (
	// minBase64Run is the shortest run of base64 characters worth decoding.
	minBase64Run = 24
	// base64Probe is how many encoded bytes are decoded first to decide
	// whether a run holds text at all.
	base64Probe = 128
)

// scanBase64 finds runs of at least minBase64Run base64 characters
// (standard or URL alphabet) in raw, decodes those that hold text and scans
// the text, one layer deeper. Two runs split by a space, a line break or a
// string concatenation ("aWdu" + "b3Jl") are also tried joined, so an
// encoding cut in two is read whole.
func (sc *injScanner) scanBase64(raw, note string, depth int, hits []string) []string {
	prevStart, prevEnd := -1, -1
	for i := 0; i < len(raw); {
		if !isBase64Byte(raw[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(raw) && base64Bytes[raw[j]] {
			j++
		}
		if j-i >= minBase64Run/2 {
			if prevEnd >= 0 && prevEnd-prevStart >= minBase64Run/2 && isRunJoint(raw[prevEnd:i]) {
				hits = sc.base64Run(raw[prevStart:prevEnd]+raw[i:j], note, depth, hits)
			}
			if j-i >= minBase64Run {
				hits = sc.base64Run(raw[i:j], note, depth, hits)
			}
			prevStart, prevEnd = i, j
		} else if raw[i:j] != "+" {
			// A lone '+' is a concatenation between two halves.
			prevStart, prevEnd = -1, -1
		}
		i = j
	}
	return hits
}

// isRunJoint reports whether sep may join two halves of one base64 blob:
// a few spaces, quotes, '+' or line breaks.
func isRunJoint(sep string) bool {
	if sep == "" || len(sep) > 6 {
		return false
	}
	for i := 0; i < len(sep); i++ {
		if strings.IndexByte(" \t\r\n\"'+=", sep[i]) < 0 {
			return false
		}
	}
	return true
}

// base64Run decodes one run and scans it if it is text.
func (sc *injScanner) base64Run(run, note string, depth int, hits []string) []string {
	if !sc.take(min(len(run), base64Probe)) {
		return hits
	}
	std, url := strings.ContainsAny(run, "+/"), strings.ContainsAny(run, "-_")
	if std && url {
		return hits
	}
	enc := base64.RawStdEncoding
	if url {
		enc = base64.RawURLEncoding
	}
	if text, ok := decodeTextRun(enc, run); ok {
		hits = sc.decoded(text, note+" (base64-encoded)", depth, hits)
	}
	return hits
}

// minHexBytes is the fewest bytes a hex run must spell to be decoded.
const minHexBytes = 12

// scanHex finds hex-encoded text: runs of byte pairs, bare
// ("69676e6f7265"), escaped ("\x69\x67", "0x69 0x67") or separated by
// single spaces, colons, commas or dashes ("69 67 6e"), decodes those that
// hold text and scans the text, one layer deeper.
func (sc *injScanner) scanHex(raw, note string, depth int, hits []string) []string {
	var buf []byte
	for i := 0; i < len(raw); {
		if !hexRunBytes[raw[i]] {
			i++
			continue
		}
		// Most text has no run of hex-like characters long enough to
		// spell minHexBytes bytes: skip those runs without parsing.
		e, digits := i, 0
		for e < len(raw) && hexRunBytes[raw[e]] {
			if isHex(raw[e]) {
				digits++
			}
			e++
		}
		if digits >= 2*minHexBytes {
			// Each parse either consumes what it reads or moves on by
			// one byte, so a run costs time linear in its length.
			for p := i; p < e; {
				var j int
				buf, j = parseHexPairs(raw[:e], p, buf[:0])
				if len(buf) >= minHexBytes && looksLikeText(buf) {
					hits = sc.decoded(string(buf), note+" (hex-encoded)", depth, hits)
				}
				p = max(j, p+1)
			}
		}
		i = e
	}
	return hits
}

// parseHexPairs reads byte pairs from s[p:] (bare, \x or 0x escaped,
// separated by single spaces, colons, commas or dashes) into buf and
// returns where it stopped.
func parseHexPairs(s string, p int, buf []byte) ([]byte, int) {
	j := p
	for j < len(s) && len(buf) < maxDecodeBytes {
		k := j
		if k+1 < len(s) && (s[k] == '\\' || s[k] == '0') && (s[k+1] == 'x' || s[k+1] == 'X') {
			k += 2
		}
		if k+1 >= len(s) || !isHex(s[k]) || !isHex(s[k+1]) {
			break
		}
		buf = append(buf, unhex(s[k])<<4|unhex(s[k+1]))
		k += 2
		j = k
		if k+2 < len(s) && strings.IndexByte(" :,-", s[k]) >= 0 && (isHex(s[k+1]) || s[k+1] == '\\') {
			j = k + 1
		}
	}
	return buf, j
}

// decodeTextRun decodes a run of base64 characters that may start in the
// middle of a quantum (the run can include neighbouring characters, as in a
// path), trying each alignment, and returns the decoded text if it looks
// like text.
func decodeTextRun(enc *base64.Encoding, run string) (string, bool) {
	for off := 0; off < 4 && len(run)-off >= minBase64Run; off++ {
		sub := run[off:]
		if len(sub)%4 == 1 {
			// A partial last quantum of one character holds no byte.
			sub = sub[:len(sub)-1]
		}
		probe := sub[:min(len(sub), base64Probe)/4*4]
		if len(probe) == len(sub)/4*4 {
			probe = sub
		}
		dec, err := enc.DecodeString(probe)
		if err != nil {
			continue
		}
		if !looksLikeText(dec) {
			continue
		}
		if len(probe) < len(sub) {
			if dec, err = enc.DecodeString(sub); err != nil {
				continue
			}
		}
		return string(dec), true
	}
	return "", false
}

// looksLikeText reports whether b is mostly printable characters, with
// letters and spaces dominating. Invalid UTF-8 counts as unprintable rather
// than disqualifying: a run may start with a few bytes of a neighbouring
// path ("/tmp/aWdub3Jl...") or the probe may end inside a character.
func looksLikeText(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	total, printable, letters := 0, 0, 0
	for _, r := range string(b) {
		total++
		switch {
		case unicode.IsLetter(r) || r == ' ':
			letters++
			printable++
		case unicode.IsPrint(r) || r == '\n' || r == '\t' || r == '\r':
			printable++
		}
	}
	return printable*10 >= total*9 && letters*2 >= total
}

// hexRunBytes marks the characters a hex run is made of: hex digits, the
// x of \x and 0x escapes, backslashes and separators.
var hexRunBytes = func() (t [256]bool) {
	for c := range t {
		b := byte(c)
		t[c] = isHex(b) || b == 'x' || b == 'X' || b == '\\' || b == ' ' || b == ':' || b == ',' || b == '-'
	}
	return t
}()

func isBase64Byte(c byte) bool { return base64Bytes[c] }

// base64Bytes marks the characters of the standard and URL alphabets.
var base64Bytes = func() (t [256]bool) {
	for c := range t {
		b := byte(c)
		t[c] = b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' ||
			b == '+' || b == '/' || b == '-' || b == '_'
	}
	return t
}()
