package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
)

// SSOIdentity is who the OpenID Connect provider says signed in, taken
// from an ID token whose signature, issuer, audience, expiry and nonce were
// verified (internal/sso). Nothing in it comes from the browser or the
// CLI.
type SSOIdentity struct {
	// Issuer and Subject name the person for good: the user linked to them
	// is the one who signs in, whatever its name.
	Issuer  string
	Subject string
	// Name is what the user is called when it is created (the token's
	// preferred_username, else its email); made a valid, free, unreserved
	// username.
	Name string
	// Roles are the Airlock roles the provider's groups map to now; they
	// replace the user's roles at every sign-in.
	Roles []auth.Role
}

// SSOUser is the row a store keeps for a user signing in through SSO.
type SSOUser struct {
	User User
	// Deleted: the linked user is a tombstone (an admin deleted it).
	Deleted bool
	// Created: the user was created by this sign-in.
	Created bool
	// ActiveAdmins is the number of active admins, counted with their rows
	// locked for the sign-in's transaction.
	ActiveAdmins int
}

// SSOEdit is what a sign-in through SSO changes, decided by the Service on
// the linked user as the store's transaction has it locked.
type SSOEdit struct {
	// Roles are the user's roles from now on (nil: unchanged).
	Roles []auth.Role
	// Events are written in the same transaction.
	Events []audit.Event
}

// SSOStore is the storage single sign-on needs beyond Store. Every change
// writes its audit events in the same transaction, or nothing.
type SSOStore interface {
	// SSOSignIn locks the active admins (counted in the SSOUser), then the
	// user linked to (issuer, subject) or, when there is none, creates one
	// with the first of names that is free in any case (no password, no
	// roles) and links it. It calls decide with the user and stores the
	// roles and events of the edit, atomically, even when decide's result
	// refuses the sign-in (refuse): the refusal is returned after the
	// commit.
	SSOSignIn(ctx context.Context, issuer, subject string, names []string,
		decide func(cur SSOUser) (edit SSOEdit, refuse error)) (User, error)
	// PutSSOCode stores a CLI sign-in's one-time code (its SHA-256) for
	// username with the CLI's PKCE challenge.
	PutSSOCode(ctx context.Context, codeHash, username, challenge string, expires time.Time) error
	// TakeSSOCode deletes a code and returns what it was stored with;
	// not_found when unknown, used or expired.
	TakeSSOCode(ctx context.Context, codeHash string) (username, challenge string, err error)
}

// SSOCodeTTL is how long the CLI has to exchange its one-time code.
const SSOCodeTTL = 2 * time.Minute

// ssoStore returns the store's SSO half, or an error when it has none.
func (s *Service) ssoStore() (SSOStore, error) {
	st, ok := s.store.(SSOStore)
	if !ok {
		return nil, fmt.Errorf("identity: the store does not keep single sign-on links")
	}
	return st, nil
}

// SSOAdmission is a user SyncSSOUser let in: only it makes one, so a
// session or CLI code is never issued for a user the provider did not
// just vouch for.
type SSOAdmission struct {
	user   User
	issuer string
	addr   netip.Addr
}

// User is the user let in, with its roles as the sign-in set them.
func (a SSOAdmission) User() User { return a.user }

// SyncSSOUser is the first half of a sign-in through SSO: it finds the
// user the provider vouched for (id), from the client address addr, and
// says whether it may sign in. StartSSOSession or IssueSSOCode is the
// second half.
//
// The user is the one linked to (issuer, subject), created with a free,
// valid, unreserved name on the first sign-in (never an existing user found
// by name). Its roles become id.Roles at every sign-in, so a group removed
// at the provider takes its role away here; the change is audited
// (user.updated) and, like an admin's change, holds at once for the user's
// open sessions. A disabled or deleted user is refused (unauthorized), and
// so is one whose groups map to no role (forbidden), the refusal audited
// (auth.login_failed). The last active admin whose groups no longer map to
// admin is refused too (forbidden, reason "last active admin"), its roles
// unchanged: the role sync never leaves Airlock without an admin
// (keepsAnAdmin), and never lets in one the provider no longer vouches
// for.
func (s *Service) SyncSSOUser(ctx context.Context, id SSOIdentity, addr netip.Addr) (SSOAdmission, error) {
	u, err := s.syncSSO(ctx, id, addr)
	if err != nil {
		return SSOAdmission{}, err
	}
	return SSOAdmission{user: u, issuer: id.Issuer, addr: addr}, nil
}

