package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/hitl"
)

const grantColumns = `id, agent_id, tool, conversation_id, source, rule_id, policy_version, action_id, granted_by,
	created_at, expires_at, revoked_at, revoked_by`

func scanGrant(row pgx.Row) (hitl.Grant, error) {
	var g hitl.Grant
	err := row.Scan(&g.ID, &g.AgentID, &g.Tool, &g.ConversationID, &g.Source, &g.RuleID, &g.PolicyVersion,
		&g.ActionID, &g.GrantedBy, &g.CreatedAt, &g.ExpiresAt, &g.RevokedAt, &g.RevokedBy)
	if err != nil {
		return g, err
	}
	g.CreatedAt, g.ExpiresAt = g.CreatedAt.UTC(), g.ExpiresAt.UTC()
	if g.RevokedAt != nil {
		t := g.RevokedAt.UTC()
		g.RevokedAt = &t
	}
	return g, nil
}

// insertGrant stores g in tx. Approving again for the key of a grant not
// revoked (still active, or expired) replaces that grant by g, id
// included: the grant stored is the one its grant.created event names
// (keeping the old id, a DELETE of the audited id was a 404 and later
// uses named a grant created for another action).
func insertGrant(ctx context.Context, tx pgx.Tx, g *hitl.Grant) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO grants (id, agent_id, tool, conversation_id, source, rule_id, policy_version, action_id, granted_by,
			created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (agent_id, tool, conversation_id, source, rule_id, policy_version) WHERE revoked_at IS NULL
		DO UPDATE SET id = excluded.id, action_id = excluded.action_id, granted_by = excluded.granted_by,
			created_at = excluded.created_at, expires_at = excluded.expires_at`,
		g.ID, g.AgentID, g.Tool, g.ConversationID, g.Source, g.RuleID, g.PolicyVersion, g.ActionID, g.GrantedBy,
		g.CreatedAt, g.ExpiresAt)
	if err != nil {
		return fmt.Errorf("store: writing grant: %w", err)
	}
	return nil
}

// ActiveGrant implements hitl.Store.
func (s *Store) ActiveGrant(ctx context.Context, k hitl.GrantKey) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx, `SELECT id FROM grants
		WHERE agent_id = $1 AND tool = $2 AND conversation_id = $3 AND source = $4 AND rule_id = $5
			AND policy_version = $6 AND revoked_at IS NULL AND expires_at > now()`,
		k.AgentID, k.Tool, k.ConversationID, k.Source, k.RuleID, k.PolicyVersion).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store: reading grants: %w", err)
	}
	return id, nil
}

// Grants implements hitl.Store.
func (s *Store) Grants(ctx context.Context, f hitl.GrantFilter) ([]hitl.Grant, error) {
	where := []string{"true"}
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.AgentID != "" {
		add("agent_id = $%d", f.AgentID)
	}
	if f.ConversationID != "" {
		add("conversation_id = $%d", f.ConversationID)
	}
	if !f.All {
		where = append(where, "revoked_at IS NULL AND expires_at > now()")
	}
	rows, err := s.pool.Query(ctx, `SELECT `+grantColumns+` FROM grants WHERE `+strings.Join(where, " AND ")+
		` ORDER BY created_at DESC, id DESC LIMIT 1000`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: listing grants: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (hitl.Grant, error) { return scanGrant(r) })
	if err != nil {
		return nil, fmt.Errorf("store: listing grants: %w", err)
	}
	return out, nil
}

// RevokeGrant implements hitl.Store.
func (s *Store) RevokeGrant(ctx context.Context, id, actor string, ev func(hitl.Grant) audit.Event) (hitl.Grant, error) {
	if !isUUID(id) {
		return hitl.Grant{}, apperr.NotFound("no active grant %q", id)
	}
	var g hitl.Grant
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		gs, events, err := revokeGrants(ctx, tx, "id = $2", []any{id}, actor, ev)
		if err != nil {
			return err
		}
		if len(gs) == 0 {
			return apperr.NotFound("no active grant %s", id)
		}
		g = gs[0]
		return insertEvents(ctx, tx, events...)
	})
	return g, err
}

// revokeGrants revokes in tx the active grants cond selects (its
// parameters args, from $2), as revoked by actor, and returns them with
// the audit event ev makes of each, for the caller to write in tx: the one
// way a grant is revoked, by id (DELETE /api/v1/grants/{id}) or with the
// action that made it (a stop, UpdateAction).
func revokeGrants(ctx context.Context, tx pgx.Tx, cond string, args []any, actor string, ev func(hitl.Grant) audit.Event) ([]hitl.Grant, []audit.Event, error) {
	rows, err := tx.Query(ctx, `UPDATE grants SET revoked_at = now(), revoked_by = $1
		WHERE `+cond+` AND revoked_at IS NULL AND expires_at > now() RETURNING `+grantColumns, append([]any{actor}, args...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("store: revoking grants: %w", err)
	}
	gs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (hitl.Grant, error) { return scanGrant(r) })
	if err != nil {
		return nil, nil, fmt.Errorf("store: revoking grants: %w", err)
	}
	events := make([]audit.Event, len(gs))
	for i, g := range gs {
		events[i] = ev(g)
	}
	return gs, events, nil
}

// Answerable implements hitl.Store.
func (s *Store) Answerable(ctx context.Context, agentID, tokenID string) (owner, issuer string, err error) {
	err = s.pool.QueryRow(ctx, `SELECT coalesce((SELECT owner FROM agents WHERE id = $1), ''),
		coalesce((SELECT issued_by FROM tokens WHERE id = $2), '')`, agentID, tokenID).Scan(&owner, &issuer)
	if err != nil {
		return "", "", fmt.Errorf("store: reading who answers for agent %s: %w", agentID, err)
	}
	return owner, issuer, nil
}
