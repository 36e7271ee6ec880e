// Package clientip finds the address of the client behind a request: the
// TCP peer, or, when the peer is a trusted proxy, the right-most address of
// X-Forwarded-For that no trusted proxy wrote.
package clientip

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParsePrefixes reads a comma-separated list of CIDRs (a bare address is
// its own /32 or /128), as in AIRLOCK_TRUSTED_PROXIES.
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("clientip: %q is neither a CIDR nor an address: %w", f, err)
			}
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("clientip: %q is not a CIDR: %w", f, err)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Resolver picks the client address of requests.
type Resolver struct {
	trusted []netip.Prefix
}

// New returns a Resolver trusting X-Forwarded-For from peers in trusted
// (none: the peer is always the client).
func New(trusted []netip.Prefix) *Resolver { return &Resolver{trusted: trusted} }

// Addr is the client address of r (the zero Addr when the peer address
// cannot be read).
func (res *Resolver) Addr(r *http.Request) netip.Addr {
	return Choose(Peer(r.RemoteAddr), r.Header.Values("X-Forwarded-For"), res.trusted)
}

// Peer parses a net/http RemoteAddr ("host:port", or a bare host).
func Peer(remoteAddr string) netip.Addr {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap().WithZone("")
}

// Choose is the rule: a peer that is not trusted is the client, whatever it
// sends. A trusted peer's X-Forwarded-For (every header, in order, each a
// comma-separated chain) is read from the right: each address a trusted
// proxy appended is skipped, and the first one that is not trusted is the
// client (the ones left of it are what the client claims, and it may lie).
// An entry that is not an address ends the walk at the last address known
// good; a chain of trusted proxies only gives its left-most one.
func Choose(peer netip.Addr, xff []string, trusted []netip.Prefix) netip.Addr {
	cur := peer
	if !isTrusted(cur, trusted) {
		return cur
	}
	var chain []string
	for _, h := range xff {
		chain = append(chain, strings.Split(h, ",")...)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		a, ok := parseHop(chain[i])
		if !ok {
			return cur
		}
		cur = a
		if !isTrusted(cur, trusted) {
			return cur
		}
	}
	return cur
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	if !a.IsValid() {
		return false
	}
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHop reads one X-Forwarded-For entry: an address, possibly with a
// port ("203.0.113.7:4711", "[2001:db8::1]:443").
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	return netip.Addr{}, false
}
