package auth

import (
	"crypto/rand"
	"fmt"
	"sync"

	"github.com/alexedwards/argon2id"
)

// PasswordParams are the argon2id parameters for new password hashes
// (RFC 9106 second recommended option, lighter memory).
var PasswordParams = &argon2id.Params{Memory: 64 * 1024, Iterations: 3, Parallelism: 2, SaltLength: 16, KeyLength: 32}

// MinPasswordLen is the shortest password accepted for a user.
const MinPasswordLen = 12

// HashPassword returns the argon2id hash of password.
func HashPassword(password string) (string, error) {
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

// CheckPassword reports whether password matches hash. With an empty hash
// (unknown user) it still spends the time of a real check, so response time
// does not reveal which usernames exist.
func CheckPassword(password, hash string) bool {
	if hash == "" {
		dummyOnce.Do(func() { dummyHash, _ = HashPassword(rand.Text()) })
		_, _ = argon2id.ComparePasswordAndHash(password, dummyHash)
		return false
	}
	ok, err := argon2id.ComparePasswordAndHash(password, hash)
	return err == nil && ok
}

// RandomPassword returns a password suitable for printing once.
func RandomPassword() string { return rand.Text() }
