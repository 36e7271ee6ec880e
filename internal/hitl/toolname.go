package hitl

import (
	"strings"

	"github.com/airlockhq/airlock/internal/apperr"
)

// MaxToolNameLen is the longest tool name accepted, in bytes.
const MaxToolNameLen = 128

// CanonicalToolName returns the one spelling of a tool name that policy
// rules and grants see: tool names are case-insensitive and stored lower
// case, and only [a-z0-9._-] may follow a first letter or digit. Any other
// name is refused (apperr.CodeInvalid), never rewritten: "payments/send" or
// "payments:send" could otherwise slip past a rule for payments.send.
func CanonicalToolName(name string) (string, error) {
	if name == "" {
		return "", apperr.Invalid("tool is required")
	}
	if len(name) > MaxToolNameLen {
		return "", apperr.Invalid("tool is longer than %d bytes", MaxToolNameLen)
	}
	lower := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case 'A' <= c && c <= 'Z':
			lower = false
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return "", apperr.Invalid("tool must be 1-%d characters: a letter or digit, then letters, digits and . _ - (case-insensitive)", MaxToolNameLen)
		}
	}
	if lower {
		return name, nil
	}
	return strings.ToLower(name), nil // ASCII only: the loop refused the rest
}
