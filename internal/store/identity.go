package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/identity"
)

// The identity types live in internal/identity; these names remain for
// callers written against the store.
type (
	// User is identity.User.
	User = identity.User
	// Agent is identity.Agent.
	Agent = identity.Agent
	// TokenInfo is identity.TokenInfo.
	TokenInfo = identity.TokenInfo
)

var _ identity.Store = (*Store)(nil)

// CreateUser stores a new user; conflict if the name is taken in any case
// (also by a deleted user, whose name stays taken).
func (s *Store) CreateUser(ctx context.Context, u User, actor string) (User, error) {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO users (username, password_hash, roles) VALUES ($1, $2, $3) RETURNING created_at`,
			u.Username, u.PasswordHash, u.Roles).Scan(&u.CreatedAt)
		switch code, _ := pgCode(err); code {
		case "":
		case uniqueViolation:
			return apperr.Conflict("username %q is taken (names differing only in case count as one; a deleted user's name stays taken)", u.Username)
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

const userColumns = `username, password_hash, roles, disabled, created_at`

func scanUser(row pgx.Row) (User, error) {
	var u User
	err := row.Scan(&u.Username, &u.PasswordHash, &u.Roles, &u.Disabled, &u.CreatedAt)
	u.CreatedAt = u.CreatedAt.UTC()
	return u, err
}

// UserByName returns the user whose name matches in any case; not_found
// when there is none (or it was deleted).
func (s *Store) UserByName(ctx context.Context, username string) (User, error) {
	u, err := scanUser(s.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users
		WHERE lower(username) = lower($1) AND deleted_at IS NULL`, username))
	if err != nil {
		return User{}, notFound(err, "no user %q", username)
	}
	return u, nil
}

// Users lists every user that is not deleted, by name (without password
// hashes).
func (s *Store) Users(ctx context.Context) ([]User, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+userColumns+` FROM users WHERE deleted_at IS NULL ORDER BY username`)
	if err != nil {
		return nil, fmt.Errorf("store: listing users: %w", err)
	}
	users, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (User, error) { return scanUser(r) })
	if err != nil {
		return nil, fmt.Errorf("store: listing users: %w", err)
	}
	for i := range users {
		users[i].PasswordHash = ""
	}
	return users, nil
}

// UpdateUser locks the active admins (in name order, so two edits never
// deadlock) and the user, lets decide choose the edit, and writes it with
// its event: the row, the tombstone of a delete, the revocation of the
// user's tokens. Concurrent edits that would each leave one admin are
// serialized by the lock, so the last one sees it is the last.
func (s *Store) UpdateUser(ctx context.Context, username string, decide func(identity.User, int) (identity.UserEdit, error)) (User, error) {
	var out User
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		admins, err := lockActiveAdmins(ctx, tx)
		if err != nil {
			return err
		}
		cur, err := scanUser(tx.QueryRow(ctx, `SELECT `+userColumns+` FROM users
			WHERE lower(username) = lower($1) AND deleted_at IS NULL FOR UPDATE`, username))
		if err != nil {
			return notFound(err, "no user %q", username)
		}
		edit, err := decide(cur, admins)
		if err != nil {
			return err
		}
		next := edit.User
		if edit.Delete {
			_, err = tx.Exec(ctx, `UPDATE users SET deleted_at = now(), disabled = true, password_hash = '', roles = '{}'
				WHERE username = $1`, cur.Username)
			next = User{Username: cur.Username, Disabled: true, CreatedAt: cur.CreatedAt}
		} else {
			_, err = tx.Exec(ctx, `UPDATE users SET roles = $2, disabled = $3, password_hash = $4 WHERE username = $1`,
				cur.Username, next.Roles, next.Disabled, next.PasswordHash)
		}
		if err != nil {
			return fmt.Errorf("store: updating user: %w", err)
		}
		if err := finishUserEdit(ctx, tx, cur.Username, edit); err != nil {
			return err
		}
		next.Username, next.PasswordHash = cur.Username, ""
		out = next
		return nil
	})
	return out, err
}

