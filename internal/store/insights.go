package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/insights"
)

// Decisions implements insights.Store: the events that decided actions
// (approved, denied, expired), each with its action and when the deciding
// reviewer first opened the action's page.
func (s *Store) Decisions(ctx context.Context, since time.Time, limit int) ([]insights.Decision, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT e.action_id::text, e.kind, e.actor, a.agent_id, a.tool, a.args,
		       coalesce(a.decision->>'source', ''), coalesce(a.decision->>'rule_id', ''),
		       coalesce((a.decision->>'policy_version')::int, 0), a.created_at, e.at, v.opened_at
		FROM audit_events e
		JOIN actions a ON a.id = e.action_id
		LEFT JOIN action_views v ON v.action_id = e.action_id AND v.reviewer = e.actor
		WHERE e.kind IN ('action.approved', 'action.denied', 'action.expired') AND e.at >= $1
		ORDER BY e.at, e.id
		LIMIT $2`, since, limit)
	if err != nil {
		return nil, fmt.Errorf("store: reading decisions: %w", err)
	}
	defer rows.Close()
	var out []insights.Decision
	for rows.Next() {
		var d insights.Decision
		var args []byte
		if err := rows.Scan(&d.ActionID, &d.Kind, &d.Actor, &d.AgentID, &d.Tool, &args, &d.Source, &d.RuleID,
			&d.PolicyVersion, &d.CreatedAt, &d.DecidedAt, &d.OpenedAt); err != nil {
			return nil, fmt.Errorf("store: reading decisions: %w", err)
		}
		if err := audit.UnmarshalArgs(args, &d.Args); err != nil {
			return nil, fmt.Errorf("store: decoding action %s: %w", d.ActionID, err)
		}
		d.Kind = strings.TrimPrefix(d.Kind, "action.")
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: reading decisions: %w", err)
	}
	return out, nil
}

// RecordOpen implements insights.Store.
func (s *Store) RecordOpen(ctx context.Context, id, reviewer string, at time.Time) error {
	if !isUUID(id) {
		return nil
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO action_views (action_id, reviewer, opened_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		id, reviewer, at)
	if err != nil {
		return fmt.Errorf("store: recording a page open: %w", err)
	}
	return nil
}
