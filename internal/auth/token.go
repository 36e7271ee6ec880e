package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Issuer is the iss claim of every Airlock token.
const Issuer = "airlock"

// KeySize is the length of the HS256 signing key in bytes.
const KeySize = 32

// Signer issues and verifies Airlock JWTs (HS256). All server instances that
// share a database must share the key.
type Signer struct {
	key      []byte
	verified verifiedCache // verified.go
}

// NewSigner returns a Signer using key, which must be at least KeySize bytes.
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < KeySize {
		return nil, fmt.Errorf("auth: signing key is %d bytes, need at least %d", len(key), KeySize)
	}
	return &Signer{key: slices.Clone(key)}, nil
}

// Subkey is a key for a use other than tokens (label names it), derived
// from the signing key: HMAC-SHA256(key, label), the same on every
// instance that shares the key.
func (s *Signer) Subkey(label string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// LoadOrCreateKey reads the signing key from path, creating it (0600, random
// KeySize bytes, hex) when it does not exist.
func LoadOrCreateKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		key, err := hex.DecodeString(string(trimSpace(data)))
		if err != nil {
			return nil, fmt.Errorf("auth: key file %s is not hex: %w", path, err)
		}
		return key, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("auth: reading key file: %w", err)
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("auth: creating key dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) { // another instance won the race
		return LoadOrCreateKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: creating key file: %w", err)
	}
	if _, err := f.WriteString(hex.EncodeToString(key) + "\n"); err != nil {
		f.Close()
		return nil, err
	}
	return key, f.Close()
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// Claims are the JWT claims Airlock puts in a token.
type Claims struct {
	Kind  Kind   `json:"knd"`
	Roles []Role `json:"roles"`
	jwt.RegisteredClaims
}

// Token is an issued token and what it was issued for.
type Token struct {
	ID        string
	Raw       string
	Kind      Kind
	Subject   string
	Roles     []Role
	ExpiresAt time.Time
	// Targets are what a worker token may serve ("workspace:NAME",
	// "repo:NAME"); nil for other kinds. Kept in Postgres, not in the JWT.
	Targets []string
}

// NewTokenID returns a random token id (the jti).
func NewTokenID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Issue signs a token for subject valid for ttl.
func (s *Signer) Issue(kind Kind, subject string, roles []Role, ttl time.Duration, now time.Time) (Token, error) {
	id := NewTokenID()
	exp := now.Add(ttl).Truncate(time.Second)
	claims := Claims{
		Kind:  kind,
		Roles: roles,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    Issuer,
			Subject:   subject,
			ID:        id,
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
			ExpiresAt: jwt.NewNumericDate(exp),
		},
	}
	raw, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.key)
	if err != nil {
		return Token{}, fmt.Errorf("auth: signing token: %w", err)
	}
	return Token{ID: id, Raw: raw, Kind: kind, Subject: subject, Roles: roles, ExpiresAt: exp}, nil
}

// ErrBadToken is returned for any token that does not verify: malformed,
// wrong algorithm (including "none"), wrong key, wrong issuer, expired.
var ErrBadToken = errors.New("invalid or expired token")

// Verify checks raw's signature, algorithm, issuer and lifetime and returns
// the principal it names. It does not check revocation.
func (s *Signer) Verify(raw string, now time.Time) (*Principal, error) {
	if p, ok := s.verified.get(raw, now); ok {
		return p, nil
	}
	var claims Claims
	_, err := jwt.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return s.key, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(Issuer),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(func() time.Time { return now }),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	if claims.ID == "" || claims.Subject == "" {
		return nil, fmt.Errorf("%w: missing jti or sub", ErrBadToken)
	}
	switch claims.Kind {
	case KindUser, KindAgent, KindWorker:
	default:
		return nil, fmt.Errorf("%w: unknown kind", ErrBadToken)
	}
	p := &Principal{Kind: claims.Kind, Subject: claims.Subject, Roles: claims.Roles, TokenID: claims.ID}
	if claims.NotBefore != nil && claims.ExpiresAt != nil {
		s.verified.put(raw, *p, claims.NotBefore.Time, claims.ExpiresAt.Time)
	}
	return p, nil
}