// lockActiveAdmins locks the active admins' rows, in name order, and
// counts them: a change that could leave no active admin (UpdateUser,
// SSOSignIn) takes them before its user's row, so two such changes wait
// for each other rather than both seeing the other admin.
func lockActiveAdmins(ctx context.Context, tx pgx.Tx) (int, error) {
	rows, err := tx.Query(ctx, `SELECT username FROM users
		WHERE 'admin' = ANY (roles) AND NOT disabled AND deleted_at IS NULL ORDER BY username FOR UPDATE`)
	if err != nil {
		return 0, fmt.Errorf("store: locking admins: %w", err)
	}
	admins, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("store: locking admins: %w", err)
	}
	return len(admins), nil
}

// CreateAgent registers an agent; conflict if the id is taken.
func (s *Store) CreateAgent(ctx context.Context, a Agent) (Agent, error) {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO agents (id, name, description, created_by, owner)
			VALUES ($1, $2, $3, $4, nullif($5, '')) RETURNING created_at`,
			a.ID, a.Name, a.Description, a.CreatedBy, a.Owner).Scan(&a.CreatedAt)
		switch code, _ := pgCode(err); code {
		case "":
		case uniqueViolation:
			return apperr.Conflict("agent %q already exists", a.ID)
		case checkViolation:
			return apperr.Invalid("agent id must be 1-64 letters, digits or . _ -, starting with a letter or digit")
		case foreignKeyViolation:
			return apperr.Invalid("owner %q is not a user", a.Owner)
		default:
			return fmt.Errorf("store: creating agent: %w", err)
		}
		return insertEvents(ctx, tx, audit.Event{Kind: audit.KindAgentCreated, Actor: a.CreatedBy, AgentID: a.ID,
			Data: map[string]any{"name": a.Name, "description": a.Description, "owner": a.Owner}})
	})
	a.CreatedAt = a.CreatedAt.UTC()
	return a, err
}

const agentColumns = `id, name, description, coalesce(owner, ''), suspended_at, created_by, created_at`

func scanAgent(row pgx.Row) (Agent, error) {
	var a Agent
	err := row.Scan(&a.ID, &a.Name, &a.Description, &a.Owner, &a.SuspendedAt, &a.CreatedBy, &a.CreatedAt)
	a.CreatedAt = a.CreatedAt.UTC()
	if a.SuspendedAt != nil {
		t := a.SuspendedAt.UTC()
		a.SuspendedAt = &t
	}
	return a, err
}

// Agent returns one agent.
func (s *Store) Agent(ctx context.Context, id string) (Agent, error) {
	a, err := scanAgent(s.pool.QueryRow(ctx, `SELECT `+agentColumns+` FROM agents WHERE id = $1`, id))
	if err != nil {
		return Agent{}, notFound(err, "no agent %q", id)
	}
	return a, nil
}

// Agents lists every agent by id.
func (s *Store) Agents(ctx context.Context) ([]Agent, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+agentColumns+` FROM agents ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("store: listing agents: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Agent, error) { return scanAgent(r) })
}

// AgentOwner returns the user answerable for an agent ("" when none);
// not_found for an unknown agent.
func (s *Store) AgentOwner(ctx context.Context, agentID string) (string, error) {
	var owner string
	err := s.pool.QueryRow(ctx, `SELECT coalesce(owner, '') FROM agents WHERE id = $1`, agentID).Scan(&owner)
	return owner, notFound(err, "no agent %q", agentID)
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
// that is not final (hitl.MoveStop), each audited. An agent token's agent
// row is locked first, as a suspension locks it before the agent's tokens
// (the lock order, store.go): a batch of the agent's submits holding its
// pending count may still ask for the token's row, so the revocation must
// not hold that row while it waits for the count.
func (s *Store) RevokeToken(ctx context.Context, id, actor string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var kind, subject string
		err := tx.QueryRow(ctx, `WITH l AS (
				SELECT ag.id FROM tokens t JOIN agents ag ON t.kind = 'agent' AND ag.id = t.subject
				WHERE t.id = $1 FOR NO KEY UPDATE OF ag
			)
			UPDATE tokens SET revoked_at = coalesce(revoked_at, now())
			WHERE id = $1 AND (SELECT count(*) FROM l) >= 0 RETURNING kind, subject`, id).
			Scan(&kind, &subject)
		if err != nil {
			return notFound(err, "no token %q", id)
		}
		ev := audit.Event{Kind: audit.KindTokenRevoked, Actor: actor, Data: map[string]any{"token_id": id, "kind": kind, "subject": subject}}
		if kind == string(auth.KindAgent) {
			ev.AgentID = subject
			// What was submitted with the token stops with it, and the
			// grants its approvals made end.
			revoked, err := stopTokenActions(ctx, tx, subject, id, actor)
			if err != nil {
				return err
			}
			ev.Data["grants_revoked"] = len(revoked)
			return insertEvents(ctx, tx, append(revoked, ev)...)
		}
		return insertEvents(ctx, tx, ev)
	})
}

