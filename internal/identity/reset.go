package identity

import (
	"context"
	"slices"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
)

// AdminName is the user the first start creates and ResetAdmin restores.
const AdminName = "admin"

// AdminRoles are the roles of the user the first start creates.
func AdminRoles() []auth.Role {
	return []auth.Role{auth.RoleAdmin, auth.RoleReviewer, auth.RoleAuditor}
}

// ResetAdmin is the operator's way back in when no one can sign in as an
// admin (airlock-server admin reset-password, run where the server's
// database is reachable, so no signed-in caller is asked for). It gives the
// user admin password (the same password rule as every other user),
// enables it, makes sure it holds the admin role, and ends every session
// of it. A deleted admin comes back and a missing one is created, both with
// AdminRoles. The change is written with its audit event (user.updated, or
// user.created) by actor, with via saying how it was made. It reports
// whether admin was created.
func (s *Service) ResetAdmin(ctx context.Context, actor, via, password string) (created bool, err error) {
	if err := validPassword(password); err != nil {
		return false, err
	}
	hash, err := auth.HashPassword(ctx, password)
	if err != nil {
		return false, err
	}
	u, err := s.store.ResetUser(ctx, AdminName, func(cur *User, deleted bool) (UserEdit, error) {
		data := map[string]any{"username": AdminName, "password_changed": true, "reset": true, "via": via}
		if cur == nil {
			created = true
			return UserEdit{User: User{Username: AdminName, PasswordHash: hash, Roles: AdminRoles()},
				Event: audit.Event{Kind: audit.KindUserCreated, Actor: actor, Data: map[string]any{
					"username": AdminName, "roles": AdminRoles(), "reset": true, "via": via}}}, nil
		}
		next := *cur
		next.PasswordHash, next.Disabled = hash, false
		if deleted {
			next.Roles = AdminRoles()
			data["restored"] = true
		} else if !slices.Contains(next.Roles, auth.RoleAdmin) {
			next.Roles = append(slices.Clone(next.Roles), auth.RoleAdmin)
		}
		if !slices.Equal(next.Roles, cur.Roles) {
			data["roles"], data["previous_roles"] = next.Roles, cur.Roles
		}
		if cur.Disabled {
			data["disabled"] = false
		}
		return UserEdit{User: next, RevokeTokens: true, Event: audit.Event{Kind: audit.KindUserUpdated, Actor: actor, Data: data}}, nil
	})
	if err != nil {
		return false, err
	}
	s.announce(u.Username)
	return created, nil
}
