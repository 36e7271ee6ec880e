// Package auth holds who is calling: the principal, its roles, the JWTs that
// carry it, the signing key and password hashing. Whether a token is still
// valid (not revoked, not logged out) is a question for the store, asked on
// every request.
package auth

import (
	"context"
	"slices"
)

// Role is a permission set.
type Role string

// The roles Airlock knows.
const (
	RoleAdmin    Role = "admin"
	RoleReviewer Role = "reviewer"
	RoleAuditor  Role = "auditor"
	RoleAgent    Role = "agent"
	RoleWorker   Role = "worker"
)

// UserRoles are the roles a human user may hold.
var UserRoles = []Role{RoleAdmin, RoleReviewer, RoleAuditor}

// ValidUserRole reports whether r may be given to a user.
func ValidUserRole(r Role) bool { return slices.Contains(UserRoles, r) }

// Kind is what sort of subject a token was issued to.
type Kind string

// Token kinds; the kind decides what Subject names.
const (
	KindUser   Kind = "user"   // Subject is a username
	KindAgent  Kind = "agent"  // Subject is an agent id
	KindWorker Kind = "worker" // Subject is a worker name
)

// Principal is the authenticated caller of a request.
type Principal struct {
	Kind    Kind
	Subject string
	Roles   []Role
	TokenID string
}

// Has reports whether p holds role r.
func (p *Principal) Has(r Role) bool { return p != nil && slices.Contains(p.Roles, r) }

// HasAny reports whether p holds any of roles.
func (p *Principal) HasAny(roles ...Role) bool {
	for _, r := range roles {
		if p.Has(r) {
			return true
		}
	}
	return false
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal in ctx, or nil.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}
