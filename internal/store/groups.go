package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/groups"
)

// groupSelect reads groups with their members (any source), by name.
const groupSelect = `SELECT g.name, coalesce((SELECT array_agg(m.username ORDER BY m.username) FROM reviewer_group_members m
	WHERE m.group_name = g.name), '{}'), g.created_by, g.created_at, g.updated_at FROM reviewer_groups g`

func scanGroup(row pgx.Row) (groups.Group, error) {
	var g groups.Group
	if err := row.Scan(&g.Name, &g.Members, &g.CreatedBy, &g.CreatedAt, &g.UpdatedAt); err != nil {
		return g, err
	}
	g.CreatedAt, g.UpdatedAt = g.CreatedAt.UTC(), g.UpdatedAt.UTC()
	return g, nil
}

// canonicalMembers maps usernames (any case) to the stored spelling,
// refusing one that is no user (or a deleted one).
func canonicalMembers(ctx context.Context, tx pgx.Tx, members []string) ([]string, error) {
	if len(members) == 0 {
		return []string{}, nil
	}
	lower := make([]string, len(members))
	for i, m := range members {
		lower[i] = strings.ToLower(m)
	}
	rows, err := tx.Query(ctx, `SELECT username FROM users WHERE lower(username) = ANY ($1) AND deleted_at IS NULL ORDER BY username`, lower)
	if err != nil {
		return nil, fmt.Errorf("store: reading members: %w", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: reading members: %w", err)
	}
	if len(found) != len(members) {
		var missing []string
		for _, m := range members {
			ok := false
			for _, f := range found {
				ok = ok || strings.EqualFold(f, m)
			}
			if !ok {
				missing = append(missing, m)
			}
		}
		return nil, &apperr.Error{Code: apperr.CodeValidation, Message: "no such user: " + strings.Join(missing, ", "),
			Details: map[string]any{"field": "members"}}
	}
	return found, nil
}

func groupEvent(kind audit.Kind, actor string, g groups.Group) audit.Event {
	return audit.Event{Kind: kind, Actor: actor, Data: map[string]any{"name": g.Name, "members": g.Members}}
}

// CreateGroup implements groups.Store.
func (s *Store) CreateGroup(ctx context.Context, actor string, g groups.Group) (groups.Group, error) {
	var out groups.Group
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		members, err := canonicalMembers(ctx, tx, g.Members)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO reviewer_groups (name, created_by) VALUES ($1, $2) ON CONFLICT DO NOTHING`, g.Name, actor)
		if err != nil {
			return fmt.Errorf("store: creating group: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return apperr.Conflict("group %q already exists", g.Name)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO reviewer_group_members (group_name, username, source)
			SELECT $1, u, 'local' FROM unnest($2::text[]) u`, g.Name, members); err != nil {
			return fmt.Errorf("store: adding members: %w", err)
		}
		if out, err = scanGroup(tx.QueryRow(ctx, groupSelect+` WHERE g.name = $1`, g.Name)); err != nil {
			return fmt.Errorf("store: reading group: %w", err)
		}
		return insertEvents(ctx, tx, groupEvent(audit.KindGroupCreated, actor, out))
	})
	return out, err
}

// ReplaceGroupMembers implements groups.Store.
func (s *Store) ReplaceGroupMembers(ctx context.Context, actor string, g groups.Group) (groups.Group, error) {
	var out groups.Group
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE reviewer_groups SET updated_at = now() WHERE name = $1`, g.Name)
		if err != nil {
			return fmt.Errorf("store: updating group: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return apperr.NotFound("no group %q", g.Name)
		}
		members, err := canonicalMembers(ctx, tx, g.Members)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM reviewer_group_members WHERE group_name = $1 AND source = 'local' AND NOT username = ANY ($2)`,
			g.Name, members); err != nil {
			return fmt.Errorf("store: removing members: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO reviewer_group_members (group_name, username, source)
			SELECT $1, u, 'local' FROM unnest($2::text[]) u ON CONFLICT (group_name, username) DO UPDATE SET source = 'local'`,
			g.Name, members); err != nil {
			return fmt.Errorf("store: adding members: %w", err)
		}
		if out, err = scanGroup(tx.QueryRow(ctx, groupSelect+` WHERE g.name = $1`, g.Name)); err != nil {
			return fmt.Errorf("store: reading group: %w", err)
		}
		return insertEvents(ctx, tx, groupEvent(audit.KindGroupUpdated, actor, out))
	})
	return out, err
}

// Group implements groups.Store.
func (s *Store) Group(ctx context.Context, name string) (groups.Group, error) {
	g, err := scanGroup(s.pool.QueryRow(ctx, groupSelect+` WHERE g.name = $1`, name))
	if err != nil {
		return g, notFound(err, "no group %q", name)
	}
	return g, nil
}

// Groups implements groups.Store.
func (s *Store) Groups(ctx context.Context) ([]groups.Group, error) {
	rows, err := s.pool.Query(ctx, groupSelect+` ORDER BY g.name`)
	if err != nil {
		return nil, fmt.Errorf("store: listing groups: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (groups.Group, error) { return scanGroup(r) })
	if err != nil {
		return nil, fmt.Errorf("store: listing groups: %w", err)
	}
	return out, nil
}

// DeleteGroup implements groups.Store.
func (s *Store) DeleteGroup(ctx context.Context, actor, name string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		g, err := scanGroup(tx.QueryRow(ctx, groupSelect+` WHERE g.name = $1`, name))
		if errors.Is(err, pgx.ErrNoRows) {
			return apperr.NotFound("no group %q", name)
		}
		if err != nil {
			return fmt.Errorf("store: reading group: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM reviewer_groups WHERE name = $1`, name); err != nil {
			return fmt.Errorf("store: deleting group: %w", err)
		}
		return insertEvents(ctx, tx, groupEvent(audit.KindGroupDeleted, actor, g))
	})
}

// SyncUserGroups implements groups.Store.
func (s *Store) SyncUserGroups(ctx context.Context, username, source string, names []string) ([]string, error) {
	var out []string
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var user string
		err := tx.QueryRow(ctx, `SELECT username FROM users WHERE lower(username) = lower($1) AND deleted_at IS NULL`, username).Scan(&user)
		if err != nil {
			return notFound(err, "no user %q", username)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM reviewer_group_members WHERE username = $1 AND source = $2 AND NOT group_name = ANY ($3)`,
			user, source, names); err != nil {
			return fmt.Errorf("store: syncing groups: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO reviewer_group_members (group_name, username, source)
			SELECT g.name, $1, $2 FROM reviewer_groups g WHERE g.name = ANY ($3) ON CONFLICT DO NOTHING`, user, source, names); err != nil {
			return fmt.Errorf("store: syncing groups: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT group_name FROM reviewer_group_members WHERE username = $1 AND source = $2 ORDER BY 1`, user, source)
		if err != nil {
			return fmt.Errorf("store: syncing groups: %w", err)
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("store: syncing groups: %w", err)
		}
		return insertEvents(ctx, tx, audit.Event{Kind: audit.KindGroupUpdated, Actor: "system",
			Data: map[string]any{"username": user, "source": source, "groups": out}})
	})
	return out, err
}

// UserGroups implements groups.Store.
func (s *Store) UserGroups(ctx context.Context, username string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT group_name FROM reviewer_group_members WHERE lower(username) = lower($1) ORDER BY 1`, username)
	if err != nil {
		return nil, fmt.Errorf("store: reading user's groups: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: reading user's groups: %w", err)
	}
	return out, nil
}
