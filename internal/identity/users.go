package identity

import (
	"context"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
)

// usernameRe is the shape of a username (the users table checks it too).
var usernameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// reservedNames are names a person may not take, in any case: they are
// words Airlock itself writes where a username goes (decision.by "policy",
// actor "system", decision sources grant, validator, risk, fleet, agent,
// default) or could be mistaken for it.
var reservedNames = []string{"policy", "system", "grant", "validator", "risk", "fleet", "agent", "default", "airlock"}

// Reserved reports whether name is reserved for Airlock's own use.
func Reserved(name string) bool { return slices.Contains(reservedNames, strings.ToLower(name)) }

// MaxPasswordBytes bounds a password (argon2id hashes all of it).
const MaxPasswordBytes = 1024

func validUsername(name string) error {
	if !usernameRe.MatchString(name) {
		return apperr.Invalid("username must be 1-64 letters, digits or . _ @ -, starting with a letter or digit")
	}
	if Reserved(name) {
		return apperr.Invalid("username %q is reserved", name)
	}
	return nil
}

func validPassword(password string) error {
	if utf8.RuneCountInString(password) < auth.MinPasswordLen || len(password) > MaxPasswordBytes {
		return apperr.Invalid("password must be %d to %d characters long", auth.MinPasswordLen, MaxPasswordBytes)
	}
	return nil
}

