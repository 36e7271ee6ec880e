package risk

import (
	"net/netip"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// maxURLs bounds how many URLs are taken from one string.
const maxURLs = 16

// maxAuthority bounds how far past a URL's scheme its authority is looked
// for; a longer authority cannot be read (a host name is at most 253
// bytes, so only userinfo is that long).
const maxAuthority = 4096

// maxHostBytes bounds a host as written; a longer one cannot be read.
const maxHostBytes = 1024

// forEachURL calls fn with every URL in s, as written: a scheme followed
// by "://", or by any run of '/' and '\' for the schemes browsers treat
// as special (http, https, ws, wss, ftp: "https:\\host" is a URL to
// them). tok is the URL as text cuts it (at whitespace, a quote, a bracket
// or ';'); ext reads on to the next whitespace, since what tok stopped at
// may still be inside the URL's userinfo for a client that is given the
// whole word ("https://a.example;@b.example" goes to b.example).
func forEachURL(s string, fn func(tok, ext string)) {
	n := 0
	for off := 0; n < maxURLs && off < len(s); {
		i := strings.IndexByte(s[off:], ':')
		if i < 0 {
			return
		}
		i += off
		off = i + 1
		start := i
		for start > 0 && isSchemeByte(s[start-1]) && i-start < 16 {
			start--
		}
		if start == i || !isLetter(s[start]) || !urlAfterScheme(s[start:i], s[i+1:]) {
			continue
		}
		end := urlEnd(s, i+1)
		ext := end
		for ext < len(s) && ext-start < maxAuthority {
			r, size := utf8.DecodeRuneInString(s[ext:])
			if isSpaceRune(r) {
				break
			}
			ext += size
		}
		fn(s[start:end], s[start:ext])
		off = end
		n++
	}
}

// urlAfterScheme reports whether rest, what follows "scheme:", makes a
// URL with an authority.
func urlAfterScheme(scheme, rest string) bool {
	if strings.HasPrefix(rest, "//") {
		return true
	}
	return rest != "" && (rest[0] == '/' || rest[0] == '\\') && specialScheme(scheme)
}

// specialScheme reports the schemes WHATWG URL parses as "special": a
// backslash is a slash to them and any run of slashes starts the host.
func specialScheme(scheme string) bool {
	switch strings.ToLower(scheme) {
	case "http", "https", "ws", "wss", "ftp":
		return true
	}
	return false
}

// urlEnd returns where the URL starting before from ends in text: at
// whitespace or a stop byte; a ']' closing an IPv6 literal's '[' does not
// end it.
func urlEnd(s string, from int) int {
	bracket := false
	end := from
	for end < len(s) {
		c := s[end]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[end:])
			if isSpaceRune(r) {
				break
			}
			end += size
			continue
		}
		if c == '[' {
			bracket = true
		} else if c == ']' && bracket {
			bracket = false
		} else if isURLStop(c) {
			break
		}
		end++
	}
	return end
}

