package risk

import (
	"net/netip"
	"net/url"
	"strings"
)

// maxURLs bounds how many URLs are taken from one string.
const maxURLs = 16

// forEachURL calls fn with every scheme://... substring of s (lowercase).
func forEachURL(s string, fn func(u string)) {
	n := 0
	for off := 0; n < maxURLs; {
		i := strings.Index(s[off:], "://")
		if i < 0 {
			return
		}
		i += off
		start := i
		for start > 0 && isSchemeByte(s[start-1]) && i-start < 16 {
			start--
		}
		end := i + 3
		for end < len(s) && !isURLStop(s[end]) {
			end++
		}
		off = end
		if start < i && isLetter(s[start]) {
			fn(s[start:end])
			n++
		}
	}
}

func isSchemeByte(c byte) bool {
	return isLetter(c) || c >= '0' && c <= '9' || c == '+' || c == '.' || c == '-'
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isURLStop(c byte) bool {
	switch c {
	case ' ', '\n', '\t', '"', '\'', '<', '>', '`', '|', ';', ')', ']', '}':
		return true
	}
	return false
}

// urlHost returns the host a URL points at, "" when it has none (file:,
// mailto:) or cannot be parsed.
func urlHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// Fall back to the authority text between "://" and the next '/'.
		rest := raw[strings.Index(raw, "://")+3:]
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			rest = rest[:i]
		}
		if i := strings.LastIndexByte(rest, '@'); i >= 0 {
			rest = rest[i+1:]
		}
		return bareHost(rest)
	}
	if u.Scheme == "file" {
		return ""
	}
	return normHost(u.Hostname())
}

// bareHost reads "host", "host:port" or "host/path" as written in a url or
// host field without a scheme.
func bareHost(s string) string {
	s = strings.TrimPrefix(s, "//")
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	if strings.HasPrefix(s, "[") {
		if i := strings.IndexByte(s, ']'); i > 0 {
			return normHost(s[1:i])
		}
	}
	if i := strings.LastIndexByte(s, ':'); i >= 0 && strings.Count(s, ":") == 1 {
		s = s[:i]
	}
	h := normHost(s)
	if !looksLikeHost(h) {
		return ""
	}
	return h
}

// normHost lowercases a host and drops a trailing dot.
func normHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}

// looksLikeHost accepts DNS names with a dot, localhost and IP literals.
func looksLikeHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
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

// forEachEmailDomain calls fn with the domain of every address in s.
func forEachEmailDomain(s string, fn func(domain string)) {
	n := 0
	for off := 0; n < maxURLs; {
		i := strings.IndexByte(s[off:], '@')
		if i < 0 {
			return
		}
		i += off + 1
		end := i
		for end < len(s) && (isLetter(s[end]) || s[end] >= '0' && s[end] <= '9' || s[end] == '.' || s[end] == '-') {
			end++
		}
		off = end
		if d := normHost(s[i:end]); strings.Contains(d, ".") {
			fn(d)
			n++
		}
	}
}

// hostAllowed reports whether host equals an allowlist entry or is a
// subdomain of one. Entries may be written "example.com", ".example.com",
// "*.example.com", "example.com:443" or "https://example.com".
func hostAllowed(host string, allowed []string) bool {
	for _, e := range allowed {
		e = normHost(e)
		if strings.Contains(e, "://") {
			e = urlHost(e)
		} else {
			e = strings.TrimPrefix(strings.TrimPrefix(e, "*"), ".")
			if h := bareHost(e); h != "" {
				e = h
			}
		}
		if e == "" {
			continue
		}
		if host == e || strings.HasSuffix(host, "."+e) {
			return true
		}
	}
	return false
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
