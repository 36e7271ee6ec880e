package identity_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/identity"
)

// TestConcurrentGuessesCannotPassTheLimit: a failure is counted before the
// password is checked (and taken back on success), so guesses sent at once
// cannot all pass the limit before the first of them fails: over a burst
// and the attempts after it, exactly LoginFailuresPerUser are checked.
func TestConcurrentGuessesCannotPassTheLimit(t *testing.T) {
	t.Parallel()
	f := setup(t)
	addr := netip.MustParseAddr("192.0.2.10")
	ctx := context.Background()
	var mu sync.Mutex
	codes := map[apperr.Code]int{}
	var wg sync.WaitGroup
	for range 3 * identity.LoginFailuresPerUser {
		wg.Go(func() {
			_, _, err := f.svc.Login(ctx, "rita", "wrong-password-9", addr)
			mu.Lock()
			codes[apperr.CodeOf(err)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	checked := codes[apperr.CodeUnauthorized]
	assert.LessOrEqual(t, checked, identity.LoginFailuresPerUser, "answers %v", codes)
	for code := range codes {
		assert.Contains(t, []apperr.Code{apperr.CodeUnauthorized, apperr.CodeRateLimited, apperr.CodeUnavailable}, code)
	}
	// Attempts refused as busy were not counted: go on until refused.
	for {
		_, _, err := f.svc.Login(ctx, "rita", "wrong-password-9", addr)
		code := apperr.CodeOf(err)
		if code == apperr.CodeRateLimited {
			e, _ := apperr.As(err)
			assert.Positive(t, e.RetryAfter)
			break
		}
		if code == apperr.CodeUnauthorized {
			checked++
		}
		require.LessOrEqual(t, checked, identity.LoginFailuresPerUser, "more failures than the limit were checked")
	}
	assert.Equal(t, identity.LoginFailuresPerUser, checked)

	// rita's own address is blocked for her; she signs in from another one,
	// and bob from the same one.
	_, _, err := f.svc.Login(ctx, "rita", "rita-password-1", addr)
	assert.Equal(t, apperr.CodeRateLimited, apperr.CodeOf(err), "the right password waits too")
	_, _, err = f.svc.Login(ctx, "RITA", "rita-password-1", netip.MustParseAddr("192.0.2.11"))
	assert.NoError(t, err)
	_, _, err = f.svc.Login(ctx, "bob", "bob-password-1", addr)
	assert.NoError(t, err)
}

// TestIPv6ClientsCountByPrefix: the addresses of one /64 are one client.
func TestIPv6ClientsCountByPrefix(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	for i := range identity.LoginFailuresPerUser {
		addr := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i + 1)})
		_, _, err := f.svc.Login(ctx, "rita", "wrong-password-9", addr)
		require.Equal(t, apperr.CodeUnauthorized, apperr.CodeOf(err), "failure %d: %v", i+1, err)
	}
	_, _, err := f.svc.Login(ctx, "rita", "wrong-password-9", netip.MustParseAddr("2001:db8::ffff"))
	assert.Equal(t, apperr.CodeRateLimited, apperr.CodeOf(err), "another address of the same /64")
	_, _, err = f.svc.Login(ctx, "rita", "wrong-password-9", netip.MustParseAddr("2001:db8:0:1::1"))
	assert.Equal(t, apperr.CodeUnauthorized, apperr.CodeOf(err), "another /64")
}
