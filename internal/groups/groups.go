// Package groups holds reviewer groups as a domain: a group's shape and
// rules, and the Service the JSON API, the console and identity providers
// (OIDC group mapping) call. A policy rule's reviewers names groups; who
// may approve an action is decided in internal/hitl (ApprovalProblem) from
// the memberships stored here. It knows nothing of HTTP or Postgres: Store
// is implemented by internal/store.
package groups

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/policy"
)

// Bounds of a group.
const (
	MaxMembers = 1000
)

// SourceLocal is the membership source of what admins write through the
// API and the console.
const SourceLocal = "local"

// Group is a reviewer group. Its JSON form is the API's.
type Group struct {
	// Name is the group's key, as rules' reviewers name it: 1–64
	// characters from [a-z0-9._-].
	Name string `json:"name"`
	// Members are the usernames in the group, sorted.
	Members []string `json:"members"`
	// CreatedBy, CreatedAt and UpdatedAt are set by the store.
	CreatedBy string    `json:"created_by,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// Store persists groups; every change writes its audit event in the same
// transaction.
type Store interface {
	// CreateGroup stores a new group with its local members; conflict when
	// the name is taken, invalid (details.field "members") for an unknown
	// user.
	CreateGroup(ctx context.Context, actor string, g Group) (Group, error)
	// ReplaceGroupMembers sets the group's local members to members
	// (memberships of other sources stay); not_found for an unknown group.
	ReplaceGroupMembers(ctx context.Context, actor string, g Group) (Group, error)
	// Group returns one group; not_found when there is none.
	Group(ctx context.Context, name string) (Group, error)
	// Groups returns every group, by name.
	Groups(ctx context.Context) ([]Group, error)
	// DeleteGroup deletes a group and its memberships; not_found when
	// there is none.
	DeleteGroup(ctx context.Context, actor, name string) error
	// SyncUserGroups makes username a member, with source, of exactly the
	// existing groups among names (memberships of that source in other
	// groups end; those of other sources stay), and returns the groups it
	// is in through source.
	SyncUserGroups(ctx context.Context, username, source string, names []string) ([]string, error)
	// UserGroups returns the groups username is in, by name.
	UserGroups(ctx context.Context, username string) ([]string, error)
}

// Service runs reviewer groups.
type Service struct {
	store Store
}

// NewService returns a Service over store.
func NewService(store Store) *Service { return &Service{store: store} }

// Validate checks a group as written and returns it with its members
// sorted and without duplicates (usernames compare case-insensitively).
func Validate(g Group) (Group, error) {
	if !policy.ValidRouteName(g.Name) {
		return g, &apperr.Error{Code: apperr.CodeInvalid, Message: "name must be 1-64 characters from a-z 0-9 . _ - (starting with a letter or digit)",
			Details: map[string]any{"field": "name"}}
	}
	if g.Members == nil {
		return g, &apperr.Error{Code: apperr.CodeInvalid, Message: "members is required (a list of usernames, possibly empty)",
			Details: map[string]any{"field": "members"}}
	}
	if len(g.Members) > MaxMembers {
		return g, &apperr.Error{Code: apperr.CodeInvalid, Message: "a group has at most 1000 members", Details: map[string]any{"field": "members"}}
	}
	out := make([]string, 0, len(g.Members))
	for _, m := range g.Members {
		if m == "" || len(m) > 64 {
			return g, &apperr.Error{Code: apperr.CodeInvalid, Message: "members are usernames of 1-64 characters", Details: map[string]any{"field": "members"}}
		}
		if !slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, m) }) {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	g.Members = out
	return g, nil
}

// Create creates a group.
func (s *Service) Create(ctx context.Context, actor string, g Group) (Group, error) {
	g, err := Validate(g)
	if err != nil {
		return Group{}, err
	}
	return s.store.CreateGroup(ctx, actor, g)
}

// Replace sets an existing group's members (PUT).
func (s *Service) Replace(ctx context.Context, actor string, g Group) (Group, error) {
	if !policy.ValidRouteName(g.Name) {
		return Group{}, apperr.NotFound("no group %q", g.Name)
	}
	g, err := Validate(g)
	if err != nil {
		return Group{}, err
	}
	return s.store.ReplaceGroupMembers(ctx, actor, g)
}

// Get returns one group.
func (s *Service) Get(ctx context.Context, name string) (Group, error) {
	if !policy.ValidRouteName(name) {
		return Group{}, apperr.NotFound("no group %q", name)
	}
	return s.store.Group(ctx, name)
}

// List returns every group.
func (s *Service) List(ctx context.Context) ([]Group, error) { return s.store.Groups(ctx) }

// Delete deletes a group. Rules that name it keep naming it: an action
// held by such a rule can then be approved by no one but the members of
// the groups its escalation adds (fail closed), until the group exists
// again or the policy changes.
func (s *Service) Delete(ctx context.Context, actor, name string) error {
	if !policy.ValidRouteName(name) {
		return apperr.NotFound("no group %q", name)
	}
	return s.store.DeleteGroup(ctx, actor, name)
}

// SyncMemberships is for identity providers: after a login through source
// (e.g. "oidc"), username is a member through source of exactly the
// existing groups among names (what the provider's groups map to), and no
// longer of the others it was in through source; memberships an admin gave
// (SourceLocal) stay. It returns the groups username is in through source.
func (s *Service) SyncMemberships(ctx context.Context, username, source string, names []string) ([]string, error) {
	if source == "" || source == SourceLocal {
		return nil, apperr.Invalid("an identity provider's source must not be empty or %q", SourceLocal)
	}
	valid := make([]string, 0, len(names))
	for _, n := range names {
		if policy.ValidRouteName(n) && !slices.Contains(valid, n) {
			valid = append(valid, n)
		}
	}
	return s.store.SyncUserGroups(ctx, username, source, valid)
}

// UserGroups returns the groups username is in, from any source.
func (s *Service) UserGroups(ctx context.Context, username string) ([]string, error) {
	return s.store.UserGroups(ctx, username)
}
