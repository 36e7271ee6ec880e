package identity_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/airlockhq/airlock/internal/identity"
)

// TestSSONames: the names a first SSO sign-in may take are valid
// usernames, never reserved, in a stable order of preference.
func TestSSONames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, subject string
		first         []string
	}{
		{"grace", "s", []string{"grace", "grace-2", "grace-3"}},
		{"Grace Hopper", "s", []string{"Grace-Hopper", "Grace-Hopper-2"}},
		{"erin+ops@example.com", "s", []string{"erin-ops@example.com", "erin-ops@example.com-2"}},
		{"System", "s", []string{"sso-user", "sso-user-2"}},
		{"policy", "s", []string{"sso-user"}},
		{"", "00u1abcd", []string{"00u1abcd", "00u1abcd-2"}},
		{"", "", []string{"sso-user"}},
		{"..__--", "", []string{"sso-user"}},
		{"ünïcode", "", []string{"n-code"}},
		{strings.Repeat("a", 80), "", []string{strings.Repeat("a", 64), strings.Repeat("a", 62) + "-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := identity.SSONames(tc.name, tc.subject)
			assert.Equal(t, tc.first, got[:len(tc.first)])
			assert.Len(t, got, 11, "the name, -2 … -9 and two random ones")
			for _, n := range got {
				assert.False(t, identity.Reserved(n), n)
				assert.Regexp(t, `^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`, n)
			}
		})
	}
}
