package auth

import (
	"sync"
	"time"
)

// verifiedCacheSize bounds how many verified tokens a Signer remembers.
const verifiedCacheSize = 4096

// verifiedCache remembers tokens whose signature, algorithm, issuer and
// claims a Signer has checked, so that an agent's every request does not
// parse and MAC its token again. A token is only ever found under its exact
// text, which verified under the Signer's own key; its lifetime is checked
// on every hit, as jwt checks it. Revocation is not the Signer's business:
// callers check it on every request, cached or not.
type verifiedCache struct {
	mu      sync.RWMutex
	entries map[string]verifiedToken
}

type verifiedToken struct {
	p        Principal
	nbf, exp time.Time
}

// get returns a copy of raw's principal when raw verified before and is
// within its lifetime at now.
func (c *verifiedCache) get(raw string, now time.Time) (*Principal, bool) {
	c.mu.RLock()
	e, ok := c.entries[raw]
	c.mu.RUnlock()
	// As jwt: valid from nbf on, expired at exp.
	if !ok || now.Before(e.nbf) || !now.Before(e.exp) {
		return nil, false
	}
	p := e.p
	return &p, true
}

// put remembers a verified token; when full, it forgets an arbitrary
// eighth of the others first.
func (c *verifiedCache) put(raw string, p Principal, nbf, exp time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = make(map[string]verifiedToken)
	}
	if len(c.entries) >= verifiedCacheSize {
		n := verifiedCacheSize / 8
		for k := range c.entries {
			delete(c.entries, k)
			if n--; n == 0 {
				break
			}
		}
	}
	c.entries[raw] = verifiedToken{p: p, nbf: nbf, exp: exp}
}
