package identity

import (
	"context"
	"slices"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
)

// Source is where a request's token came from.
type Source int

// Token sources.
const (
	// Bearer: an Authorization: Bearer header (programs, API users).
	Bearer Source = iota
	// Cookie: the browser session cookie, which only ever holds a user
	// session.
	Cookie
)

var errUnauthorized = apperr.Unauthorized("invalid, expired or revoked token")

// Authenticate is the one check of a token, for every surface (API,
// console, websocket): the signature, algorithm, issuer and lifetime; from
// a cookie only a user session; then, in Postgres, that the token is still
// active on every instance (not revoked or logged out) and, for a user,
// that the user is neither disabled nor deleted. A user's roles are the
// ones stored now, not the ones the token was issued with. A database
// failure is returned as is: the caller fails closed.
func (s *Service) Authenticate(ctx context.Context, raw string, src Source) (*auth.Principal, error) {
	p, err := s.verify(raw, src)
	if err != nil {
		return nil, err
	}
	return s.Current(ctx, p)
}

// AuthenticateSigned is Authenticate without the database check, for a
// token of kind only: the caller must re-check the token in the statement
// that acts on it (the submit path: hitl.Guard.TokenID; a worker's lease and
// completion: store.LeaseJob, store.CompleteJob). Any other kind of token
// is checked in full.
func (s *Service) AuthenticateSigned(ctx context.Context, raw string, src Source, kind auth.Kind) (*auth.Principal, error) {
	p, err := s.verify(raw, src)
	if err != nil {
		return nil, err
	}
	if p.Kind == kind {
		return p, nil
	}
	return s.Current(ctx, p)
}

func (s *Service) verify(raw string, src Source) (*auth.Principal, error) {
	if raw == "" {
		return nil, apperr.Unauthorized("missing bearer token or session cookie")
	}
	p, err := s.signer.Verify(raw, s.now())
	if err != nil {
		return nil, errUnauthorized
	}
	if src == Cookie && p.Kind != auth.KindUser {
		return nil, apperr.Unauthorized("session cookie does not hold a user session")
	}
	return p, nil
}

// Current checks an authenticated principal again (an open stream does,
// when its user changed): unauthorized once its token or user is no longer
// active, else the principal with its user's current roles.
func (s *Service) Current(ctx context.Context, p *auth.Principal) (*auth.Principal, error) {
	st, err := s.store.TokenState(ctx, p.TokenID)
	if err != nil {
		return nil, err
	}
	if !st.Active {
		return nil, errUnauthorized
	}
	if p.Kind != auth.KindUser {
		return p, nil
	}
	cp := *p
	cp.Roles = slices.DeleteFunc(slices.Clone(st.Roles), func(r auth.Role) bool { return !auth.ValidUserRole(r) })
	return &cp, nil
}
