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
// the text for injection phrases. Decoded text is scanned once: it is not
// searched for further encodings.
func scanBase64(raw string, hits []string) []string {
	for i := 0; i < len(raw); {
		if !isBase64Byte(raw[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(raw) && base64Bytes[raw[j]] {
			j++
		}
		run := raw[i:j]
		if len(run) < minBase64Run {
			i = j
			continue
		}
		std, url := strings.ContainsAny(run, "+/"), strings.ContainsAny(run, "-_")
		if !(std && url) {
			enc := base64.RawStdEncoding
			if url {
				enc = base64.RawURLEncoding
			}
			if text, ok := decodeTextRun(enc, run); ok {
				hits = matchInjection(normalize(text, false), " (base64-encoded)", hits)
			}
		}
		i = j
	}
	return hits
}

// decodeTextRun decodes a run of base64 characters that may start in the
// middle of a quantum (the run can include neighbouring characters, as in a
// path), trying each alignment, and returns the decoded text if it looks
// like text.
func decodeTextRun(enc *base64.Encoding, run string) (string, bool) {
	for off := 0; off < 4 && len(run)-off >= minBase64Run; off++ {
		sub := run[off:]
		sub = sub[:len(sub)/4*4]
		probe := sub[:min(len(sub), base64Probe)]
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
