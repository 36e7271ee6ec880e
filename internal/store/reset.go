package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/identity"
)

// ResetUser implements identity.Store: the user named username (any case,
// deleted or not) is locked and given the edit decide returns; a missing
// user is inserted, a tombstone brought back. With RevokeTokens every token
// of the user is revoked. The event is written in the same transaction.
func (s *Store) ResetUser(ctx context.Context, username string, decide func(*identity.User, bool) (identity.UserEdit, error)) (User, error) {
	var out User
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var cur User
		var deleted bool
		err := tx.QueryRow(ctx, `SELECT `+userColumns+`, deleted_at IS NOT NULL FROM users
			WHERE lower(username) = lower($1) FOR UPDATE`, username).
			Scan(&cur.Username, &cur.PasswordHash, &cur.Roles, &cur.Disabled, &cur.CreatedAt, &deleted)
		found := true
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			found = false
		case err != nil:
			return fmt.Errorf("store: locking user %q: %w", username, err)
		}
		var edit identity.UserEdit
		if found {
			cur.CreatedAt = cur.CreatedAt.UTC()
			edit, err = decide(&cur, deleted)
		} else {
			edit, err = decide(nil, false)
		}
		if err != nil {
			return err
		}
		next := edit.User
		if !found {
			err = tx.QueryRow(ctx, `INSERT INTO users (username, password_hash, roles, disabled) VALUES ($1, $2, $3, $4) RETURNING created_at`,
				next.Username, next.PasswordHash, next.Roles, next.Disabled).Scan(&next.CreatedAt)
			if code, _ := pgCode(err); code == uniqueViolation {
				return apperr.Conflict("user %q was created meanwhile; try again", next.Username)
			}
		} else {
			next.Username = cur.Username
			_, err = tx.Exec(ctx, `UPDATE users SET roles = $2, disabled = $3, password_hash = $4, deleted_at = NULL WHERE username = $1`,
				cur.Username, next.Roles, next.Disabled, next.PasswordHash)
		}
		if err != nil {
			return fmt.Errorf("store: resetting user %q: %w", username, err)
		}
		if err := finishUserEdit(ctx, tx, next.Username, edit); err != nil {
			return err
		}
		next.PasswordHash, next.CreatedAt = "", next.CreatedAt.UTC()
		out = next
		return nil
	})
	return out, err
}