// StartSSOSession starts the console session of an admitted user: a user
// token recorded with its auth.login event (data.method "sso",
// data.issuer).
func (s *Service) StartSSOSession(ctx context.Context, a SSOAdmission) (auth.Token, error) {
	if a.user.Username == "" {
		return auth.Token{}, apperr.Unauthorized("nobody was admitted")
	}
	return s.startSSOSession(ctx, a.user, a.issuer, a.addr)
}

// IssueSSOCode is StartSSOSession for the CLI: instead of a session it
// returns a one-time code, valid SSOCodeTTL, that ExchangeSSOCode turns
// into a session for the holder of the PKCE verifier of challenge (the
// base64url SHA-256 of the CLI's verifier).
func (s *Service) IssueSSOCode(ctx context.Context, a SSOAdmission, challenge string) (string, error) {
	if a.user.Username == "" {
		return "", apperr.Unauthorized("nobody was admitted")
	}
	if !validChallenge(challenge) {
		return "", apperr.Invalid("the CLI's code challenge must be 43 base64url characters (S256)")
	}
	st, err := s.ssoStore()
	if err != nil {
		return "", err
	}
	code := rand.Text() + rand.Text()
	if err := st.PutSSOCode(ctx, codeHash(code), a.user.Username, challenge, s.now().Add(SSOCodeTTL)); err != nil {
		return "", err
	}
	return code, nil
}

// ExchangeSSOCode turns a CLI's one-time code into a session, once, for the
// holder of the verifier whose S256 challenge the code was issued with. A
// wrong, used or expired code, a wrong verifier (the code is used up all
// the same) and a user disabled meanwhile all get unauthorized.
func (s *Service) ExchangeSSOCode(ctx context.Context, code, verifier string, addr netip.Addr) (auth.Token, User, error) {
	if code == "" || verifier == "" {
		return auth.Token{}, User{}, apperr.Invalid("code and code_verifier are required")
	}
	st, err := s.ssoStore()
	if err != nil {
		return auth.Token{}, User{}, err
	}
	username, challenge, err := st.TakeSSOCode(ctx, codeHash(code))
	if apperr.CodeOf(err) == apperr.CodeNotFound {
		return auth.Token{}, User{}, apperr.Unauthorized("the sign-in code is unknown, used or expired; sign in again")
	}
	if err != nil {
		return auth.Token{}, User{}, err
	}
	sum := sha256.Sum256([]byte(verifier))
	if subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(challenge)) != 1 {
		return auth.Token{}, User{}, apperr.Unauthorized("the code verifier does not match the sign-in's challenge; sign in again")
	}
	u, err := s.store.UserByName(ctx, username)
	if err != nil && apperr.CodeOf(err) != apperr.CodeNotFound {
		return auth.Token{}, User{}, err
	}
	if err != nil || u.Disabled || len(u.Roles) == 0 {
		return auth.Token{}, User{}, apperr.Unauthorized("user %q may not sign in", username)
	}
	tok, err := s.startSSOSession(ctx, u, "", addr)
	if err != nil {
		return auth.Token{}, User{}, err
	}
	return tok, u, nil
}

func codeHash(code string) string {
	sum := sha256.Sum256([]byte(code))
	return hex.EncodeToString(sum[:])
}

// validChallenge accepts an S256 PKCE challenge: 32 bytes, base64url.
func validChallenge(c string) bool {
	b, err := base64.RawURLEncoding.DecodeString(c)
	return err == nil && len(b) == sha256.Size
}

func (s *Service) startSSOSession(ctx context.Context, u User, issuer string, addr netip.Addr) (auth.Token, error) {
	tok, err := s.signer.Issue(auth.KindUser, u.Username, u.Roles, s.sessionTTL, s.now())
	if err != nil {
		return auth.Token{}, err
	}
	data := map[string]any{"token_id": tok.ID, "ip": addrString(addr), "method": "sso"}
	if issuer != "" {
		data["issuer"] = issuer
	}
	if err := s.store.RecordToken(ctx, tok, u.Username, audit.Event{Kind: audit.KindLogin, Actor: u.Username, Data: data}); err != nil {
		return auth.Token{}, err
	}
	return tok, nil
}

