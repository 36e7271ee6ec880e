// Package netguard guards Airlock's outbound connections to registered MCP
// servers against server-side request forgery: a host is resolved once
// and the connection made to the very address checked (no second
// resolution a rebinding DNS server could answer differently), every
// answer must be a public address or inside the registration's
// allow_private CIDRs, IPv4 in its legacy spellings (127.1, 0x7f000001,
// 2130706433, 0177.0.0.1) and IPv4 inside IPv6 (::ffff:a.b.c.d, NAT64,
// 6to4) are read as the address they mean, redirects to another host are
// not followed, TLS is verified, and no proxy from the environment is used.
package netguard

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrRefused is wrapped by every refusal of an address or host.
var ErrRefused = errors.New("netguard: refused")

// Error is a refused address (or a host that cannot be read safely).
type Error struct {
	Host   string     // the host asked for
	Addr   netip.Addr // the address refused (zero for a malformed host)
	Reason string     // why: "loopback", "private (RFC 1918)", ...
}

func (e *Error) Error() string {
	if !e.Addr.IsValid() {
		return fmt.Sprintf("netguard: refused host %q: %s", e.Host, e.Reason)
	}
	if e.Host != "" && e.Host != e.Addr.String() {
		return fmt.Sprintf("netguard: refused %s (%s): %s address; add its range to allow_private to reach it", e.Host, e.Addr, e.Reason)
	}
	return fmt.Sprintf("netguard: refused %s: %s address; add its range to allow_private to reach it", e.Addr, e.Reason)
}

// Unwrap makes errors.Is(err, ErrRefused) hold.
func (e *Error) Unwrap() error { return ErrRefused }

type blockedRange struct {
	prefix netip.Prefix
	reason string
}

func mustRanges(pairs ...string) []blockedRange {
	out := make([]blockedRange, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, blockedRange{netip.MustParsePrefix(pairs[i]), pairs[i+1]})
	}
	return out
}

// blocked are the non-public ranges, most specific first (the first match
// names the reason).
var blocked = mustRanges(
	// IPv4
	"0.0.0.0/32", "unspecified",
	"0.0.0.0/8", "\"this network\"",
	"10.0.0.0/8", "private (RFC 1918)",
	"100.64.0.0/10", "shared (CGNAT, RFC 6598)",
	"127.0.0.0/8", "loopback",
	"169.254.169.254/32", "cloud metadata",
	"169.254.0.0/16", "link-local",
	"172.16.0.0/12", "private (RFC 1918)",
	"192.0.0.0/24", "IETF protocol assignment",
	"192.0.2.0/24", "documentation",
	"192.88.99.0/24", "6to4 relay",
	"192.168.0.0/16", "private (RFC 1918)",
	"198.18.0.0/15", "benchmarking",
	"198.51.100.0/24", "documentation",
	"203.0.113.0/24", "documentation",
	"224.0.0.0/4", "multicast",
	"255.255.255.255/32", "broadcast",
	"240.0.0.0/4", "reserved",
	// IPv6 (IPv4-mapped addresses are unmapped first; NAT64 and 6to4
	// addresses are also judged by the IPv4 address they carry)
	"::/128", "unspecified",
	"::1/128", "loopback",
	"::/96", "IPv4-compatible (deprecated)",
	"::ffff:0:0:0/96", "IPv4-translated (SIIT)", // RFC 2765: a translator maps it to any IPv4 address, private ones too
	"64:ff9b:1::/48", "local NAT64",
	"100::/64", "discard",
	"2001::/32", "Teredo",
	"2001:db8::/32", "documentation",
	"fd00:ec2::254/128", "cloud metadata",
	"fc00::/7", "unique local",
	"fe80::/10", "link-local",
	"fec0::/10", "site-local (deprecated)",
	"ff00::/8", "multicast",
)

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// Blocked reports whether addr is not a public unicast address, and why.
// It knows nothing of a registration's allow_private (see Guard.Check).
func Blocked(addr netip.Addr) (reason string, refused bool) {
	if !addr.IsValid() {
		return "invalid", true
	}
	if addr.Zone() != "" {
		return "scoped (zone)", true
	}
	a := addr.Unmap()
	for _, r := range blocked {
		if r.prefix.Contains(a) {
			return r.reason, true
		}
	}
	if a.Is6() {
		b := a.As16()
		var v4 netip.Addr
		switch {
		case nat64.Contains(a):
			v4 = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		case sixToFour.Contains(a):
			v4 = netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
		}
		if v4.IsValid() {
			if why, ok := Blocked(v4); ok {
				return why + " (inside IPv6)", true
			}
		}
	}
	return "", false
}

// ParseHost reads host as an IP address the way a C resolver would: IPv6
// (with or without brackets), dotted quad, and IPv4's legacy spellings
// (1 to 4 parts, each decimal, 0x-hex or 0-octal: 127.1, 0x7f000001,
// 2130706433, 0177.0.0.1). ok is false for a host name. A host whose last
// label is a number but which is not an address is an error: it is
// neither a name nor an address, and resolvers disagree on it.
func ParseHost(host string) (addr netip.Addr, ok bool, err error) {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.Contains(h, ":") {
		a, err := netip.ParseAddr(h)
		if err != nil {
			return netip.Addr{}, false, &Error{Host: host, Reason: "not an IPv6 address"}
		}
		return a, true, nil
	}
	h = strings.TrimSuffix(h, ".")
	labels := strings.Split(h, ".")
	if !numericLabel(labels[len(labels)-1]) {
		return netip.Addr{}, false, nil
	}
	a, perr := parseLegacyIPv4(labels)
	if perr != nil {
		return netip.Addr{}, false, &Error{Host: host, Reason: "a host ending in a number must be an IPv4 address: " + perr.Error()}
	}
	return a, true, nil
}

