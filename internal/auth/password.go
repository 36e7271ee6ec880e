package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/alexedwards/argon2id"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth/argon2"
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

// gate hands out slots, each with its own argon2 arena: the hashing memory
// is mapped once per slot (on first use) outside the Go heap and given back
// to the system after every use, so it is exactly slots × 64 MiB at most,
// whatever the garbage collector does.
type gate struct {
	slots chan *argon2.Arena // nil: the slot's arena is not mapped yet
	wait  time.Duration
}

func newGate(n int, wait time.Duration) *gate {
	g := &gate{slots: make(chan *argon2.Arena, n), wait: wait}
	for range n {
		g.slots <- nil
	}
	return g
}

// errPasswordBusy is the answer when every hashing slot stays taken.
func errPasswordBusy() error {
	return &apperr.Error{Code: apperr.CodeUnavailable, RetryAfter: passwordRetryAfter,
		Message: "the server is busy checking other passwords; try again in a moment"}
}

// acquire takes a slot, waiting at most g.wait (and never past ctx).
func (g *gate) acquire(ctx context.Context) (*PasswordSlot, error) {
	var arena *argon2.Arena
	select {
	case arena = <-g.slots:
	default:
		t := time.NewTimer(g.wait)
		defer t.Stop()
		select {
		case arena = <-g.slots:
		case <-t.C:
			return nil, errPasswordBusy()
		case <-ctx.Done():
			return nil, fmt.Errorf("auth: waiting for a password slot: %w", ctx.Err())
		}
	}
	if arena == nil {
		// A failed mapping leaves the slot without an arena: its
		// computations then allocate on the heap, still one at a time.
		arena, _ = argon2.NewArena(PasswordParams.Memory)
	}
	return &PasswordSlot{g: g, arena: arena}, nil
}

// PasswordSlot is the right to run argon2id computations, one at a time,
// until Release. It is the only way to hash or check a password.
type PasswordSlot struct {
	g     *gate
	arena *argon2.Arena
	done  bool
}

// AcquirePasswordSlot waits briefly for a slot of the process-wide hashing
// gate: unavailable (with RetryAfter) when none frees up in PasswordWait.
// The caller must Release it.
func AcquirePasswordSlot(ctx context.Context) (*PasswordSlot, error) {
	return passwordGate.acquire(ctx)
}

// Release wipes the slot's memory, gives its pages back to the system and
// the slot back to the gate (idempotent).
func (s *PasswordSlot) Release() {
	if s.done {
		return
	}
	s.done = true
	if err := s.arena.Reset(); err != nil {
		_ = s.arena.Close()
		s.arena = nil
	}
	s.g.slots <- s.arena
}

// Hash returns the argon2id hash of password, in the PHC string format
// ($argon2id$v=19$m=…,t=…,p=…$salt$key).
func (s *PasswordSlot) Hash(password string) (string, error) {
	p := PasswordParams
	salt := make([]byte, p.SaltLength)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("auth: hashing password: %w", err)
	}
	key := s.arena.IDKey([]byte(password), salt, p.Iterations, p.Memory, p.Parallelism, p.KeyLength)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.Memory, p.Iterations, p.Parallelism,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
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
		_ = s.check(password, dummyHash)
		return false
	}
	return s.check(password, hash)
}

func (s *PasswordSlot) check(password, hash string) bool {
	p, salt, key, err := argon2id.DecodeHash(hash)
	if err != nil || p.Iterations < 1 || p.Parallelism < 1 {
		return false
	}
	other := s.arena.IDKey([]byte(password), salt, p.Iterations, p.Memory, p.Parallelism, p.KeyLength)
	return subtle.ConstantTimeCompare(key, other) == 1
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
