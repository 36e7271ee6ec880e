package auth

import (
	"context"
	"crypto/rand"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/alexedwards/argon2id"

	"github.com/airlockhq/airlock/internal/apperr"
)

// PasswordParams are the argon2id parameters for new password hashes
// (RFC 9106 second recommended option, lighter memory).
var PasswordParams = &argon2id.Params{Memory: 64 * 1024, Iterations: 3, Parallelism: 2, SaltLength: 16, KeyLength: 32}

// MinPasswordLen is the shortest password accepted for a user.
const MinPasswordLen = 12

// Every argon2id computation (a hash or a check) takes 64 MiB for its
// duration, so the process runs at most a few at once: a slot of the one
// process-wide gate is needed for each, waited for only briefly. Beyond it
// the caller gets unavailable (503) with a Retry-After, never a queue that
// grows with the load.
const (
	// PasswordWait is how long a caller waits for a free hashing slot.
	PasswordWait = 2 * time.Second
	// passwordRetryAfter is what a refused caller is told to wait.
	passwordRetryAfter = time.Second
)

// PasswordSlots is how many argon2id computations run at once: one per
// GOMAXPROCS (each computation already runs on two threads), at least 2,
// at most 8, so at most 512 MiB of hashing memory on any host.
func PasswordSlots() int { return min(max(runtime.GOMAXPROCS(0), 2), 8) }

// passwordGate is the process-wide gate (argon2id memory is the process's).
var passwordGate = newGate(PasswordSlots(), PasswordWait)

type gate struct {
	slots chan struct{}
	wait  time.Duration
}

func newGate(n int, wait time.Duration) *gate {
	return &gate{slots: make(chan struct{}, n), wait: wait}
}

// errPasswordBusy is the answer when every hashing slot stays taken.
func errPasswordBusy() error {
	return &apperr.Error{Code: apperr.CodeUnavailable, RetryAfter: passwordRetryAfter,
		Message: "the server is busy checking other passwords; try again in a moment"}
}

// acquire takes a slot, waiting at most g.wait (and never past ctx).
func (g *gate) acquire(ctx context.Context) (*PasswordSlot, error) {
	select {
	case g.slots <- struct{}{}:
		return &PasswordSlot{g: g}, nil
	default:
	}
	t := time.NewTimer(g.wait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return &PasswordSlot{g: g}, nil
	case <-t.C:
		return nil, errPasswordBusy()
	case <-ctx.Done():
		return nil, fmt.Errorf("auth: waiting for a password slot: %w", ctx.Err())
	}
}

// PasswordSlot is the right to run argon2id computations, one at a time,
// until Release. It is the only way to hash or check a password.
type PasswordSlot struct {
	g        *gate
	released bool
}

// AcquirePasswordSlot waits briefly for a slot of the process-wide hashing
// gate: unavailable (with RetryAfter) when none frees up in PasswordWait.
// The caller must Release it.
func AcquirePasswordSlot(ctx context.Context) (*PasswordSlot, error) {
	return passwordGate.acquire(ctx)
}

// Release gives the slot back (idempotent). The finished computations'
// memory is collected at once: without that the heap would grow to twice
// the hashing memory (GOGC) before the garbage collector ran, so the bound
// would be twice what PasswordSlots promises.
func (s *PasswordSlot) Release() {
	if s.released {
		return
	}
	s.released = true
	<-s.g.slots
	runtime.GC()
}

// Hash returns the argon2id hash of password.
func (s *PasswordSlot) Hash(password string) (string, error) {
	h, err := argon2id.CreateHash(password, PasswordParams)
	if err != nil {
		return "", fmt.Errorf("auth: hashing password: %w", err)
	}
	return h, nil
}

var (
	dummyOnce sync.Once
	dummyHash string
)

// Check reports whether password matches hash. With an empty hash
// (unknown user) it still spends the time of a real check, so response time
// does not reveal which usernames exist.
func (s *PasswordSlot) Check(password, hash string) bool {
	if hash == "" {
		dummyOnce.Do(func() { dummyHash, _ = s.Hash(rand.Text()) })
		_, _ = argon2id.ComparePasswordAndHash(password, dummyHash)
		return false
	}
	ok, err := argon2id.ComparePasswordAndHash(password, hash)
	return err == nil && ok
}

// HashPassword returns the argon2id hash of password, in a slot of the
// hashing gate (unavailable when none frees up in time).
func HashPassword(ctx context.Context, password string) (string, error) {
	slot, err := AcquirePasswordSlot(ctx)
	if err != nil {
		return "", err
	}
	defer slot.Release()
	return slot.Hash(password)
}

// CheckPassword reports whether password matches hash (see
// PasswordSlot.Check), in a slot of the hashing gate.
func CheckPassword(ctx context.Context, password, hash string) (bool, error) {
	slot, err := AcquirePasswordSlot(ctx)
	if err != nil {
		return false, err
	}
	defer slot.Release()
	return slot.Check(password, hash), nil
}

// RandomPassword returns a password suitable for printing once.
func RandomPassword() string { return rand.Text() }
