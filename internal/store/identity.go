package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
)

// User is a console or API user.
type User struct {
	Username     string      `json:"username"`
	Roles        []auth.Role `json:"roles"`
	CreatedAt    time.Time   `json:"created_at"`
	PasswordHash string      `json:"-"`
}

// CreateUser stores a new user; conflict if the name is taken.
func (s *Store) CreateUser(ctx context.Context, u User, actor string) (User, error) {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO users (username, password_hash, roles) VALUES ($1, $2, $3) RETURNING created_at`,
			u.Username, u.PasswordHash, u.Roles).Scan(&u.CreatedAt)
		switch code, _ := pgCode(err); code {
		case "":
		case uniqueViolation:
			return apperr.Conflict("user %q already exists", u.Username)
		case checkViolation:
			return apperr.Invalid("username must be 1-64 letters, digits or . _ @ -, starting with a letter or digit")
		default:
			return fmt.Errorf("store: creating user: %w", err)
		}
		return insertEvents(ctx, tx, audit.Event{Kind: audit.KindUserCreated, Actor: actor,
			Data: map[string]any{"username": u.Username, "roles": u.Roles}})
	})
	u.CreatedAt = u.CreatedAt.UTC()
	return u, err
}

// UserByName returns a user; not_found when there is none.
func (s *Store) UserByName(ctx context.Context, username string) (User, error) {
	u := User{Username: username}
	err := s.pool.QueryRow(ctx, `SELECT password_hash, roles, created_at FROM users WHERE username = $1`, username).
		Scan(&u.PasswordHash, &u.Roles, &u.CreatedAt)
	return u, notFound(err, "no user %q", username)
}

// HasUsers reports whether any user exists.
func (s *Store) HasUsers(ctx context.Context) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users)`).Scan(&ok)
	return ok, err
}

// Agent is a registered agent.
type Agent struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
	CreatedBy   string    `json:"created_by"`
	CreatedAt   time.Time `json:"created_at"`
}

// CreateAgent registers an agent; conflict if the id is taken.
func (s *Store) CreateAgent(ctx context.Context, a Agent) (Agent, error) {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO agents (id, name, description, created_by) VALUES ($1, $2, $3, $4) RETURNING created_at`,
			a.ID, a.Name, a.Description, a.CreatedBy).Scan(&a.CreatedAt)
		switch code, _ := pgCode(err); code {
		case "":
		case uniqueViolation:
			return apperr.Conflict("agent %q already exists", a.ID)
		case checkViolation:
			return apperr.Invalid("agent id must be 1-64 letters, digits or . _ -, starting with a letter or digit")
		default:
			return fmt.Errorf("store: creating agent: %w", err)
		}
		return insertEvents(ctx, tx, audit.Event{Kind: audit.KindAgentCreated, Actor: a.CreatedBy, AgentID: a.ID,
			Data: map[string]any{"name": a.Name, "description": a.Description}})
	})
	a.CreatedAt = a.CreatedAt.UTC()
	return a, err
}

// Agent returns one agent.
func (s *Store) Agent(ctx context.Context, id string) (Agent, error) {
	a := Agent{ID: id}
	err := s.pool.QueryRow(ctx, `SELECT name, description, created_by, created_at FROM agents WHERE id = $1`, id).
		Scan(&a.Name, &a.Description, &a.CreatedBy, &a.CreatedAt)
	a.CreatedAt = a.CreatedAt.UTC()
	return a, notFound(err, "no agent %q", id)
}

// Agents lists every agent by id.
func (s *Store) Agents(ctx context.Context) ([]Agent, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, name, description, created_by, created_at FROM agents ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("store: listing agents: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Agent, error) {
		var a Agent
		err := r.Scan(&a.ID, &a.Name, &a.Description, &a.CreatedBy, &a.CreatedAt)
		a.CreatedAt = a.CreatedAt.UTC()
		return a, err
	})
}

// RecordToken stores an issued token so it can be checked and revoked, with
// ev (a token.issued or auth.login event) in the same transaction.
func (s *Store) RecordToken(ctx context.Context, t auth.Token, issuedBy string, ev audit.Event) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		// An agent token carries its agent's suspension (the lock waits
		// for a suspension in flight).
		_, err := tx.Exec(ctx, `INSERT INTO tokens (id, kind, subject, issued_by, expires_at, targets, agent_suspended)
			VALUES ($1, $2, $3, $4, $5, $6, $2 = 'agent' AND coalesce((SELECT suspended_at IS NOT NULL FROM agents WHERE id = $3 FOR SHARE), false))`,
			t.ID, t.Kind, t.Subject, issuedBy, t.ExpiresAt, t.Targets)
		if code, _ := pgCode(err); code == foreignKeyViolation {
			return apperr.NotFound("no subject %q", t.Subject)
		}
		if err != nil {
			return fmt.Errorf("store: recording token: %w", err)
		}
		return insertEvents(ctx, tx, ev)
	})
}

// RevokeToken revokes a token at once on every instance; not_found if it
// does not exist, and revoking twice is harmless. Revoking an agent token
// also stops, in the same transaction, every action submitted with it
// that is not final (hitl.MoveStop), each audited.
func (s *Store) RevokeToken(ctx context.Context, id, actor string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var kind, subject string
		err := tx.QueryRow(ctx, `UPDATE tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 RETURNING kind, subject`, id).
			Scan(&kind, &subject)
		if err != nil {
			return notFound(err, "no token %q", id)
		}
		ev := audit.Event{Kind: audit.KindTokenRevoked, Actor: actor, Data: map[string]any{"token_id": id, "kind": kind, "subject": subject}}
		if kind == string(auth.KindAgent) {
			ev.AgentID = subject
			// What was submitted with the token stops with it.
			if err := stopTokenActions(ctx, tx, subject, id, actor); err != nil {
				return err
			}
		}
		return insertEvents(ctx, tx, ev)
	})
}

// TokenActive reports whether a token is known, unrevoked and unexpired.
func (s *Store) TokenActive(ctx context.Context, id string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT revoked_at IS NULL AND expires_at > now() FROM tokens WHERE id = $1`, id).Scan(&ok)
	if err == pgx.ErrNoRows {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: checking token: %w", err)
	}
	return ok, nil
}
