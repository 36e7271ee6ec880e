package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/identity"
)

var _ identity.SSOStore = (*Store)(nil)

// SSOSignIn locks the link of (issuer, subject) (an advisory lock, so two
// first sign-ins of one person make one user), the active admins (counted
// for decide) and the link's user, or creates the user with the first
// free name of names and links it; then it stores the roles and events
// decide chose, in one transaction. A refusal from decide
// is returned after the commit: the roles a refused sign-in removed stay
// removed.
func (s *Store) SSOSignIn(ctx context.Context, issuer, subject string, names []string,
	decide func(identity.SSOUser) (identity.SSOEdit, error)) (User, error) {
	var out User
	var refused error
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('sso|' || $1 || '|' || $2, 0))`, issuer, subject); err != nil {
			return fmt.Errorf("store: locking the sso link: %w", err)
		}
		// The active admins before the user, as UpdateUser locks them: a
		// role sync that would leave no admin is decided on a count no
		// other change moves meanwhile.
		admins, err := lockActiveAdmins(ctx, tx)
		if err != nil {
			return err
		}
		cur := identity.SSOUser{ActiveAdmins: admins}
		var deletedAt *time.Time
		err = tx.QueryRow(ctx, `SELECT u.username, u.password_hash, u.roles, u.disabled, u.created_at, u.deleted_at
			FROM sso_links l JOIN users u ON u.username = l.username
			WHERE l.issuer = $1 AND l.subject = $2 FOR UPDATE OF u`, issuer, subject).
			Scan(&cur.User.Username, &cur.User.PasswordHash, &cur.User.Roles, &cur.User.Disabled, &cur.User.CreatedAt, &deletedAt)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if cur.User, err = createSSOUser(ctx, tx, names); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO sso_links (issuer, subject, username) VALUES ($1, $2, $3)`,
				issuer, subject, cur.User.Username); err != nil {
				return fmt.Errorf("store: linking the sso user: %w", err)
			}
			cur.Created = true
		case err != nil:
			return fmt.Errorf("store: reading the sso user: %w", err)
		default:
			cur.Deleted = deletedAt != nil
			if _, err := tx.Exec(ctx, `UPDATE sso_links SET last_login_at = now() WHERE issuer = $1 AND subject = $2`, issuer, subject); err != nil {
				return fmt.Errorf("store: updating the sso link: %w", err)
			}
		}
		cur.User.CreatedAt = cur.User.CreatedAt.UTC()
		edit, refuse := decide(cur)
		refused = refuse
		out = cur.User
		out.PasswordHash = ""
		if edit.Roles != nil && !cur.Deleted {
			if _, err := tx.Exec(ctx, `UPDATE users SET roles = $2 WHERE username = $1`, cur.User.Username, edit.Roles); err != nil {
				return fmt.Errorf("store: setting the sso user's roles: %w", err)
			}
			out.Roles = edit.Roles
		}
		return insertEvents(ctx, tx, edit.Events...)
	})
	if err != nil {
		return User{}, err
	}
	return out, refused
}

// createSSOUser inserts a user with no password and no roles under the
// first of names that is free in any case (a deleted user's name stays
// taken).
func createSSOUser(ctx context.Context, tx pgx.Tx, names []string) (User, error) {
	for _, name := range names {
		var u User
		err := tx.QueryRow(ctx, `INSERT INTO users (username, password_hash, roles) VALUES ($1, '', '{}')
			ON CONFLICT DO NOTHING RETURNING username, created_at`, name).Scan(&u.Username, &u.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // taken
		}
		if err != nil {
			return User{}, fmt.Errorf("store: creating the sso user: %w", err)
		}
		return u, nil
	}
	return User{}, apperr.Conflict("no free username for this sign-in; ask an admin")
}

// PutSSOCode stores a CLI sign-in's one-time code.
func (s *Store) PutSSOCode(ctx context.Context, codeHash, username, challenge string, expires time.Time) error {
	// Used or not, codes past their time are worthless: they go too.
	if _, err := s.pool.Exec(ctx, `WITH gone AS (DELETE FROM sso_cli_codes WHERE expires_at < now() - interval '1 hour')
		INSERT INTO sso_cli_codes (code_hash, username, code_challenge, expires_at) VALUES ($1, $2, $3, $4)`,
		codeHash, username, challenge, expires); err != nil {
		return fmt.Errorf("store: storing the sso code: %w", err)
	}
	return nil
}

// TakeSSOCode deletes a code and returns its user and challenge; not_found
// when unknown, used or expired.
func (s *Store) TakeSSOCode(ctx context.Context, codeHash string) (string, string, error) {
	var username, challenge string
	var live bool
	err := s.pool.QueryRow(ctx, `DELETE FROM sso_cli_codes WHERE code_hash = $1 RETURNING username, code_challenge, expires_at > now()`, codeHash).
		Scan(&username, &challenge, &live)
	if err != nil {
		return "", "", notFound(err, "no such sign-in code")
	}
	if !live {
		return "", "", apperr.NotFound("the sign-in code expired")
	}
	return username, challenge, nil
}
