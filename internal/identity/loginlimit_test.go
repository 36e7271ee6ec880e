package identity_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/identity"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

// TestConcurrentGuessesCannotPassTheLimit: a failure is counted before the
// password is checked (and taken back on success), so guesses sent at once
// cannot all pass the limit before the first of them fails: over a burst
// and the attempts after it, exactly LoginFailuresPerUser are checked. Not
// parallel: the burst queues on the process's hashing gate for longer than
// PasswordWait, so a test signing in beside it would be refused as busy.
func TestConcurrentGuessesCannotPassTheLimit(t *testing.T) {
	svc, _ := clockedService(t)
	addr := netip.MustParseAddr("192.0.2.10")
	ctx := context.Background()
	var mu sync.Mutex
	codes := map[apperr.Code]int{}
	var wg sync.WaitGroup
	for range 3 * identity.LoginFailuresPerUser {
		wg.Go(func() {
			_, _, err := svc.Login(ctx, "rita", "wrong-password-9", addr)
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
		_, _, err := svc.Login(ctx, "rita", "wrong-password-9", addr)
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
	_, _, err := svc.Login(ctx, "rita", "rita-password-1", addr)
	assert.Equal(t, apperr.CodeRateLimited, apperr.CodeOf(err), "the right password waits too")
	_, _, err = svc.Login(ctx, "RITA", "rita-password-1", netip.MustParseAddr("192.0.2.11"))
	assert.NoError(t, err)
	_, _, err = svc.Login(ctx, "bob", "bob-password-1", addr)
	assert.NoError(t, err)
}

// TestIPv6ClientsCountByPrefix: the addresses of one /64 are one client.
func TestIPv6ClientsCountByPrefix(t *testing.T) {
	t.Parallel()
	svc, _ := clockedService(t)
	ctx := context.Background()
	for i := range identity.LoginFailuresPerUser {
		addr := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i + 1)})
		_, _, err := svc.Login(ctx, "rita", "wrong-password-9", addr)
		require.Equal(t, apperr.CodeUnauthorized, apperr.CodeOf(err), "failure %d: %v", i+1, err)
	}
	_, _, err := svc.Login(ctx, "rita", "wrong-password-9", netip.MustParseAddr("2001:db8::ffff"))
	assert.Equal(t, apperr.CodeRateLimited, apperr.CodeOf(err), "another address of the same /64")
	_, _, err = svc.Login(ctx, "rita", "wrong-password-9", netip.MustParseAddr("2001:db8:0:1::1"))
	assert.Equal(t, apperr.CodeUnauthorized, apperr.CodeOf(err), "another /64")
}

// clockedService is a service on a fresh database whose clock stands still
// until told (however long the argon2id checks take, the failures fall in
// one window), with the reviewers rita and bob.
func clockedService(t *testing.T) (*identity.Service, *clock) {
	t.Helper()
	clk := &clock{now: time.Now()}
	st := store.New(testdb.New(t), slog.New(slog.NewTextHandler(io.Discard, nil)))
	key := make([]byte, auth.KeySize)
	_, _ = rand.Read(key)
	signer, err := auth.NewSigner(key)
	require.NoError(t, err)
	for _, name := range []string{"rita", "bob"} {
		_, err = st.CreateUser(context.Background(), identity.User{Username: name, PasswordHash: mustHash(t, name+"-password-1"),
			Roles: []auth.Role{auth.RoleReviewer}}, "system")
		require.NoError(t, err)
	}
	return identity.NewService(identity.Config{Store: st, Signer: signer, Now: clk.Now}), clk
}

// clock is a test clock that moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestFailuresPerAddress: one address trying many usernames is stopped
// after LoginFailuresPerAddress failures, for every username (the right
// password of a real user too); another address is not; a minute later the
// address may try again. The clock stands still, so however long the
// argon2id checks take, all failures fall in one minute.
func TestFailuresPerAddress(t *testing.T) {
	t.Parallel()
	svc, clk := clockedService(t)
	ctx := context.Background()

	attacker := netip.MustParseAddr("198.51.100.7")
	// login retries a busy gate (503: nothing was counted).
	login := func(username, password string, addr netip.Addr) error {
		for {
			_, _, err := svc.Login(ctx, username, password, addr)
			if apperr.CodeOf(err) != apperr.CodeUnavailable {
				return err
			}
		}
	}
	next := make(chan int)
	errs := make([]error, identity.LoginFailuresPerAddress)
	var wg sync.WaitGroup
	for range auth.PasswordSlots() {
		wg.Go(func() {
			for i := range next {
				errs[i] = login(fmt.Sprintf("user-%d", i), "not-the-password", attacker)
			}
		})
	}
	for i := range errs {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		require.Equal(t, apperr.CodeUnauthorized, apperr.CodeOf(err), "failure %d (each username once): %v", i+1, err)
	}

	err := login("someone-new", "not-the-password", attacker)
	require.Equal(t, apperr.CodeRateLimited, apperr.CodeOf(err), "a new username from the same address: %v", err)
	e, _ := apperr.As(err)
	assert.Equal(t, identity.LoginWindow, e.RetryAfter, "the oldest failure leaves the window in a minute (the clock stands still)")
	assert.Equal(t, apperr.CodeRateLimited, apperr.CodeOf(login("rita", "rita-password-1", attacker)), "every username waits")
	assert.NoError(t, login("rita", "rita-password-1", netip.MustParseAddr("203.0.113.1")), "another address is not affected")

	clk.Add(identity.LoginWindow)
	assert.NoError(t, login("rita", "rita-password-1", attacker), "a minute later the address may try again")
}