// syncSSO links or creates the user of id, sets its roles from id.Roles
// and says whether it may sign in.
func (s *Service) syncSSO(ctx context.Context, id SSOIdentity, addr netip.Addr) (User, error) {
	if id.Issuer == "" || id.Subject == "" {
		return User{}, apperr.Unauthorized("the identity provider named nobody")
	}
	st, err := s.ssoStore()
	if err != nil {
		return User{}, err
	}
	roles := make([]auth.Role, 0, len(id.Roles))
	for _, r := range id.Roles {
		if auth.ValidUserRole(r) && !slices.Contains(roles, r) {
			roles = append(roles, r)
		}
	}
	slices.Sort(roles)
	ip := addrString(addr)
	changed := false
	u, err := st.SSOSignIn(ctx, id.Issuer, id.Subject, SSONames(id.Name, id.Subject), func(cur SSOUser) (SSOEdit, error) {
		u := cur.User
		failed := func(reason string) audit.Event {
			return audit.Event{Kind: audit.KindLoginFailed, Actor: u.Username,
				Data: map[string]any{"ip": ip, "method": "sso", "issuer": id.Issuer, "reason": reason}}
		}
		if cur.Deleted {
			return SSOEdit{Events: []audit.Event{failed("deleted")}}, apperr.Unauthorized("this account was deleted")
		}
		if keepsAnAdmin(u, User{Roles: roles}, cur.ActiveAdmins) != nil {
			// Airlock must keep an admin, and the provider no longer
			// vouches for this one: nothing changes and nobody signs in
			// on the provider's word against it.
			return SSOEdit{Events: []audit.Event{failed("last active admin")}},
				apperr.Forbidden("your identity provider's groups no longer give you the admin role, and you are Airlock's last active admin; " +
					"your roles are unchanged: restore your admin group at the provider, or make another admin first")
		}
		var edit SSOEdit
		if cur.Created {
			edit.Roles = roles
			edit.Events = append(edit.Events, audit.Event{Kind: audit.KindUserCreated, Actor: u.Username,
				Data: map[string]any{"username": u.Username, "roles": roles, "method": "sso", "issuer": id.Issuer, "subject": id.Subject}})
		} else if !slices.Equal(sortedRoles(u.Roles), roles) {
			edit.Roles = roles
			changed = true
			edit.Events = append(edit.Events, audit.Event{Kind: audit.KindUserUpdated, Actor: u.Username,
				Data: map[string]any{"username": u.Username, "roles": roles, "previous_roles": u.Roles, "method": "sso", "issuer": id.Issuer}})
		}
		switch {
		case u.Disabled:
			return SSOEdit{Roles: edit.Roles, Events: append(edit.Events, failed("disabled"))},
				apperr.Unauthorized("this account is disabled")
		case len(roles) == 0:
			return SSOEdit{Roles: edit.Roles, Events: append(edit.Events, failed("no role"))},
				apperr.Forbidden("your identity provider's groups give you no Airlock role; ask an admin")
		}
		return edit, nil
	})
	if changed {
		s.announce(u.Username) // open streams check the new roles at once
	}
	if err != nil {
		return User{}, err
	}
	u.Roles = roles
	return u, nil
}

func sortedRoles(r []auth.Role) []auth.Role {
	c := slices.Clone(r)
	slices.Sort(c)
	return c
}

// ssoNameFallback is the base of a name made when the provider gave none
// usable.
const ssoNameFallback = "sso-user"

// SSONames lists the usernames a user signing in through SSO for the first
// time may get, in order: name made valid (characters outside the username
// alphabet become "-", cut to fit), with "-2" … "-9" appended, then with a
// random suffix. A reserved name is never among them.
func SSONames(name, subject string) []string {
	base := sanitizeName(name)
	if base == "" {
		base = sanitizeName(subject)
	}
	if base == "" || Reserved(base) {
		base = ssoNameFallback
	}
	names := make([]string, 0, 11)
	if !Reserved(base) {
		names = append(names, base)
	}
	for i := 2; i <= 9; i++ {
		names = append(names, suffixed(base, fmt.Sprintf("-%d", i)))
	}
	names = append(names, suffixed(base, "-"+strings.ToLower(rand.Text()[:8])))
	names = append(names, suffixed(ssoNameFallback, "-"+strings.ToLower(rand.Text()[:12])))
	return slices.DeleteFunc(names, func(n string) bool { return validUsername(n) != nil })
}

// suffixed appends suffix to base, cutting base so the name fits.
func suffixed(base, suffix string) string {
	if len(base)+len(suffix) > 64 {
		base = strings.TrimRight(base[:64-len(suffix)], "._@-")
	}
	return base + suffix
}

// sanitizeName makes s a valid username, or "" when nothing of it is left.
func sanitizeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '@', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.TrimLeft(b.String(), "._@-")
	if len(out) > 64 {
		out = out[:64]
	}
	return strings.TrimRight(out, "._@-")
}
