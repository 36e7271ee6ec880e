// Package ssotest starts a real OpenID Connect provider on 127.0.0.1 for
// tests (github.com/oauth2-proxy/mockoidc: its own authorization and token
// endpoints, discovery document, JWKS and RS256-signed ID tokens, PKCE
// checked at the token endpoint) and the sso.Config that points at it.
package ssotest

import (
	"testing"

	"github.com/oauth2-proxy/mockoidc"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/sso"
)

// Provider is a running provider. The authorization endpoint signs in, at
// once and without a page, the next user queued with Next (the provider's
// default user when none is queued).
type Provider struct {
	M *mockoidc.MockOIDC
}

// Start starts a provider for t and stops it when t ends.
func Start(t testing.TB) *Provider {
	t.Helper()
	m, err := mockoidc.Run()
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Shutdown() })
	// mockoidc computes its key id lazily, unguarded, on the first token it
	// signs: two sign-ins at once raced on it. Computed here, before any
	// request, every later call only reads it.
	_, err = m.Keypair.KeyID()
	require.NoError(t, err)
	return &Provider{M: m}
}

// RoleMap is the role map the tests configure: group "airlock-admins"
// grants admin, "airlock-reviewers" reviewer, "airlock-auditors" and
// "airlock-reviewers" auditor.
const RoleMap = "airlock-admins=admin, airlock-reviewers=reviewer, airlock-reviewers=auditor, airlock-auditors=auditor"

// Config is the sso.Config of the provider with RoleMap.
func (p *Provider) Config(t testing.TB) sso.Config {
	t.Helper()
	rm, err := sso.ParseRoleMap(RoleMap)
	require.NoError(t, err)
	c := p.M.Config()
	return sso.Config{Issuer: c.Issuer, ClientID: c.ClientID, ClientSecret: c.ClientSecret, RoleMap: rm}
}

// User is a person at the provider.
type User struct {
	Subject, PreferredUsername, Email string
	Groups                            []string
}

// Next queues u as who the next authorization signs in.
func (p *Provider) Next(u User) {
	p.M.QueueUser(&mockoidc.MockUser{Subject: u.Subject, PreferredUsername: u.PreferredUsername, Email: u.Email,
		EmailVerified: true, Groups: u.Groups})
}

// Roles is a shorthand for role lists in assertions.
func Roles(r ...auth.Role) []auth.Role { return r }