func isSchemeByte(c byte) bool {
	return isLetter(c) || c >= '0' && c <= '9' || c == '+' || c == '.' || c == '-'
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isURLStop(c byte) bool {
	switch c {
	case ' ', '\n', '\t', '\r', '\v', '\f', '"', '\'', '<', '>', '`', '|', ';', ')', ']', '}':
		return true
	}
	return false
}

// wholeURL returns s read as one URL the way WHATWG URL reads a string
// (surrounding spaces and control characters trimmed, tabs and newlines
// inside removed), or "" unless s holds exactly one URL, from its start:
// the value of a URL field, which a tool passes on whole.
func wholeURL(s string) string {
	t := strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	n, atStart := 0, false
	forEachURL(t, func(tok, _ string) {
		if n == 0 {
			atStart = strings.HasPrefix(t, tok)
		}
		n++
	})
	if n != 1 || !atStart {
		return ""
	}
	if strings.ContainsAny(t, "\t\n\r") {
		t = tabNewline.Replace(t)
	}
	return t
}

var tabNewline = strings.NewReplacer("\t", "", "\n", "", "\r", "")

// hostRead is what the parsers make of one URL's host: every host read,
// and whether one of them found a host it cannot read (or none where the
// scheme needs one).
type hostRead struct {
	hosts  []hostName
	failed bool
}

// hostName is a host as written and in the form hosts are compared in.
type hostName struct {
	written string // as written, percent-escapes decoded
	ascii   string // canonHost(written)
}

// add records one parser's reading of a host, as written.
func (r *hostRead) add(written string, strict bool) {
	ascii, ok := canonHost(written)
	if !ok {
		r.failed = r.failed || strict
		return
	}
	for _, h := range r.hosts {
		if h.ascii == ascii {
			return
		}
	}
	r.hosts = append(r.hosts, hostName{written: written, ascii: ascii})
}

// read adds the host of URL u (its scheme first) as the clients that
// fetch it read it:
//
//   - Go's net/url (Go tools): the authority after "//" up to '/', '?'
//     or '#';
//   - WHATWG URL (browsers, Node's fetch and new URL): for http(s),
//     ws(s) and ftp any run of '/' and '\' after the scheme starts the
//     authority and a backslash ends it as '/' does;
//   - urllib3 (Python's requests): a backslash ends the authority
//     whatever the scheme.
//
// All drop the userinfo up to the last '@' in the authority. A URL without
// a host (file:, unix:///…) adds nothing. With strict false, a reading
// that cannot be read is not recorded as a failure.
func (r *hostRead) read(u string, strict bool) {
	colon := strings.IndexByte(u, ':')
	scheme, rest := strings.ToLower(u[:colon]), u[colon+1:]
	if scheme == "file" {
		return
	}
	special := specialScheme(scheme)
	if strings.HasPrefix(rest, "//") {
		auth := rest[2:]
		if i := strings.IndexAny(auth, "/?#"); i >= 0 {
			auth = auth[:i]
		}
		if len(auth) <= maxAuthority {
			if pu, err := url.Parse(u[:colon+3+len(auth)]); err != nil {
				r.failed = r.failed || strict
			} else if pu.Host != "" {
				r.add(pu.Hostname(), strict)
			}
		}
	}
	r.readAuthority(rest, special, special, strict)
	if !special && strings.Contains(rest, "\\") {
		r.readAuthority(rest, false, true, strict)
	}
}

// readAuthority adds the host of a URL's rest (what follows "scheme:") as
// WHATWG URL reads it (special: the scheme is one of its special ones),
// ending the authority at a backslash when backslash is set.
func (r *hostRead) readAuthority(rest string, special, backslash, strict bool) {
	switch {
	case special:
		rest = strings.TrimLeft(rest, "/\\")
	case strings.HasPrefix(rest, "//"):
		rest = rest[2:]
	default:
		return
	}
	stops := "/?#"
	if backslash {
		stops = "/?#\\"
	}
	if i := strings.IndexAny(rest, stops); i >= 0 {
		rest = rest[:i]
	}
	if len(rest) > maxAuthority {
		r.failed = r.failed || strict
		return
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	host := rest
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i > 0 {
			host = host[:i+1]
		}
	} else if i := strings.IndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	if host == "" {
		// A special URL must have a host; others may have none.
		r.failed = r.failed || special && strict
		return
	}
	r.add(host, strict)
}

// bareHost cuts the host out of a value written without a scheme in a
// URL or host field: "host", "host:port", "host/path", "user@host",
// "[v6]:port" or "//host". It is also how allowlist entries are read.
func bareHost(s string) string {
	s = strings.TrimPrefix(strings.TrimSpace(s), "//")
	if i := strings.IndexAny(s, "/?#\\"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	if strings.HasPrefix(s, "[") {
		if i := strings.IndexByte(s, ']'); i > 0 {
			return s[:i+1]
		}
		return s
	}
	if i := strings.IndexByte(s, ':'); i >= 0 && strings.Count(s, ":") == 1 {
		s = s[:i]
	}
	return s
}

// hostProfile maps host names to ASCII as WHATWG URL does (and so browsers
// and Node): UTS #46 mapping for lookup, nontransitional ("ß" stays "ß"),
// the Bidi and ContextJ rules, but neither the STD3 rules nor the hyphen
// checks, so "my_bucket" and "r3---sn-abc" labels, which are in use, map.
var hostProfile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.Transitional(false),
	idna.CheckHyphens(false), idna.StrictDomainName(false))

// canonHost returns the form a host is compared in: an IP address in its
// standard form (an IPv6 one with or without brackets), otherwise the name
// percent-decoded and mapped with IDNA to ASCII (A-labels, lowercase),
// without a trailing dot. ok is false for what is no host name: IDNA
// refuses it, or it holds a character no DNS name has.
func canonHost(h string) (string, bool) {
	if h == "" || len(h) > maxHostBytes {
		return "", false
	}
	if strings.IndexByte(h, '%') >= 0 {
		if d, err := url.PathUnescape(h); err == nil {
			h = d
		}
	}
	if len(h) > 2 && h[0] == '[' && h[len(h)-1] == ']' {
		if a, err := netip.ParseAddr(h[1 : len(h)-1]); err == nil && a.Is6() {
			return a.String(), true
		}
		return "", false
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.String(), true
	}
	a := h
	if !dnsChars(h) || hasPunycode(h) {
		var err error
		if a, err = hostProfile.ToASCII(h); err != nil || !dnsChars(a) {
			return "", false
		}
	}
	a = strings.TrimSuffix(strings.ToLower(a), ".")
	return a, a != ""
}

// dnsChars reports whether h is written in the letters, digits, '-', '.'
// and '_' of DNS names.
func dnsChars(h string) bool {
	for i := 0; i < len(h); i++ {
		if c := h[i]; !(isLetter(c) || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// hasPunycode reports whether a label of h starts "xn--" (in any case).
func hasPunycode(h string) bool {
	for i := 0; i+4 <= len(h); i++ {
		if (i == 0 || h[i-1] == '.') && strings.EqualFold(h[i:i+4], "xn--") {
			return true
		}
	}
	return false
}

// looksLikeHost accepts, of the canonical hosts, DNS names with a dot,
// localhost and IP addresses: what a host field means as a destination.
func looksLikeHost(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	return strings.Contains(h, ".") || h == "localhost" || isAllDigits(h)
}

func isAllDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// forEachEmailDomain calls fn with the domain of every address in s, as
// written: letters of any script and the characters IDNA maps away or to a
// dot are part of it.
func forEachEmailDomain(s string, fn func(domain string)) {
	n := 0
	for off := 0; n < maxURLs; {
		i := strings.IndexByte(s[off:], '@')
		if i < 0 {
			return
		}
		i += off + 1
		end := i
		for end < len(s) && end-i < maxHostBytes {
			if c := s[end]; c < utf8.RuneSelf {
				if !(isLetter(c) || c >= '0' && c <= '9' || c == '.' || c == '-') {
					break
				}
				end++
				continue
			}
			r, size := utf8.DecodeRuneInString(s[end:])
			if !domainRune(r) {
				break
			}
			end += size
		}
		off = end
		if d := s[i:end]; d != "" {
			fn(d)
			n++
		}
	}
}

// domainRune reports a non-ASCII character that may be part of a domain
// as written: a letter, mark or digit of any script, an invisible
// (format) character, or an ideographic or full-width full stop.
func domainRune(r rune) bool {
	return unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.Cf) || r == 0x3002 || r == 0xff0e || r == 0xff61
}

// hostAllowed reports whether the canonical host h equals an allowlist
// entry or, for a name, is a subdomain of one. The entries are read by
// allowedHosts.
func hostAllowed(h string, allowed []string) bool {
	_, err := netip.ParseAddr(h)
	name := err != nil
	for _, e := range allowed {
		if h == e || name && strings.HasSuffix(h, "."+e) {
			return true
		}
	}
	return false
}

// allowedHosts reads allowlist entries to the form hosts are compared in.
// Entries may be written "example.com", ".example.com", "*.example.com",
// "example.com:443", "[::1]:8080", "https://example.com" or in Unicode
// ("bücher.example"); an entry that is no host allows nothing.
func allowedHosts(entries []string) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if strings.Contains(e, "://") {
			var r hostRead
			r.read(e, true)
			for _, h := range r.hosts {
				out = append(out, h.ascii)
			}
			continue
		}
		e = strings.TrimPrefix(strings.TrimPrefix(e, "*"), ".")
		if h, ok := canonHost(bareHost(e)); ok {
			out = append(out, h)
		}
	}
	return out
}

// lookalike reports whether a canonical host name spells, in one of its
// labels, letters of several scripts (beyond the combinations a language
// writes with, such as Han with kana or Hangul), or only letters that
// imitate ASCII ones ("аррӏе" in Cyrillic, "gıthub").
func lookalike(ascii string) bool {
	if !hasPunycode(ascii) {
		return false
	}
	u, err := hostProfile.ToUnicode(ascii)
	if err != nil {
		return true
	}
	for label := range strings.SplitSeq(u, ".") {
		if labelLookalike(label) {
			return true
		}
	}
	return false
}

// Scripts of letters, for lookalike.
const (
	scriptLatin = 1 << iota
	scriptHan
	scriptHiragana
	scriptKatakana
	scriptHangul
	scriptBopomofo
	scriptCyrillic
	scriptGreek
	scriptOther
)

// scriptTables are the scripts lookalike tells apart by name; the others
// are told apart by scriptOf.
var scriptTables = []struct {
	bit   int
	table *unicode.RangeTable
}{
	{scriptLatin, unicode.Latin}, {scriptCyrillic, unicode.Cyrillic}, {scriptGreek, unicode.Greek},
	{scriptHan, unicode.Han}, {scriptHiragana, unicode.Hiragana}, {scriptKatakana, unicode.Katakana},
	{scriptHangul, unicode.Hangul}, {scriptBopomofo, unicode.Bopomofo},
}

func labelLookalike(label string) bool {
	scripts := 0
	var other *unicode.RangeTable // the script of the letters outside scriptTables
	foreign, imitations := 0, 0
	for _, r := range label {
		if r < utf8.RuneSelf {
			if isLetter(byte(r)) {
				scripts |= scriptLatin
			}
			continue
		}
		if !unicode.IsLetter(r) {
			continue
		}
		foreign++
		if _, ok := confusables[r]; ok {
			imitations++
		}
		bit := scriptOther
		for _, t := range scriptTables {
			if unicode.Is(t.table, r) {
				bit = t.bit
				break
			}
		}
		if bit == scriptOther && (other == nil || !unicode.Is(other, r)) {
			// Looked up once per label: a second other script is a mix.
			if other != nil {
				return true
			}
			other = scriptOf(r)
		}
		scripts |= bit
	}
	if foreign > 0 && imitations == foreign {
		return true
	}
	switch scripts &^ scriptLatin {
	case 0, scriptCyrillic, scriptGreek, scriptOther:
		// One script, perhaps with Latin: mixed when Latin is there.
		return scripts&scriptLatin != 0 && scripts != scriptLatin
	}
	// Han, kana, Hangul and Bopomofo combine as Japanese, Korean and
	// Chinese write them, with Latin or not (UTS #39, highly restrictive).
	cjk := scripts &^ scriptLatin
	return cjk&^(scriptHan|scriptHiragana|scriptKatakana) != 0 &&
		cjk&^(scriptHan|scriptHangul) != 0 && cjk&^(scriptHan|scriptBopomofo) != 0
}

// scriptOf returns the script of a letter outside scriptTables.
func scriptOf(r rune) *unicode.RangeTable {
	for name, t := range unicode.Scripts {
		if name != "Common" && name != "Inherited" && unicode.Is(t, r) {
			return t
		}
	}
	return unicode.Common
}

// metadataHosts are cloud instance-metadata endpoints, the classic SSRF
// target for stealing instance credentials.
var metadataHosts = map[string]bool{
	"169.254.169.254": true, "fd00:ec2::254": true, "metadata.google.internal": true,
	"metadata": true, "100.100.100.200": true, "169.254.170.2": true,
}

// hostKind sorts a host that is not allowlisted.
type hostKind uint8

const (
	hostPublic hostKind = iota
	hostMetadata
	hostInternal
	hostNumeric
)

func classifyHost(h string) hostKind {
	if metadataHosts[h] {
		return hostMetadata
	}
	if a, err := netip.ParseAddr(h); err == nil {
		a = a.Unmap()
		if metadataHosts[a.String()] {
			return hostMetadata // ::ffff:169.254.169.254
		}
		if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsUnspecified() ||
			a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
			return hostInternal
		}
		return hostPublic
	}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") || strings.HasSuffix(h, ".local") ||
		strings.HasSuffix(h, ".internal") || strings.HasSuffix(h, ".lan") || strings.HasSuffix(h, ".home.arpa") {
		return hostInternal
	}
	// 2130706433, 0x7f000001, 0177.0.0.1: IP addresses written to slip
	// past checks.
	if isAllDigits(h) || strings.HasPrefix(h, "0x") || isOctalDotted(h) {
		return hostNumeric
	}
	return hostPublic
}

func isOctalDotted(h string) bool {
	parts := strings.Split(h, ".")
	if len(parts) != 4 {
		return false
	}
	octal := false
	for _, p := range parts {
		if !isAllDigits(strings.TrimPrefix(p, "0x")) && !strings.HasPrefix(p, "0x") {
			return false
		}
		if len(p) > 1 && p[0] == '0' {
			octal = true
		}
	}
	return octal
}
