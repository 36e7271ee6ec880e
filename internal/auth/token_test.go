package auth

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newSigner(t *testing.T) *Signer {
	t.Helper()
	key, err := LoadOrCreateKey(filepath.Join(t.TempDir(), "jwt.key"))
	require.NoError(t, err)
	s, err := NewSigner(key)
	require.NoError(t, err)
	return s
}

func TestIssueAndVerify(t *testing.T) {
	t.Parallel()
	s := newSigner(t)
	now := time.Now()
	tok, err := s.Issue(KindAgent, "bot-1", []Role{RoleAgent}, time.Hour, now)
	require.NoError(t, err)
	p, err := s.Verify(tok.Raw, now)
	require.NoError(t, err)
	assert.Equal(t, &Principal{Kind: KindAgent, Subject: "bot-1", Roles: []Role{RoleAgent}, TokenID: tok.ID}, p)
	assert.True(t, p.Has(RoleAgent))
	assert.False(t, p.Has(RoleReviewer))
}

func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	s := newSigner(t)
	other := newSigner(t)
	now := time.Now()
	good, err := s.Issue(KindUser, "alice", []Role{RoleReviewer}, time.Hour, now)
	require.NoError(t, err)
	foreign, err := other.Issue(KindUser, "alice", []Role{RoleAdmin}, time.Hour, now)
	require.NoError(t, err)
	claims := jwt.MapClaims{"iss": Issuer, "sub": "alice", "jti": "x", "knd": "user", "roles": []string{"admin"}, "exp": now.Add(time.Hour).Unix()}
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims).SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)
	noExp := jwt.MapClaims{"iss": Issuer, "sub": "alice", "jti": "x", "knd": "user"}
	noExpTok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, noExp).SignedString(s.key)
	require.NoError(t, err)
	wrongIss := jwt.MapClaims{"iss": "someone", "sub": "alice", "jti": "x", "knd": "user", "exp": now.Add(time.Hour).Unix()}
	wrongIssTok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, wrongIss).SignedString(s.key)
	require.NoError(t, err)
	hs512, err := jwt.NewWithClaims(jwt.SigningMethodHS512, claims).SignedString(s.key)
	require.NoError(t, err)

	cases := map[string]struct {
		raw string
		at  time.Time
	}{
		"empty":          {"", now},
		"garbage":        {"a.b.c", now},
		"alg none":       {none, now},
		"other key":      {foreign.Raw, now},
		"expired":        {good.Raw, now.Add(2 * time.Hour)},
		"no expiry":      {noExpTok, now},
		"wrong issuer":   {wrongIssTok, now},
		"other HMAC alg": {hs512, now},
		"tampered":       {strings.Replace(good.Raw, ".", ".x", 1), now},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := s.Verify(tc.raw, tc.at)
			assert.ErrorIs(t, err, ErrBadToken)
		})
	}
}

func TestKeyFileIsReused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sub", "jwt.key")
	k1, err := LoadOrCreateKey(path)
	require.NoError(t, err)
	k2, err := LoadOrCreateKey(path)
	require.NoError(t, err)
	assert.Equal(t, k1, k2)
	assert.Len(t, k1, KeySize)
	_, err = NewSigner(k1[:8])
	assert.Error(t, err, "short keys are refused")
}

func TestPasswords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h, err := HashPassword(ctx, "a long enough password")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(h, "$argon2id$"))
	check := func(password, hash string) bool {
		ok, err := CheckPassword(ctx, password, hash)
		require.NoError(t, err)
		return ok
	}
	assert.True(t, check("a long enough password", h))
	assert.False(t, check("a long enough passworD", h))
	assert.False(t, check("anything", ""), "unknown user never matches")
	assert.False(t, check("anything", "not-a-hash"))
}

// TestVerifyRemembersOnlyWithinLifetime: a token verified once is taken
// from the cache afterwards, but only within its lifetime, only for its
// exact text and only by the Signer whose key verified it.
func TestVerifyRemembersOnlyWithinLifetime(t *testing.T) {
	t.Parallel()
	s, other := newSigner(t), newSigner(t)
	now := time.Now()
	tok, err := s.Issue(KindAgent, "bot-1", []Role{RoleAgent}, time.Hour, now)
	require.NoError(t, err)
	p, err := s.Verify(tok.Raw, now)
	require.NoError(t, err)
	p.Subject = "changed by a caller" // the cache hands out copies
	_, cached := s.verified.get(tok.Raw, now)
	require.True(t, cached, "a verified token is remembered")

	again, err := s.Verify(tok.Raw, now.Add(30*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, "bot-1", again.Subject)
	_, err = s.Verify(tok.Raw, tok.ExpiresAt)
	assert.ErrorIs(t, err, ErrBadToken, "expired at exp, cached or not")
	_, err = s.Verify(tok.Raw, now.Add(-2*time.Minute))
	assert.ErrorIs(t, err, ErrBadToken, "not yet valid before nbf, cached or not")
	_, err = other.Verify(tok.Raw, now)
	assert.ErrorIs(t, err, ErrBadToken, "another key's Signer does not share the cache")
	_, err = s.Verify(tok.Raw+"x", now)
	assert.ErrorIs(t, err, ErrBadToken)
}

func TestVerifiedCacheIsBounded(t *testing.T) {
	t.Parallel()
	var c verifiedCache
	now := time.Now()
	for i := range verifiedCacheSize * 3 {
		c.put(strings.Repeat("t", 1+i%7)+string(rune('a'+i%26))+time.Duration(i).String(), Principal{}, now, now.Add(time.Hour))
	}
	assert.LessOrEqual(t, len(c.entries), verifiedCacheSize)
}
