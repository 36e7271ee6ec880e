package audit

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Checkpoint is a signed statement of the chain's head: "the event sealed
// at seq has hash", signed with Ed25519 by the server's audit key. The
// sealer stores one every few seconds; GET /api/v1/audit/checkpoints exports
// them (one JSON object per line). A copy kept outside the database lets
// verification detect a chain truncated below it or rewritten consistently
// before it, which the chain alone cannot show.
type Checkpoint struct {
	Seq       int64             `json:"seq"`
	Hash      HexBytes          `json:"hash"`
	At        time.Time         `json:"at"`
	PublicKey ed25519.PublicKey `json:"public_key"` // base64
	Signature []byte            `json:"signature"`  // base64
}

// Message returns the bytes a checkpoint's signature covers:
//
//	"airlock.audit.checkpoint.v1\n" <seq> "\n" <hash, lowercase hex> "\n" <at, UTC, 6 fractional digits> "\n"
func (c *Checkpoint) Message() []byte {
	b := []byte("airlock.audit.checkpoint.v1\n")
	b = strconv.AppendInt(b, c.Seq, 10)
	b = append(b, '\n')
	b = append(hex.AppendEncode(b, c.Hash), '\n')
	b = c.At.UTC().AppendFormat(b, "2006-01-02T15:04:05.000000Z07:00")
	return append(b, '\n')
}

// Verify checks the signature against the checkpoint's own public key.
// Whether that key is to be trusted is the caller's question.
func (c *Checkpoint) Verify() error {
	if len(c.PublicKey) != ed25519.PublicKeySize || len(c.Hash) != HashSize || c.Seq < 1 {
		return errors.New("audit: malformed checkpoint")
	}
	if !ed25519.Verify(c.PublicKey, c.Message(), c.Signature) {
		return errors.New("audit: checkpoint signature does not verify")
	}
	return nil
}

// ParseCheckpoint reads a checkpoint as exported: its JSON object, or that
// JSON in base64 (standard or URL alphabet, padded or not), and checks its
// signature.
func ParseCheckpoint(s string) (Checkpoint, error) {
	var c Checkpoint
	s = strings.TrimSpace(s)
	raw := []byte(s)
	if !strings.HasPrefix(s, "{") {
		var err error
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
			if raw, err = enc.DecodeString(s); err == nil {
				break
			}
		}
		if err != nil {
			return c, errors.New("audit: a checkpoint is its JSON object or that JSON in base64")
		}
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("audit: reading checkpoint: %w", err)
	}
	return c, c.Verify()
}

// SigningKey signs checkpoints.
type SigningKey struct {
	priv ed25519.PrivateKey
}

// NewSigningKey returns the Ed25519 key derived from a 32-byte seed (the
// contents of AIRLOCK_AUDIT_KEY_FILE).
func NewSigningKey(seed []byte) (*SigningKey, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("audit: the audit key is %d bytes, want a %d-byte Ed25519 seed", len(seed), ed25519.SeedSize)
	}
	return &SigningKey{priv: ed25519.NewKeyFromSeed(seed)}, nil
}

// Public returns the key checkpoints are verified with.
func (k *SigningKey) Public() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }

// Sign returns the checkpoint of the chain's head (seq, hash) at time at.
func (k *SigningKey) Sign(seq int64, hash []byte, at time.Time) Checkpoint {
	c := Checkpoint{Seq: seq, Hash: hash, At: at.UTC().Truncate(time.Microsecond), PublicKey: k.Public()}
	c.Signature = ed25519.Sign(k.priv, c.Message())
	return c
}

// ParsePublicKey reads an audit public key as a checkpoint's public_key
// carries it: its 32 bytes in standard base64.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("audit: %q is not an audit public key (a checkpoint's public_key: %d bytes in base64)", s, ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// ParsePublicKeys reads a comma-separated list of audit public keys (see
// ParsePublicKey), as AIRLOCK_AUDIT_PREVIOUS_KEYS holds them; empty
// entries are skipped, a key listed twice is an error.
func ParsePublicKeys(s string) ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		k, err := ParsePublicKey(f)
		if err != nil {
			return nil, err
		}
		if keyRank(keys, k) >= 0 {
			return nil, fmt.Errorf("audit: the key %s is listed twice", strings.TrimSpace(f))
		}
		keys = append(keys, k)
	}
	return keys, nil
}
