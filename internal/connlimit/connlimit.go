// Package connlimit bounds the long-lived requests one caller holds open
// at once on this instance: long polls (GET /api/v1/actions/{id}?wait=,
// a worker's lease with wait, the MCP gateway's gated calls) and streams
// (the /api/v1/stream websocket, the MCP gateway's GET event stream).
// Each holds a goroutine, buffers and a connection for as long as it
// lasts, so without a bound one token could open thousands and starve
// every other caller of the instance.
//
// A Limiter counts per key (CallerKey: the authenticated principal, never
// the token, so that minting tokens or logging in again buys no more) and
// refuses the request that would go over its cap. The counts live in the
// instance's memory: the cap is per instance, as the connections are.
package connlimit

import (
	"sync"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
)

// The default caps, per caller and instance (AIRLOCK_MAX_LONG_POLLS,
// AIRLOCK_MAX_STREAMS). A long poll costs the instance a goroutine, a bus
// waiter and a connection's buffers (some tens of KiB): 64 are about 2 MiB
// for one caller, and far more than an agent waits on at once (the Go
// client waits on one action per call in flight). A stream costs at most
// 64 KiB (the fan-out benchmark's bound): 32 are 2 MiB, room for a
// reviewer's console open in many tabs (the queue and each action page
// hold one) or an agent's MCP clients (one GET stream per session).
const (
	DefaultMaxLongPolls = 64
	DefaultMaxStreams   = 32
)

// RetryAfter is what a refused caller is told to wait: a long poll lasts
// at most a minute, so one of a caller's 64 ends about every second; a
// stream ends when its caller closes one, which is up to the caller.
const (
	LongPollRetryAfter = time.Second
	StreamRetryAfter   = 5 * time.Second
)

// Limiter counts each key's requests held open. Its zero value is not
// usable; a nil *Limiter allows everything (components built without one).
type Limiter struct {
	max        int
	retryAfter time.Duration
	what       string // "long polls", "streams": what the refusal names
	setting    string // the setting that sets max, for the refusal

	mu      sync.Mutex
	held    map[string]int // only keys holding at least one
	total   int
	refused uint64
}

// New returns a Limiter letting each key hold max requests at once (max
// must be positive). A refusal says the caller holds max what, names the
// setting, and asks to retry after retryAfter.
func New(max int, retryAfter time.Duration, what, setting string) *Limiter {
	if max <= 0 {
		panic("connlimit: the cap must be positive")
	}
	return &Limiter{max: max, retryAfter: retryAfter, what: what, setting: setting, held: map[string]int{}}
}

// NewLongPolls is the limiter of long polls (AIRLOCK_MAX_LONG_POLLS).
func NewLongPolls(max int) *Limiter {
	return New(max, LongPollRetryAfter, "long polls", "AIRLOCK_MAX_LONG_POLLS")
}

// NewStreams is the limiter of streams (AIRLOCK_MAX_STREAMS).
func NewStreams(max int) *Limiter {
	return New(max, StreamRetryAfter, "streams", "AIRLOCK_MAX_STREAMS")
}

// CallerKey is what a caller is counted by: its kind and subject (agent
// id, username, worker name). Not the token: a user gets a new token at
// every login and an admin may issue an agent many, and the instance's
// resources are shared between principals, not tokens.
func CallerKey(p *auth.Principal) string {
	if p == nil {
		return ""
	}
	return string(p.Kind) + ":" + p.Subject
}

// Acquire takes one of key's slots. It returns release, which gives the
// slot back (calling it again does nothing), and true; or, when key
// already holds the cap, nil and false.
func (l *Limiter) Acquire(key string) (release func(), ok bool) {
	if l == nil {
		return func() {}, true
	}
	l.mu.Lock()
	n := l.held[key]
	if n >= l.max {
		l.refused++
		l.mu.Unlock()
		return nil, false
	}
	l.held[key] = n + 1
	l.total++
	l.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { l.release(key) }) }, true
}

func (l *Limiter) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch n := l.held[key]; {
	case n <= 0: // cannot happen: release runs once per Acquire
		return
	case n == 1:
		delete(l.held, key) // memory stays bounded by the keys holding slots
	default:
		l.held[key] = n - 1
	}
	l.total--
}

// Enter is Acquire for p, with the refusal as an error: 429 rate_limited
// with Retry-After (apperr.RateLimited).
func (l *Limiter) Enter(p *auth.Principal) (release func(), err error) {
	release, ok := l.Acquire(CallerKey(p))
	if !ok {
		return nil, l.Refusal(p)
	}
	return release, nil
}

// Refusal is the error a caller over the cap gets.
func (l *Limiter) Refusal(p *auth.Principal) *apperr.Error {
	who := "this caller"
	if p != nil {
		who = string(p.Kind) + " " + p.Subject
	}
	return apperr.RateLimited(l.retryAfter,
		"%s holds as many %s open on this server instance as one caller may (%d, %s); try again once one of them has ended",
		who, l.what, l.max, l.setting)
}

// Max is the cap (0 for a nil Limiter: none).
func (l *Limiter) Max() int {
	if l == nil {
		return 0
	}
	return l.max
}

// Held is what key holds now.
func (l *Limiter) Held(key string) int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[key]
}

// Stats reports the requests held now by every key together, the keys
// holding any, and the requests refused since the start.
func (l *Limiter) Stats() (held, keys int, refused uint64) {
	if l == nil {
		return 0, 0, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, len(l.held), l.refused
}
