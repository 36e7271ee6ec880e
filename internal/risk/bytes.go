package risk

// Byte classes used by the scanners; tables beat chains of comparisons in
// the per-byte loops.

func isWordByte(c byte) bool { return wordBytes[c] }

// wordBytes marks ASCII letters, digits and '_' (regexp's \w).
var wordBytes = func() (t [256]bool) {
	for c := range t {
		b := byte(c)
		t[c] = b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_'
	}
	return t
}()

// alnumBytes marks ASCII letters and digits: the words the injection scan
// looks up ("previous___instructions" is two words).
var alnumBytes = func() (t [256]bool) {
	for c := range t {
		b := byte(c)
		t[c] = b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
	}
	return t
}()