// validRoles checks a user's roles and returns them without repeats.
func validRoles(roles []auth.Role) ([]auth.Role, error) {
	if len(roles) == 0 {
		return nil, apperr.Invalid("roles must name at least one of admin, reviewer, auditor")
	}
	out := make([]auth.Role, 0, len(roles))
	for _, r := range roles {
		if !auth.ValidUserRole(r) {
			return nil, apperr.Invalid("role %q is not a user role (admin, reviewer, auditor)", r)
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// NewUser is a request to create a user.
type NewUser struct {
	Username string      `json:"username"`
	Password string      `json:"password"`
	Roles    []auth.Role `json:"roles"`
}

// CreateUser creates a user (admin). The name must be free in any case
// and not reserved.
func (s *Service) CreateUser(ctx context.Context, actor *auth.Principal, req NewUser) (User, error) {
	if err := requireRole(actor, auth.RoleAdmin); err != nil {
		return User{}, err
	}
	if err := validUsername(req.Username); err != nil {
		return User{}, err
	}
	if err := validPassword(req.Password); err != nil {
		return User{}, err
	}
	roles, err := validRoles(req.Roles)
	if err != nil {
		return User{}, err
	}
	hash, err := auth.HashPassword(ctx, req.Password)
	if err != nil {
		return User{}, err
	}
	return s.store.CreateUser(ctx, User{Username: req.Username, PasswordHash: hash, Roles: roles}, actor.Subject)
}

// Users lists the users (admin).
func (s *Service) Users(ctx context.Context, actor *auth.Principal) ([]User, error) {
	if err := requireRole(actor, auth.RoleAdmin); err != nil {
		return nil, err
	}
	return s.store.Users(ctx)
}

// UserPatch is a change to a user; nil fields stay as they are.
type UserPatch struct {
	Roles    *[]auth.Role `json:"roles,omitempty"`
	Disabled *bool        `json:"disabled,omitempty"`
	Password *string      `json:"password,omitempty"`
	// CurrentPassword proves a user's own password change.
	CurrentPassword *string `json:"current_password,omitempty"`
	// Addr is the client's address, set by the surface (never read from a
	// body): a wrong current password counts against the user's login
	// limits from there.
	Addr netip.Addr `json:"-"`
}

// UpdateUser changes a user. An admin may change anyone's roles, disabled
// flag and password; every user may change its own password, giving the
// current one (an admin too, for itself). Disabling a user ends its
// sessions and tokens at once on every instance; a password change ends
// every other session of the user. The last active admin cannot be
// disabled or lose the admin role (conflict).
//
// A current password is checked under the login limits (see Login): a
// wrong one is a failed login of the user from patch.Addr, audited as one,
// and beyond the limits the change is refused (rate_limited with
// RetryAfter) before any password is checked. The new password is hashed
// only once the current one is right.
func (s *Service) UpdateUser(ctx context.Context, actor *auth.Principal, username string, patch UserPatch) (User, error) {
	if actor == nil || actor.Kind != auth.KindUser {
		return User{}, apperr.Forbidden("only users change users")
	}
	self := strings.EqualFold(actor.Subject, username)
	admin := actor.Has(auth.RoleAdmin)
	if patch.Roles == nil && patch.Disabled == nil && patch.Password == nil {
		return User{}, apperr.Invalid("nothing to change: give roles, disabled or password")
	}
	switch {
	case !admin && !self:
		return User{}, apperr.Forbidden("only an admin changes other users")
	case !admin && (patch.Roles != nil || patch.Disabled != nil):
		return User{}, apperr.Forbidden("only an admin changes roles or disables users")
	case self && patch.Password != nil && patch.CurrentPassword == nil:
		return User{}, apperr.Invalid("current_password is required to change your own password")
	case patch.CurrentPassword != nil && (!self || patch.Password == nil):
		return User{}, apperr.Invalid("current_password goes only with a change of your own password")
	}
	var roles []auth.Role
	if patch.Roles != nil {
		var err error
		if roles, err = validRoles(*patch.Roles); err != nil {
			return User{}, err
		}
	}
	// The current password is checked (and the new one hashed) before the
	// transaction (argon2id takes a hashing slot and a while; no row stays
	// locked meanwhile), and the transaction goes on only if the hash it
	// was checked against is still the stored one.
	var hash, checked string
	if patch.Password != nil {
		if err := validPassword(*patch.Password); err != nil {
			return User{}, err
		}
		var err error
		if patch.CurrentPassword != nil {
			hash, checked, err = s.checkCurrentPassword(ctx, username, *patch.CurrentPassword, *patch.Password, patch.Addr)
		} else {
			hash, err = auth.HashPassword(ctx, *patch.Password)
		}
		if err != nil {
			return User{}, err
		}
	}
	u, err := s.store.UpdateUser(ctx, username, func(cur User, activeAdmins int) (UserEdit, error) {
		next := cur
		data := map[string]any{"username": cur.Username}
		edit := UserEdit{Event: audit.Event{Kind: audit.KindUserUpdated, Actor: actor.Subject, Data: data}}
		if patch.CurrentPassword != nil && cur.PasswordHash != checked {
			return UserEdit{}, apperr.Conflict("the password changed meanwhile; try again")
		}
		if roles != nil && !slices.Equal(roles, cur.Roles) {
			next.Roles = roles
			data["roles"], data["previous_roles"] = roles, cur.Roles
		}
		if patch.Disabled != nil && *patch.Disabled != cur.Disabled {
			next.Disabled = *patch.Disabled
			data["disabled"] = next.Disabled
			edit.RevokeTokens = next.Disabled
		}
		if patch.Password != nil {
			next.PasswordHash = hash
			data["password_changed"] = true
			edit.RevokeTokens = true
			if self {
				edit.KeepToken = actor.TokenID // the session that changed it goes on
			}
		}
		if err := keepsAnAdmin(cur, next, activeAdmins); err != nil {
			return UserEdit{}, err
		}
		if edit.RevokeTokens && next.Disabled {
			edit.KeepToken = ""
		}
		edit.User = next
		return edit, nil
	})
	if err != nil {
		return User{}, err
	}
	s.announce(u.Username)
	return u, nil
}

// checkCurrentPassword checks the current password of username, who
// changes its own from addr, as Login checks a password (passwordAttempt).
// A wrong one is audited as a failed login and forbidden; a right one has
// next hashed in the same hashing slot. It returns the new hash and the
// stored hash current was checked against.
func (s *Service) checkCurrentPassword(ctx context.Context, username, current, next string, addr netip.Addr) (hash, checked string, err error) {
	cur, slot, ok, err := s.passwordAttempt(ctx, username, current, addr)
	if err != nil {
		return "", "", err
	}
	if !ok {
		ev := audit.Event{Kind: audit.KindLoginFailed, Actor: cur.Username,
			Data: map[string]any{"ip": addrString(addr), "reason": "wrong current password"}}
		if err := s.appendEvent(ctx, ev); err != nil {
			return "", "", err
		}
		return "", "", apperr.Forbidden("the current password is wrong")
	}
	defer slot.Release()
	if hash, err = slot.Hash(next); err != nil {
		return "", "", err
	}
	return hash, cur.PasswordHash, nil
}

// DeleteUser deletes a user (admin): its sessions and tokens end at once on
// every instance and its name stays taken (the audit trail names it). The
// last active admin cannot be deleted (conflict).
func (s *Service) DeleteUser(ctx context.Context, actor *auth.Principal, username string) error {
	if err := requireRole(actor, auth.RoleAdmin); err != nil {
		return err
	}
	u, err := s.store.UpdateUser(ctx, username, func(cur User, activeAdmins int) (UserEdit, error) {
		if err := keepsAnAdmin(cur, User{}, activeAdmins); err != nil {
			return UserEdit{}, err
		}
		return UserEdit{User: cur, Delete: true, RevokeTokens: true,
			Event: audit.Event{Kind: audit.KindUserDeleted, Actor: actor.Subject,
				Data: map[string]any{"username": cur.Username, "roles": cur.Roles}}}, nil
	})
	if err != nil {
		return err
	}
	s.announce(u.Username)
	return nil
}

// keepsAnAdmin is the rule that there is always an active admin, for every
// change of a user (UpdateUser, DeleteUser, the role sync of an SSO
// sign-in): it refuses (conflict) turning cur, an active admin, into next,
// not one, when cur is the last of the activeAdmins (counted under the
// store's lock on them).
func keepsAnAdmin(cur, next User, activeAdmins int) error {
	if cur.IsAdmin() && !next.IsAdmin() && activeAdmins <= 1 {
		return apperr.Conflict("%s is the last active admin", cur.Username)
	}
	return nil
}
