package netguard_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/netguard"
)

// No test here sends a packet off the loopback: every guard under test
// dials through loopbackOnly, which fails the test (and connects nowhere)
// if it is ever asked for an address off 127.0.0.0/8 or ::1, and names are
// answered by a fakeResolver, never by DNS.

// loopbackOnly is a DialFunc that connects to loopback addresses only and
// fails t on any other; dials counts its calls.
type loopbackOnly struct {
	t     *testing.T
	mu    sync.Mutex
	dials []string
}

func (d *loopbackOnly) dial(ctx context.Context, network, address string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !ap.Addr().Unmap().IsLoopback() {
		d.t.Errorf("the guard asked to connect to %q: a packet would have left the loopback", address)
		return nil, errors.New("test dialer: refused a non-loopback address")
	}
	d.mu.Lock()
	d.dials = append(d.dials, address)
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

func (d *loopbackOnly) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.dials)
}

// fakeResolver answers each lookup with the next of answers (the last one
// repeated), counting lookups.
type fakeResolver struct {
	mu      sync.Mutex
	answers [][]netip.Addr
	calls   int
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if len(r.answers) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	a := r.answers[0]
	if len(r.answers) > 1 {
		r.answers = r.answers[1:]
	}
	return a, nil
}

func (r *fakeResolver) lookups() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

func answers(list ...string) []netip.Addr {
	out := make([]netip.Addr, len(list))
	for i, s := range list {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

var loopback8 = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// TestBlockedRanges: the guard's decision on every range it refuses, as
// IPv4, as IPv4-mapped IPv6 and inside NAT64/6to4, and on public
// addresses; decided without any connection.
func TestBlockedRanges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr   string
		reason string // "" = public
	}{
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "\"this network\""},
		{"10.0.0.1", "private (RFC 1918)"},
		{"10.255.255.255", "private (RFC 1918)"},
		{"172.16.0.1", "private (RFC 1918)"},
		{"172.31.255.254", "private (RFC 1918)"},
		{"192.168.1.1", "private (RFC 1918)"},
		{"100.64.0.1", "shared (CGNAT, RFC 6598)"},
		{"100.127.255.254", "shared (CGNAT, RFC 6598)"},
		{"100.100.100.200", "shared (CGNAT, RFC 6598)"},
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"169.254.169.254", "cloud metadata"},
		{"169.254.1.1", "link-local"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"255.255.255.255", "broadcast"},
		{"240.0.0.1", "reserved"},
		{"192.0.0.170", "IETF protocol assignment"},
		{"198.18.0.1", "benchmarking"},
		{"::", "unspecified"},
		{"::1", "loopback"},
		{"fe80::1", "link-local"},
		{"febf::1", "link-local"},
		{"fc00::1", "unique local"},
		{"fd12:3456::1", "unique local"},
		{"fd00:ec2::254", "cloud metadata"},
		{"ff02::1", "multicast"},
		{"fec0::1", "site-local (deprecated)"},
		{"::127.0.0.1", "IPv4-compatible (deprecated)"},
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:7f00:1", "loopback"},
		{"::ffff:10.0.0.1", "private (RFC 1918)"},
		{"::ffff:169.254.169.254", "cloud metadata"},
		{"::ffff:100.64.0.1", "shared (CGNAT, RFC 6598)"},
		{"::ffff:0.0.0.0", "unspecified"},
		{"64:ff9b::a9fe:a9fe", "cloud metadata (inside IPv6)"},
		{"64:ff9b::7f00:1", "loopback (inside IPv6)"},
		{"2002:a00:1::", "private (RFC 1918) (inside IPv6)"},
		{"2002:a9fe:a9fe::1", "cloud metadata (inside IPv6)"},
		{"2001::1", "Teredo"},
		{"::ffff:0:7f00:1", "IPv4-translated (SIIT)"},
		{"::ffff:0:808:808", "IPv4-translated (SIIT)"},
		{"fe80::1%eth0", "scoped (zone)"},
		// public: never refused
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"172.32.0.1", ""},
		{"169.253.255.255", ""},
		{"2606:4700:4700::1111", ""},
		{"::ffff:8.8.8.8", ""},
		{"64:ff9b::808:808", ""},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			a := netip.MustParseAddr(tc.addr)
			why, refused := netguard.Blocked(a)
			assert.Equal(t, tc.reason != "", refused)
			assert.Equal(t, tc.reason, why)
			err := netguard.New(netguard.Options{}).Check(a)
			if tc.reason == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, netguard.ErrRefused)
			}
		})
	}
}

