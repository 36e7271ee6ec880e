package auth

import (
	"context"
	"testing"
	"time"

	"github.com/alexedwards/argon2id"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apperr"
)

func TestPasswordSlots(t *testing.T) {
	t.Parallel()
	n := PasswordSlots()
	assert.GreaterOrEqual(t, n, 2)
	assert.LessOrEqual(t, n, 8)
}

// TestGateBoundsConcurrentHashing: beyond its slots a caller waits only
// briefly, then gets unavailable with a Retry-After; a released slot is
// free again.
func TestGateBoundsConcurrentHashing(t *testing.T) {
	t.Parallel()
	g := newGate(2, 20*time.Millisecond)
	ctx := context.Background()
	a, err := g.acquire(ctx)
	require.NoError(t, err)
	b, err := g.acquire(ctx)
	require.NoError(t, err)

	_, err = g.acquire(ctx)
	e, ok := apperr.As(err)
	require.True(t, ok, "got %v", err)
	assert.Equal(t, apperr.CodeUnavailable, e.Code)
	assert.Positive(t, e.RetryAfter)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = newGate(1, time.Hour).acquireFull(t, cctx)
	assert.ErrorIs(t, err, context.Canceled, "a cancelled caller stops waiting")

	a.Release()
	a.Release() // idempotent: frees one slot only
	c, err := g.acquire(ctx)
	require.NoError(t, err, "a released slot is free again")
	_, err = g.acquire(ctx)
	assert.Equal(t, apperr.CodeUnavailable, apperr.CodeOf(err), "still only two at once")
	b.Release()
	c.Release()
}

// acquireFull takes g's only slot, then acquires again with ctx.
func (g *gate) acquireFull(t *testing.T, ctx context.Context) (*PasswordSlot, error) {
	t.Helper()
	s, err := g.acquire(context.Background())
	require.NoError(t, err)
	defer s.Release()
	return g.acquire(ctx)
}

// TestHashesStayCompatible: hashes stored before (alexedwards/argon2id over
// x/crypto) still verify, and new ones verify there too.
func TestHashesStayCompatible(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old, err := argon2id.CreateHash("a long enough password", PasswordParams)
	require.NoError(t, err)
	ok, err := CheckPassword(ctx, "a long enough password", old)
	require.NoError(t, err)
	assert.True(t, ok, "an old hash verifies")
	ok, err = CheckPassword(ctx, "a long enough passworD", old)
	require.NoError(t, err)
	assert.False(t, ok)

	h, err := HashPassword(ctx, "another long password")
	require.NoError(t, err)
	ok, err = argon2id.ComparePasswordAndHash("another long password", h)
	require.NoError(t, err)
	assert.True(t, ok, "a new hash is standard argon2id")
}
