package clientip

import (
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChoose(t *testing.T) {
	t.Parallel()
	trusted, err := ParsePrefixes(" 10.0.0.0/8, 192.168.1.1 ,2001:db8:ffff::/48")
	require.NoError(t, err)
	tests := []struct {
		name string
		peer string
		xff  []string
		want string
	}{
		{"untrusted peer, no header", "203.0.113.9", nil, "203.0.113.9"},
		{"untrusted peer cannot spoof", "203.0.113.9", []string{"198.51.100.1"}, "203.0.113.9"},
		{"untrusted peer cannot spoof a trusted address either", "203.0.113.9", []string{"10.0.0.1"}, "203.0.113.9"},
		{"trusted peer, no header: the peer", "10.1.2.3", nil, "10.1.2.3"},
		{"trusted peer's header is used", "10.1.2.3", []string{"198.51.100.1"}, "198.51.100.1"},
		{"right-most untrusted wins over what the client claims", "10.1.2.3", []string{"1.1.1.1, 198.51.100.1"}, "198.51.100.1"},
		{"trusted hops are skipped", "10.1.2.3", []string{"1.1.1.1, 198.51.100.1, 192.168.1.1, 10.9.9.9"}, "198.51.100.1"},
		{"several headers form one chain", "10.1.2.3", []string{"1.1.1.1", "198.51.100.1, 10.2.2.2"}, "198.51.100.1"},
		{"ports are ignored", "10.1.2.3", []string{"198.51.100.1:4711"}, "198.51.100.1"},
		{"IPv6 with port", "10.1.2.3", []string{"[2001:db8::7]:443"}, "2001:db8::7"},
		{"trusted IPv6 proxy", "2001:db8:ffff::1", []string{"2001:db8::7"}, "2001:db8::7"},
		{"IPv4-mapped peer counts as IPv4", "::ffff:10.1.2.3", []string{"198.51.100.1"}, "198.51.100.1"},
		{"garbage stops at the last good hop", "10.1.2.3", []string{"198.51.100.1, garbage, 10.2.2.2"}, "10.2.2.2"},
		{"garbage right after the peer: the peer", "10.1.2.3", []string{"not-an-ip"}, "10.1.2.3"},
		{"all trusted: the left-most", "10.1.2.3", []string{"10.5.5.5, 10.4.4.4"}, "10.5.5.5"},
		{"just outside a trusted range", "11.0.0.1", []string{"198.51.100.1"}, "11.0.0.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Choose(Peer(tc.peer), tc.xff, trusted)
			assert.Equal(t, netip.MustParseAddr(tc.want), got)
		})
	}
}

func TestResolverAddr(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "127.0.0.1:5555"
	r.Header.Set("X-Forwarded-For", "198.51.100.1")
	assert.Equal(t, netip.MustParseAddr("127.0.0.1"), New(nil).Addr(r), "no trusted proxies: the peer")
	lo, err := ParsePrefixes("127.0.0.0/8")
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr("198.51.100.1"), New(lo).Addr(r), "loopback trusted: the header")
	r.RemoteAddr = "[::1]:5555"
	assert.Equal(t, netip.MustParseAddr("::1"), New(lo).Addr(r), "::1 is not in 127.0.0.0/8")
}

func TestParsePrefixes(t *testing.T) {
	t.Parallel()
	got, err := ParsePrefixes("")
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = ParsePrefixes("10.1.2.3/8,::1,::ffff:192.168.0.0/112")
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("192.168.0.0/16")}, got)
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0.0/8;"} {
		_, err := ParsePrefixes(bad)
		assert.Error(t, err, bad)
	}
}
