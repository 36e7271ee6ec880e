package argon2

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	xargon2 "golang.org/x/crypto/argon2"
)

// TestIDKeyMatchesUpstream: the arena changes where the work happens, not
// the result, also when the arena is reused, reset, too small or absent.
func TestIDKeyMatchesUpstream(t *testing.T) {
	t.Parallel()
	a, err := NewArena(4 * 1024)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	cases := []struct {
		password, salt string
		time, memory   uint32
		threads        uint8
	}{
		{"password", "somesaltsomesalt", 1, 64, 1},
		{"correct horse battery staple", "0123456789abcdef", 3, 4 * 1024, 2},
		{"", "saltsaltsaltsalt", 2, 1000, 4},                          // memory rounded down to the lanes
		{"too big for the arena", "saltsaltsaltsalt", 1, 8 * 1024, 2}, // heap fallback
	}
	for range 2 {
		for _, c := range cases {
			want := xargon2.IDKey([]byte(c.password), []byte(c.salt), c.time, c.memory, c.threads, 32)
			assert.Equal(t, want, a.IDKey([]byte(c.password), []byte(c.salt), c.time, c.memory, c.threads, 32), "%+v", c)
			var none *Arena
			assert.Equal(t, want, none.IDKey([]byte(c.password), []byte(c.salt), c.time, c.memory, c.threads, 32), "no arena: %+v", c)
		}
		require.NoError(t, a.Reset())
	}
}