func numericLabel(l string) bool {
	if l == "" {
		return false
	}
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		return strings.Trim(l[2:], "0123456789abcdefABCDEF") == ""
	}
	return strings.Trim(l, "0123456789") == ""
}

func parseLegacyIPv4(parts []string) (netip.Addr, error) {
	if len(parts) > 4 {
		return netip.Addr{}, errors.New("more than 4 parts")
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		base, digits := 10, p
		switch {
		case len(p) >= 2 && (p[:2] == "0x" || p[:2] == "0X"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		if digits == "" {
			return netip.Addr{}, errors.New("empty part")
		}
		n, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return netip.Addr{}, fmt.Errorf("part %q: %w", p, err)
		}
		nums[i] = n
	}
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, fmt.Errorf("part %d is over 255", i+1)
		}
		v |= n << (8 * (3 - i))
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, errors.New("last part too large")
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), nil
}

// Resolver answers a host's addresses (net.DefaultResolver is one).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc connects to address, always an IP literal and port.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Options configure a Guard.
type Options struct {
	// AllowPrivate are the registration's allow_private CIDRs: addresses
	// inside them are reached even when not public.
	AllowPrivate []netip.Prefix
	// Resolver resolves host names (nil: net.DefaultResolver).
	Resolver Resolver
	// Dial connects to the address checked (nil: a net.Dialer whose
	// Control checks the address again at connect time).
	Dial DialFunc
	// RootCAs verify servers' certificates (nil: the system's).
	RootCAs *x509.CertPool
	// Timeout bounds one connection attempt (default 10s).
	Timeout time.Duration
}

// Guard connects only to the addresses its registration may reach.
type Guard struct {
	allow    []netip.Prefix
	resolver Resolver
	dial     DialFunc
	roots    *x509.CertPool
}

// New returns a Guard.
func New(o Options) *Guard {
	g := &Guard{allow: append([]netip.Prefix(nil), o.AllowPrivate...), resolver: o.Resolver, dial: o.Dial, roots: o.RootCAs}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if g.dial == nil {
		d := &net.Dialer{Timeout: o.Timeout, Control: g.control}
		g.dial = d.DialContext
	}
	return g
}

// Check is the guard's decision on one address: nil when it is public or
// inside allow_private, else an *Error naming the range.
func (g *Guard) Check(addr netip.Addr) error {
	if addr.IsValid() && addr.Zone() == "" {
		for _, p := range g.allow {
			if p.Contains(addr) || p.Contains(addr.Unmap()) {
				return nil
			}
		}
	}
	if why, refused := Blocked(addr); refused {
		return &Error{Addr: addr, Reason: why}
	}
	return nil
}

// Resolve returns host's addresses, resolved once; every answer must pass
// Check, else none is returned (a name answering both a public and a
// private address is refused whole).
func (g *Guard) Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, ok, err := ParseHost(host); err != nil {
		return nil, err
	} else if ok {
		if err := g.Check(a); err != nil {
			err.(*Error).Host = host
			return nil, err
		}
		return []netip.Addr{a}, nil
	}
	if host == "" || strings.ContainsAny(host, "%/\\ ") {
		return nil, &Error{Host: host, Reason: "not a host name"}
	}
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("netguard: resolving %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("netguard: %s has no address", host)
	}
	for _, a := range addrs {
		if err := g.Check(a); err != nil {
			err.(*Error).Host = host
			return nil, err
		}
	}
	return addrs, nil
}

// DialContext connects to address (host:port) through the guard: the host
// resolved once, the connection made to an address that passed Check.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("netguard: network %q: %w", network, ErrRefused)
	}
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("netguard: %w", err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return nil, fmt.Errorf("netguard: port %q: %w", portStr, ErrRefused)
	}
	addrs, err := g.Resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, a := range addrs {
		if (network == "tcp4" && !a.Unmap().Is4()) || (network == "tcp6" && a.Unmap().Is4()) {
			continue
		}
		conn, err := g.dial(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("netguard: %s has no %s address", host, network)
	}
	return nil, errors.Join(errs...)
}

// control checks, at connect time, the address the default dialer is
// about to connect to (a second line behind Resolve).
func (g *Guard) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("netguard: connecting to %q: %w", address, ErrRefused)
	}
	return g.Check(ap.Addr())
}

// Transport returns an HTTP transport that connects only through the
// guard, verifies TLS and uses no proxy.
func (g *Guard) Transport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           g.DialContext,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: g.roots},
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 0, // MCP streams: the caller's context bounds a request
	}
}

// ErrRedirect is a redirect the guard's client does not follow.
var ErrRedirect = errors.New("netguard: redirect not followed")

// Client returns an HTTP client over Transport that follows a redirect
// only to the same scheme, host and port (at most 5), never elsewhere.
func (g *Guard) Client() *http.Client {
	return &http.Client{Transport: g.Transport(), CheckRedirect: func(req *http.Request, via []*http.Request) error {
		first := via[0].URL
		if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
			return fmt.Errorf("%w: %s redirects to another host (%s)", ErrRedirect, first.Host, req.URL.Host)
		}
		if len(via) >= 5 {
			return fmt.Errorf("%w: more than 5 redirects", ErrRedirect)
		}
		return nil
	}}
}
