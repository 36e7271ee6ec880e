package identity

import (
	"net/netip"
	"strings"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/attempts"
)

// The login limits: failed logins are counted per (username in lower case,
// client address) and, with a higher bound, per client address across all
// usernames, in a sliding minute. A success is never counted. An IPv6
// client counts by its /64 (one host usually holds a whole /64).
const (
	// LoginFailuresPerUser is how many failed logins one address may make
	// for one username in LoginWindow.
	LoginFailuresPerUser = 10
	// LoginFailuresPerAddress is how many failed logins one address may
	// make in LoginWindow, all usernames together.
	LoginFailuresPerAddress = 100
	// LoginWindow is the window the failures are counted in.
	LoginWindow = time.Minute
)

// The tables' sizes: the oldest entries are evicted beyond them. Filling one
// within a minute takes that many failed logins, each an argon2id check,
// more than the hashing gate lets through in a minute.
const (
	loginPairKeys    = 100_000
	loginAddressKeys = 20_000
)

// loginLimiter holds the counts of one instance.
type loginLimiter struct {
	pairs *attempts.Table
	addrs *attempts.Table
}

func newLoginLimiter() *loginLimiter {
	return &loginLimiter{
		pairs: attempts.New(LoginFailuresPerUser, LoginWindow, loginPairKeys),
		addrs: attempts.New(LoginFailuresPerAddress, LoginWindow, loginAddressKeys),
	}
}

// loginKeys returns the keys of username from addr.
func loginKeys(username string, addr netip.Addr) (pair, address string) {
	a := "unknown"
	if addr.IsValid() {
		addr = addr.Unmap()
		if addr.Is6() {
			a = netip.PrefixFrom(addr, 64).Masked().String()
		} else {
			a = addr.String()
		}
	}
	name := strings.ToLower(username)
	if len(name) > 128 { // no user has a name this long; bound the key
		name = name[:128]
	}
	return name + "\x00" + a, a
}

func errTooManyLogins(wait time.Duration) error {
	return apperr.RateLimited(wait, "too many failed logins; try again in %d seconds", int((wait+time.Second-1)/time.Second))
}

// check refuses at once a login that its counts would refuse, without
// recording anything (no need to wait for a hashing slot to say no).
func (l *loginLimiter) check(username string, addr netip.Addr, now time.Time) error {
	pair, address := loginKeys(username, addr)
	if wait := max(l.pairs.Wait(pair, now), l.addrs.Wait(address, now)); wait > 0 {
		return errTooManyLogins(wait)
	}
	return nil
}

// loginAttempt is a failure recorded in advance, taken back on success:
// concurrent guesses cannot all pass the check before any has failed.
type loginAttempt struct{ pair, addr *attempts.Ticket }

// cancel takes the attempt back.
func (a loginAttempt) cancel() {
	a.pair.Cancel()
	a.addr.Cancel()
}

// take records a failure of username from addr in advance, or refuses.
func (l *loginLimiter) take(username string, addr netip.Addr, now time.Time) (loginAttempt, error) {
	pair, address := loginKeys(username, addr)
	p, wait := l.pairs.Take(pair, now)
	if p == nil {
		return loginAttempt{}, errTooManyLogins(max(wait, l.addrs.Wait(address, now)))
	}
	a, wait := l.addrs.Take(address, now)
	if a == nil {
		p.Cancel()
		return loginAttempt{}, errTooManyLogins(wait)
	}
	return loginAttempt{pair: p, addr: a}, nil
}
