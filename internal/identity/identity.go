// Package identity owns every rule about who uses Airlock: users (names,
// roles, passwords, their lifecycle), agents and their owners, the tokens
// issued to them, and the one authenticator that the JSON API, the console
// and the websocket all ask who a token or session cookie belongs to.
//
// It holds the types and the rules; internal/store is its Postgres adapter
// (Store) and the HTTP surfaces only decode, call the Service and respond.
package identity

import (
	"context"
	"slices"
	"time"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/eventbus"
)

// User is a person who signs in to the console or the API.
type User struct {
	Username  string      `json:"username"`
	Roles     []auth.Role `json:"roles"`
	Disabled  bool        `json:"disabled"`
	CreatedAt time.Time   `json:"created_at"`
	// PasswordHash is the argon2id hash; it never leaves the server.
	PasswordHash string `json:"-"`
}

// IsAdmin reports whether u holds the admin role and may use it (not
// disabled).
func (u User) IsAdmin() bool { return !u.Disabled && slices.Contains(u.Roles, auth.RoleAdmin) }

// Agent is a registered agent.
type Agent struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	// Owner is the user answerable for the agent ("" for an agent registered
	// before owners existed by someone who is not a user).
	Owner string `json:"owner"`
	// SuspendedAt is when an admin suspended the agent; nil while active.
	SuspendedAt *time.Time `json:"suspended_at,omitempty"`
	CreatedBy   string     `json:"created_by"`
	CreatedAt   time.Time  `json:"created_at"`
}

// TokenInfo describes an issued token without its secret (which is never
// stored).
type TokenInfo struct {
	ID        string     `json:"id"`
	Kind      string     `json:"kind"`
	Subject   string     `json:"subject"`
	IssuedBy  string     `json:"issued_by"`
	IssuedAt  time.Time  `json:"issued_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// Active reports whether the token still works at now (as far as the token
// itself goes: a user token also needs an active user).
func (t TokenInfo) Active(now time.Time) bool { return t.RevokedAt == nil && now.Before(t.ExpiresAt) }

// TokenState is what the database says about a token when it is used.
type TokenState struct {
	// Active: known, not revoked, not expired and, for a user token, its
	// user is neither disabled nor deleted.
	Active bool
	// Roles are a user token's user's roles now (nil for other kinds): a
	// role change takes effect on the next request, whatever the token
	// says.
	Roles []auth.Role
}

// UserEdit is a change to one stored user, decided by the Service on the
// row as it is locked in the store's transaction.
type UserEdit struct {
	// User is the user's new state (same Username).
	User User
	// Delete turns the user into a tombstone: no password, no roles, its
	// name taken for good.
	Delete bool
	// RevokeTokens ends every token (session) of the user except KeepToken.
	RevokeTokens bool
	KeepToken    string
	// Event is the audit event written in the same transaction.
	Event audit.Event
}

// Store persists identities. Every change writes its audit event in the
// same transaction, or nothing.
type Store interface {
	// CreateUser stores a new user; conflict if the name is taken in any
	// case (also by a deleted user).
	CreateUser(ctx context.Context, u User, actor string) (User, error)
	// UserByName returns the user whose name matches username in any case
	// (deleted users are not found).
	UserByName(ctx context.Context, username string) (User, error)
	// Users lists every user that is not deleted, by name.
	Users(ctx context.Context) ([]User, error)
	// UpdateUser locks the user named username (any case) and the active
	// admins, calls decide with the user and the number of active admins,
	// and applies the edit it returns with its event, atomically.
	UpdateUser(ctx context.Context, username string, decide func(cur User, activeAdmins int) (UserEdit, error)) (User, error)
	// ResetUser locks the user named username (any case, a deleted user
	// included) and calls decide with it (nil when there is none; deleted
	// for a tombstone). It stores the edit's user (inserting it when there
	// was none, bringing a tombstone back), revokes the user's tokens when
	// the edit says so and writes its event, atomically.
	ResetUser(ctx context.Context, username string, decide func(cur *User, deleted bool) (UserEdit, error)) (User, error)

	// CreateAgent registers an agent; conflict if the id is taken.
	CreateAgent(ctx context.Context, a Agent) (Agent, error)
	// Agent returns one agent; not_found when there is none.
	Agent(ctx context.Context, id string) (Agent, error)
	// Agents lists every agent by id.
	Agents(ctx context.Context) ([]Agent, error)

	// RecordToken stores an issued token with ev in the same transaction.
	RecordToken(ctx context.Context, t auth.Token, issuedBy string, ev audit.Event) error
	// RevokeToken revokes a token on every instance; not_found if unknown.
	RevokeToken(ctx context.Context, id, actor string) error
	// TokenState says whether a token may be used now and, for a user
	// token, its user's current roles. An unknown token is inactive.
	TokenState(ctx context.Context, id string) (TokenState, error)
	// TokenIssuer returns who issued a token; not_found if unknown.
	TokenIssuer(ctx context.Context, id string) (string, error)
	// AgentTokens lists the tokens issued to an agent, newest first.
	AgentTokens(ctx context.Context, agentID string) ([]TokenInfo, error)

	// AppendEvents writes audit events that record no state change (a
	// failed login).
	AppendEvents(ctx context.Context, events ...audit.Event) error
}

// Publisher announces a committed change to the other server instances.
type Publisher interface {
	Publish(ev eventbus.Event)
}