// TokenState says, in one query, whether a token is known, unrevoked and
// unexpired and, for a user token, whether its user is active and which
// roles it holds now.
func (s *Store) TokenState(ctx context.Context, id string) (identity.TokenState, error) {
	var st identity.TokenState
	err := s.pool.QueryRow(ctx, `SELECT t.revoked_at IS NULL AND t.expires_at > now()
			AND (t.kind <> 'user' OR (u.username IS NOT NULL AND NOT u.disabled AND u.deleted_at IS NULL)),
		u.roles
		FROM tokens t LEFT JOIN users u ON t.kind = 'user' AND u.username = t.subject
		WHERE t.id = $1`, id).Scan(&st.Active, &st.Roles)
	if errors.Is(err, pgx.ErrNoRows) {
		return identity.TokenState{}, nil
	}
	if err != nil {
		return identity.TokenState{}, fmt.Errorf("store: checking token: %w", err)
	}
	return st, nil
}

// TokenActive reports whether a token may be used now (TokenState.Active).
func (s *Store) TokenActive(ctx context.Context, id string) (bool, error) {
	st, err := s.TokenState(ctx, id)
	return st.Active, err
}

// TokenIssuer returns who issued a token; not_found if it is unknown.
func (s *Store) TokenIssuer(ctx context.Context, id string) (string, error) {
	var by string
	err := s.pool.QueryRow(ctx, `SELECT issued_by FROM tokens WHERE id = $1`, id).Scan(&by)
	return by, notFound(err, "no token %q", id)
}

// HasUsers reports whether any user exists.
func (s *Store) HasUsers(ctx context.Context) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users)`).Scan(&ok)
	return ok, err
}

// finishUserEdit ends the sessions and tokens of username that edit asks
// to revoke (all but edit.KeepToken, counted in the event) and writes the
// edit's audit event, in tx.
func finishUserEdit(ctx context.Context, tx pgx.Tx, username string, edit identity.UserEdit) error {
	if edit.RevokeTokens {
		tag, err := tx.Exec(ctx, `UPDATE tokens SET revoked_at = now()
			WHERE kind = 'user' AND subject = $1 AND revoked_at IS NULL AND id <> $2`, username, edit.KeepToken)
		if err != nil {
			return fmt.Errorf("store: revoking the user's tokens: %w", err)
		}
		if edit.Event.Data == nil {
			edit.Event.Data = map[string]any{}
		}
		edit.Event.Data["tokens_revoked"] = tag.RowsAffected()
	}
	return insertEvents(ctx, tx, edit.Event)
}