// TestAllowPrivate: an address inside allow_private is reached, also in
// its IPv4-mapped spelling; every other non-public address stays refused.
func TestAllowPrivate(t *testing.T) {
	t.Parallel()
	g := netguard.New(netguard.Options{AllowPrivate: []netip.Prefix{
		netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fd00:1::/32")}})
	for addr, ok := range map[string]bool{
		"10.1.2.3": true, "::ffff:10.1.2.3": true, "fd00:1::5": true,
		"10.2.0.1": false, "172.16.0.1": false, "169.254.169.254": false, "127.0.0.1": false,
		"fd00:ec2::254": false, "::ffff:10.2.0.1": false, "8.8.8.8": true,
	} {
		err := g.Check(netip.MustParseAddr(addr))
		if ok {
			assert.NoError(t, err, addr)
		} else {
			assert.ErrorIs(t, err, netguard.ErrRefused, addr)
		}
	}
}

// TestParseHost: IPv4's legacy spellings are read as the address they
// mean; a host ending in a number that is no address is refused; names
// stay names.
func TestParseHost(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]string{
		"127.0.0.1": "127.0.0.1", "127.1": "127.0.0.1", "127.0.1": "127.0.0.1", "0x7f000001": "127.0.0.1",
		"2130706433": "127.0.0.1", "0177.0.0.1": "127.0.0.1", "017700000001": "127.0.0.1", "0x7f.1": "127.0.0.1",
		"0x7F.0.0.0x1": "127.0.0.1", "127.0.0.1.": "127.0.0.1", "[::ffff:127.0.0.1]": "::ffff:127.0.0.1",
		"::1": "::1", "0": "0.0.0.0", "0x0": "0.0.0.0", "169.254.43518": "169.254.169.254",
		"0xa9fea9fe": "169.254.169.254", "3232235777": "192.168.1.1", "012.1": "10.0.0.1",
	} {
		a, ok, err := netguard.ParseHost(host)
		require.NoError(t, err, host)
		require.True(t, ok, host)
		assert.Equal(t, want, a.String(), host)
	}
	for _, host := range []string{"example.com", "localhost", "cafe", "0xcafe.example", "a1.b2", "127.0.0.1.nip.io"} {
		_, ok, err := netguard.ParseHost(host)
		assert.NoError(t, err, host)
		assert.False(t, ok, host)
	}
	for _, host := range []string{"256.1.1.1", "1.2.3.4.5", "08.1.1.1", "1.2.3.256", "4294967296", "example.0x", "a.123", "1..2", "[::gg]"} {
		_, _, err := netguard.ParseHost(host)
		assert.ErrorIs(t, err, netguard.ErrRefused, host)
	}
}

func okServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// TestLoopbackSpellings: a URL naming the loopback in any spelling is
// refused at connect (the dialer never asked) unless allow_private
// covers it; then it reaches the loopback server.
func TestLoopbackSpellings(t *testing.T) {
	t.Parallel()
	srv, hits := okServer(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	for _, host := range []string{"127.0.0.1", "127.1", "0x7f000001", "2130706433", "0177.0.0.1", "[::ffff:127.0.0.1]", "localhost"} {
		t.Run(host, func(t *testing.T) {
			u := fmt.Sprintf("http://%s:%d/", host, port)
			for _, allow := range []bool{false, true} {
				d := &loopbackOnly{t: t}
				res := &fakeResolver{answers: [][]netip.Addr{answers("127.0.0.1")}}
				o := netguard.Options{Dial: d.dial, Resolver: res}
				if allow {
					o.AllowPrivate = loopback8
				}
				before := hits.Load()
				resp, err := netguard.New(o).Client().Get(u)
				if !allow {
					require.ErrorIs(t, err, netguard.ErrRefused)
					assert.Zero(t, d.count(), "refused before any connection")
					assert.Equal(t, before, hits.Load())
					continue
				}
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Equal(t, 1, d.count())
				assert.Equal(t, before+1, hits.Load())
			}
		})
	}
}

// TestNonPublicNeverDialed: private, metadata, link-local, CGNAT,
// multicast and IPv6 hosts, as literals and as names that resolve to
// them, are refused without the dialer being asked.
func TestNonPublicNeverDialed(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"10.0.0.1", "172.16.5.4", "192.168.0.1", "100.64.0.1", "169.254.169.254", "169.254.0.1",
		"224.0.0.1", "255.255.255.255", "0.0.0.0", "fd00:ec2::254", "fc00::1", "fe80::1", "ff02::1", "::", "::ffff:10.0.0.1",
		"64:ff9b::a9fe:a9fe"} {
		d := &loopbackOnly{t: t}
		res := &fakeResolver{answers: [][]netip.Addr{answers(addr)}}
		g := netguard.New(netguard.Options{Dial: d.dial, Resolver: res, AllowPrivate: loopback8})
		host := addr
		if netip.MustParseAddr(addr).Is6() {
			host = "[" + addr + "]"
		}
		for _, u := range []string{"http://" + host + ":80/", "https://" + host + "/", "https://internal.example/"} {
			_, err := g.Client().Get(u)
			require.ErrorIs(t, err, netguard.ErrRefused, u)
			var ge *netguard.Error
			require.ErrorAs(t, err, &ge)
			assert.Equal(t, netip.MustParseAddr(addr), ge.Addr)
		}
		assert.Equal(t, 1, res.lookups(), "only the name was resolved")
		assert.Zero(t, d.count())
	}
}

// TestRebinding: a name is resolved once per connection and the
// connection made to the address checked. A resolver that answers an
// allowed address and then a forbidden one (a rebinding DNS server) gets
// the first connection to the allowed address, and the next connection is
// refused, not made to the new answer. An answer mixing allowed and
// forbidden addresses is refused whole.
func TestRebinding(t *testing.T) {
	t.Parallel()
	srv, hits := okServer(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	u := fmt.Sprintf("http://rebind.example:%d/", port)

	for _, forbidden := range []string{"169.254.169.254", "10.0.0.1", "fd00:ec2::254", "::ffff:192.168.0.1"} {
		d := &loopbackOnly{t: t}
		res := &fakeResolver{answers: [][]netip.Addr{answers("127.0.0.1"), answers(forbidden)}}
		g := netguard.New(netguard.Options{Dial: d.dial, Resolver: res, AllowPrivate: loopback8})
		c := g.Client()
		before := hits.Load()
		resp, err := c.Get(u)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 1, res.lookups())
		assert.Equal(t, []string{fmt.Sprintf("127.0.0.1:%d", port)}, d.dials, "connected to the address checked")
		c.CloseIdleConnections()
		_, err = c.Get(u)
		require.ErrorIs(t, err, netguard.ErrRefused, forbidden)
		assert.Equal(t, 2, res.lookups())
		assert.Equal(t, 1, d.count(), "the rebound answer was never dialed")
		assert.Equal(t, before+1, hits.Load())
	}

	// Public, then private: each Resolve looks up once and judges its own
	// answer (nothing is dialed here: the public answer is off the
	// loopback).
	res := &fakeResolver{answers: [][]netip.Addr{answers("93.184.215.14"), answers("169.254.169.254")}}
	g := netguard.New(netguard.Options{Dial: (&loopbackOnly{t: t}).dial, Resolver: res})
	got, err := g.Resolve(context.Background(), "rebind.example")
	require.NoError(t, err)
	assert.Equal(t, answers("93.184.215.14"), got)
	_, err = g.Resolve(context.Background(), "rebind.example")
	require.ErrorIs(t, err, netguard.ErrRefused)
	assert.Equal(t, 2, res.lookups())

	d := &loopbackOnly{t: t}
	res = &fakeResolver{answers: [][]netip.Addr{answers("127.0.0.1", "169.254.169.254")}}
	_, err = netguard.New(netguard.Options{Dial: d.dial, Resolver: res, AllowPrivate: loopback8}).Client().Get(u)
	require.ErrorIs(t, err, netguard.ErrRefused)
	assert.Zero(t, d.count())
}

// TestRedirects: a redirect on the same host is followed; one to another
// host (another loopback port, or the metadata address) is not, and that
// host never sees a request.
func TestRedirects(t *testing.T) {
	t.Parallel()
	other, otherHits := okServer(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/same", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/other", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	d := &loopbackOnly{t: t}
	c := netguard.New(netguard.Options{Dial: d.dial, AllowPrivate: loopback8}).Client()
	resp, err := c.Get(srv.URL + "/same")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	for _, p := range []string{"/other", "/metadata", "/loop"} {
		_, err = c.Get(srv.URL + p)
		require.ErrorIs(t, err, netguard.ErrRedirect, p)
	}
	assert.Zero(t, otherHits.Load())
}

// TestTLSVerified: a server whose certificate the guard does not trust is
// refused during the handshake (the handler never runs); with its CA
// trusted the same server is reached.
func TestTLSVerified(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	d := &loopbackOnly{t: t}
	_, err := netguard.New(netguard.Options{Dial: d.dial, AllowPrivate: loopback8}).Client().Get(srv.URL)
	var unknown x509.UnknownAuthorityError
	require.ErrorAs(t, err, &unknown)
	assert.Zero(t, hits.Load())

	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	resp, err := netguard.New(netguard.Options{Dial: d.dial, AllowPrivate: loopback8, RootCAs: pool}).Client().Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	assert.EqualValues(t, 1, hits.Load())
}

// TestTransportIgnoresProxy: the environment's proxy settings never
// route a guarded request elsewhere.
func TestTransportIgnoresProxy(t *testing.T) {
	t.Parallel()
	tr := netguard.New(netguard.Options{}).Transport()
	assert.Nil(t, tr.Proxy)
	assert.False(t, tr.TLSClientConfig.InsecureSkipVerify)
}

// TestDefaultDialer: without a test dialer the guard's own dialer reaches
// an allowed loopback server (its Control check passes the address).
func TestDefaultDialer(t *testing.T) {
	t.Parallel()
	srv, hits := okServer(t)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	resp, err := netguard.New(netguard.Options{AllowPrivate: loopback8}).Client().Get(u.String())
	require.NoError(t, err)
	resp.Body.Close()
	assert.EqualValues(t, 1, hits.Load())
	_, err = netguard.New(netguard.Options{}).Client().Get(u.String())
	require.ErrorIs(t, err, netguard.ErrRefused)
	assert.EqualValues(t, 1, hits.Load())
}
