// Package sso is single sign-on through an OpenID Connect provider, for
// the console and the CLI: the authorization code flow with PKCE, its
// state and nonce checked, the ID token verified against the provider's
// keys (github.com/coreos/go-oidc), and the verified identity handed to
// identity.Service, which owns every rule about the user it signs in (the
// link by issuer and subject, the name, the roles, disabled accounts).
//
// This package maps the provider's groups to Airlock roles (the role map)
// and hands them, as they are, to a GroupSync for Airlock's reviewer
// groups. The console (internal/web) and the JSON API (internal/httpapi)
// only decode, call the Service and respond.
package sso

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/airlockhq/airlock/internal/auth"
)

// Config is single sign-on's configuration (AIRLOCK_OIDC_*); an empty
// Issuer leaves it off.
type Config struct {
	// Issuer is the provider's issuer URL (AIRLOCK_OIDC_ISSUER); its
	// discovery document is read at the first sign-in.
	Issuer string
	// ClientID and ClientSecret are Airlock's client at the provider
	// (AIRLOCK_OIDC_CLIENT_ID, AIRLOCK_OIDC_CLIENT_SECRET).
	ClientID     string
	ClientSecret string
	// GroupsClaim is the ID token claim holding the user's groups
	// (AIRLOCK_OIDC_GROUPS_CLAIM, default "groups").
	GroupsClaim string
	// RoleMap gives the Airlock roles each provider group grants
	// (AIRLOCK_OIDC_ROLE_MAP, "idp-group=role,…"; a group may be named
	// more than once).
	RoleMap map[string][]auth.Role
	// Scopes are asked of the provider (AIRLOCK_OIDC_SCOPES, space or
	// comma separated; default "openid profile email groups"); "openid" is
	// always among them.
	Scopes []string
}

// DefaultGroupsClaim is the ID token claim read for groups unless
// configured.
const DefaultGroupsClaim = "groups"

// DefaultScopes are asked of the provider unless configured.
var DefaultScopes = []string{"openid", "profile", "email", "groups"}

// Enabled reports whether single sign-on is configured.
func (c Config) Enabled() bool { return c.Issuer != "" }

// ConfigFromEnv reads AIRLOCK_OIDC_* from the environment.
func ConfigFromEnv() (Config, error) {
	c := Config{
		Issuer:       strings.TrimSpace(os.Getenv("AIRLOCK_OIDC_ISSUER")),
		ClientID:     strings.TrimSpace(os.Getenv("AIRLOCK_OIDC_CLIENT_ID")),
		ClientSecret: os.Getenv("AIRLOCK_OIDC_CLIENT_SECRET"),
		GroupsClaim:  strings.TrimSpace(os.Getenv("AIRLOCK_OIDC_GROUPS_CLAIM")),
	}
	if s := os.Getenv("AIRLOCK_OIDC_SCOPES"); s != "" {
		c.Scopes = strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' })
	}
	m, err := ParseRoleMap(os.Getenv("AIRLOCK_OIDC_ROLE_MAP"))
	if err != nil {
		return c, fmt.Errorf("AIRLOCK_OIDC_ROLE_MAP: %w", err)
	}
	c.RoleMap = m
	return c, c.Normalise()
}

// Normalise fills the defaults and checks a configuration that is
// enabled: an absolute http(s) issuer and a client ID.
func (c *Config) Normalise() error {
	if !c.Enabled() {
		return nil
	}
	u, err := url.Parse(c.Issuer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("AIRLOCK_OIDC_ISSUER must be an http(s) URL, got %q", c.Issuer)
	}
	if c.ClientID == "" {
		return fmt.Errorf("AIRLOCK_OIDC_CLIENT_ID is required with AIRLOCK_OIDC_ISSUER")
	}
	if c.GroupsClaim == "" {
		c.GroupsClaim = DefaultGroupsClaim
	}
	if len(c.Scopes) == 0 {
		c.Scopes = slices.Clone(DefaultScopes)
	}
	if !slices.Contains(c.Scopes, "openid") {
		c.Scopes = append([]string{"openid"}, c.Scopes...)
	}
	return nil
}

// ParseRoleMap parses "idp-group=role,…" (spaces around items ignored). A
// role must be a user role (admin, reviewer, auditor).
func ParseRoleMap(s string) (map[string][]auth.Role, error) {
	m := map[string][]auth.Role{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		group, role, ok := strings.Cut(item, "=")
		group, role = strings.TrimSpace(group), strings.TrimSpace(role)
		if !ok || group == "" || role == "" {
			return nil, fmt.Errorf("%q is not group=role", item)
		}
		r := auth.Role(role)
		if !auth.ValidUserRole(r) {
			return nil, fmt.Errorf("%q: %q is not a user role (admin, reviewer, auditor)", item, role)
		}
		if !slices.Contains(m[group], r) {
			m[group] = append(m[group], r)
		}
	}
	return m, nil
}

// Roles are the Airlock roles groups grant through the role map, sorted,
// without repeats.
func (c Config) Roles(groups []string) []auth.Role {
	var out []auth.Role
	for _, g := range groups {
		for _, r := range c.RoleMap[g] {
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	slices.Sort(out)
	return out
}
