package netguard

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestControlRechecks: the default dialer's connect-time check refuses a
// non-public address on its own (it is called here directly: nothing
// connects).
func TestControlRechecks(t *testing.T) {
	t.Parallel()
	g := New(Options{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	for _, a := range []string{"10.0.0.1:80", "[fd00:ec2::254]:80", "169.254.169.254:80", "[::ffff:10.0.0.1]:443", "nonsense"} {
		assert.ErrorIs(t, g.control("tcp", a, nil), ErrRefused, a)
	}
	assert.NoError(t, g.control("tcp", "127.0.0.1:80", nil))
	assert.NoError(t, g.control("tcp", "[::ffff:127.0.0.1]:80", nil))
}
