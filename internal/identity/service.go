package identity

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/eventbus"
)

// Service runs identity: users, agents, tokens and authentication.
type Service struct {
	store      Store
	signer     *auth.Signer
	bus        *eventbus.Bus
	pub        Publisher
	now        func() time.Time
	sessionTTL time.Duration
	logins     *loginLimiter
}

// Config wires a Service.
type Config struct {
	Store  Store
	Signer *auth.Signer
	// Bus is this instance's event bus: a user change is published on it
	// (and through Publisher to the other instances) so that open streams
	// of that user check their session at once. Nil: not announced.
	Bus       *eventbus.Bus
	Publisher Publisher
	// SessionTTL is how long a login lasts (default DefaultSessionTTL).
	SessionTTL time.Duration
	Now        func() time.Time
}

// DefaultSessionTTL is how long a login lasts unless configured.
const DefaultSessionTTL = 12 * time.Hour

// NewService returns a Service.
func NewService(c Config) *Service {
	s := &Service{store: c.Store, signer: c.Signer, bus: c.Bus, pub: c.Publisher, now: c.Now, sessionTTL: c.SessionTTL,
		logins: newLoginLimiter()}
	if s.now == nil {
		s.now = time.Now
	}
	if s.sessionTTL <= 0 {
		s.sessionTTL = DefaultSessionTTL
	}
	return s
}

// SessionTTL is how long a login lasts.
func (s *Service) SessionTTL() time.Duration { return s.sessionTTL }

// announce tells every instance that username's sessions must be checked
// again (disabled, deleted, roles changed); an empty username: every
// session with an open stream (a token was revoked whose holder is not
// known here).
func (s *Service) announce(username string) {
	ev := eventbus.Event{Kind: eventbus.UserChanged, User: username}
	if s.bus != nil {
		s.bus.Publish(ev)
	}
	if s.pub != nil {
		s.pub.Publish(ev)
	}
}

// passwordAttempt checks password for username, from addr, under the login
// limits: refused at once (rate_limited) beyond them, before any password
// is checked; counted as a failure in advance (so concurrent guesses
// cannot all pass the limit before one fails; only slot holders take one,
// so a flood waiting for a slot cannot push entries out of the limiter's
// tables) and taken back when right. ok false: a wrong password, or an
// unknown or disabled user (the caller audits the failure; the slot is
// released). ok true: the user, and the hashing slot the check ran in,
// still held for the caller to use and release.
func (s *Service) passwordAttempt(ctx context.Context, username, password string, addr netip.Addr) (User, *auth.PasswordSlot, bool, error) {
	if err := s.logins.check(username, addr, s.now()); err != nil {
		return User{}, nil, false, err
	}
	u, err := s.store.UserByName(ctx, username)
	if err != nil && apperr.CodeOf(err) != apperr.CodeNotFound {
		return User{}, nil, false, err
	}
	slot, err := auth.AcquirePasswordSlot(ctx)
	if err != nil {
		return User{}, nil, false, err
	}
	attempt, err := s.logins.take(username, addr, s.now())
	if err != nil {
		slot.Release()
		return User{}, nil, false, err
	}
	if !slot.Check(password, u.PasswordHash) || u.Disabled {
		slot.Release()
		return u, nil, false, nil
	}
	attempt.cancel() // a success is never counted
	return u, slot, true, nil
}

// requireRole refuses a caller without one of roles.
func requireRole(p *auth.Principal, roles ...auth.Role) error {
	if !p.HasAny(roles...) {
		return apperr.Forbidden("this needs one of the roles %v", roles)
	}
	return nil
}

// Login checks a username (any case) and password from the client address
// addr and starts a session: a user token recorded with its auth.login
// event. A wrong password, an unknown, disabled or deleted user all get the
// same unauthorized answer in the same time; a failure is audited.
//
// Failures are limited (LoginFailuresPerUser per username and address,
// LoginFailuresPerAddress per address, in LoginWindow): beyond them
// rate_limited with RetryAfter, before any password is checked. The check
// runs in a slot of the process-wide hashing gate (auth.PasswordSlot):
// unavailable with RetryAfter when none frees up in time.
func (s *Service) Login(ctx context.Context, username, password string, addr netip.Addr) (auth.Token, User, error) {
	if username == "" || password == "" {
		return auth.Token{}, User{}, apperr.Invalid("username and password are required")
	}
	u, slot, ok, err := s.passwordAttempt(ctx, username, password, addr)
	if err != nil {
		return auth.Token{}, User{}, err
	}
	ip := addrString(addr)
	if !ok {
		if err := s.appendEvent(ctx, audit.Event{Kind: audit.KindLoginFailed, Actor: username, Data: map[string]any{"ip": ip}}); err != nil {
			return auth.Token{}, User{}, err
		}
		return auth.Token{}, User{}, apperr.Unauthorized("wrong username or password")
	}
	slot.Release()
	tok, err := s.signer.Issue(auth.KindUser, u.Username, u.Roles, s.sessionTTL, s.now())
	if err != nil {
		return auth.Token{}, User{}, err
	}
	ev := audit.Event{Kind: audit.KindLogin, Actor: u.Username, Data: map[string]any{"token_id": tok.ID, "ip": ip}}
	if err := s.store.RecordToken(ctx, tok, u.Username, ev); err != nil {
		return auth.Token{}, User{}, err
	}
	return tok, u, nil
}

// addrString is addr as the audit trail records it ("" when unknown).
func addrString(addr netip.Addr) string {
	if !addr.IsValid() {
		return ""
	}
	return addr.String()
}

func (s *Service) appendEvent(ctx context.Context, ev audit.Event) error {
	if err := s.store.AppendEvents(ctx, ev); err != nil {
		return fmt.Errorf("identity: recording %s: %w", ev.Kind, err)
	}
	return nil
}

// Logout ends the caller's own session on every instance, its open
// streams included.
func (s *Service) Logout(ctx context.Context, p *auth.Principal) error {
	if p == nil {
		return apperr.Unauthorized("not signed in")
	}
	if err := s.store.RevokeToken(ctx, p.TokenID, p.Subject); err != nil {
		return err
	}
	if p.Kind == auth.KindUser {
		s.announce(p.Subject)
	}
	return nil
}
