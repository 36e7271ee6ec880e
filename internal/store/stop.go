package store

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/hitl"
)

// stopActionsSQL cancels (hitl.MoveStop) every action of agent $1 that may
// be cancelled, or only those submitted with token $2 when it is not
// empty; retires their jobs (a worker running one is told to stop on its
// next heartbeat) and audits each, in one statement. An approved or
// running action's result says why ($5, $6: hitl.StopResult).
const stopActionsSQL = `
WITH s AS (
	SELECT id, status AS from_status FROM actions
	WHERE agent_id = $1 AND ($2 = '' OR token_id = $2) AND status = ANY($3)
	FOR UPDATE
), u AS (
	UPDATE actions a SET status = $4, version = a.version + 1, updated_at = now(),
		result = CASE s.from_status WHEN 'approved' THEN $5::jsonb WHEN 'running' THEN $6::jsonb ELSE a.result END
	FROM s WHERE a.id = s.id
	RETURNING a.*, s.from_status
), j AS (
	UPDATE jobs SET state = 'done', stop_reason = $7, updated_at = now()
	FROM u WHERE jobs.action_id = u.id AND jobs.state <> 'done'
), e AS (
	INSERT INTO audit_events (kind, actor, agent_id, agent_instance, conversation_id, step_id, correlation_id,
		action_id, tool, args, risk, decision, data)
	SELECT 'action.cancelled', $8, agent_id, agent_instance, conversation_id, step_id, correlation_id,
		id, tool, args, risk, decision, jsonb_build_object('from', from_status, 'reason', $7::text)
	FROM u
)
SELECT ` + actionColumns + ` FROM u`

// stopActions runs stopActionsSQL in tx and returns the actions it stopped.
func stopActions(ctx context.Context, tx pgx.Tx, agentID, tokenID, actor, why string) ([]*hitl.Action, error) {
	rows, err := tx.Query(ctx, stopActionsSQL, agentID, tokenID, hitl.MoveStop.FromStrings(), hitl.MoveStop.To,
		[]byte(hitl.StopResult(hitl.StatusApproved, why)), []byte(hitl.StopResult(hitl.StatusRunning, why)), why, actor)
	if err != nil {
		return nil, fmt.Errorf("store: stopping actions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*hitl.Action, error) { return scanAction(r) })
	if err != nil {
		return nil, fmt.Errorf("store: stopping actions: %w", err)
	}
	return out, nil
}

// SuspendAgent implements hitl.Store.
func (s *Store) SuspendAgent(ctx context.Context, agentID, actor, why string) ([]*hitl.Action, error) {
	var out []*hitl.Action
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var already bool
		// An admin's own suspension outlasts a fleet resume.
		err := tx.QueryRow(ctx, `UPDATE agents a SET suspended_at = coalesce(old.suspended_at, now()), suspended_by_fleet = false
			FROM (SELECT id, suspended_at FROM agents WHERE id = $1 FOR NO KEY UPDATE) old
			WHERE a.id = old.id RETURNING old.suspended_at IS NOT NULL`, agentID).Scan(&already)
		if err != nil {
			return notFound(err, "no agent %q", agentID)
		}
		if err := markSuspended(ctx, tx, []string{agentID}, true); err != nil {
			return err
		}
		if out, err = stopActions(ctx, tx, agentID, "", actor, why); err != nil {
			return err
		}
		revoked, err := revokeSuspendedGrants(ctx, tx, []string{agentID}, actor, nil)
		if err != nil {
			return err
		}
		return insertEvents(ctx, tx, append(revoked, audit.Event{Kind: audit.KindAgentSuspended, Actor: actor, AgentID: agentID,
			Data: map[string]any{"already_suspended": already, "cancelled": len(out), "grants_revoked": len(revoked)}})...)
	})
	return out, err
}

// revokeSuspendedGrants revokes in tx every active conversation grant of
// the agents being suspended, and returns their grant.revoked events for
// the caller to write in tx: a suspension is a hard stop, and a grant still
// in force when the agent is resumed would let its calls in those
// conversations run unreviewed. extra adds to each event's data.
func revokeSuspendedGrants(ctx context.Context, tx pgx.Tx, agentIDs []string, actor string, extra map[string]any) ([]audit.Event, error) {
	_, events, err := revokeGrants(ctx, tx, "agent_id = ANY($2)", []any{agentIDs}, actor, func(g hitl.Grant) audit.Event {
		data := map[string]any{"agent_suspended": true}
		maps.Copy(data, extra)
		return hitl.GrantRevoked(g, actor, data)
	})
	return events, err
}

// ResumeAgent implements hitl.Store.
func (s *Store) ResumeAgent(ctx context.Context, agentID, actor, why string) ([]*hitl.Action, error) {
	var out []*hitl.Action
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var was *time.Time
		err := tx.QueryRow(ctx, `UPDATE agents a SET suspended_at = NULL, suspended_by_fleet = false FROM (SELECT id, suspended_at FROM agents WHERE id = $1 FOR NO KEY UPDATE) old
			WHERE a.id = old.id RETURNING old.suspended_at`, agentID).Scan(&was)
		if err != nil {
			return notFound(err, "no agent %q", agentID)
		}
		if was != nil {
			if out, err = stopActions(ctx, tx, agentID, "", actor, why); err != nil {
				return err
			}
		}
		if err := markSuspended(ctx, tx, []string{agentID}, false); err != nil {
			return err
		}
		return insertEvents(ctx, tx, audit.Event{Kind: audit.KindAgentResumed, Actor: actor, AgentID: agentID,
			Data: map[string]any{"was_suspended": was != nil, "cancelled": len(out)}})
	})
	return out, err
}

// markSuspended sets the suspension flag on every token of the agents: the
// submit statement reads it there (a pending submit reads the agent's
// row itself, locked). The caller holds the agents' rows' locks, which
// RecordToken waits for, so a token issued meanwhile gets the flag too.
func markSuspended(ctx context.Context, tx pgx.Tx, agentIDs []string, suspended bool) error {
	_, err := tx.Exec(ctx, `UPDATE tokens SET agent_suspended = $2 WHERE kind = 'agent' AND subject = ANY($1)`, agentIDs, suspended)
	if err != nil {
		return fmt.Errorf("store: marking the agents' tokens: %w", err)
	}
	return nil
}

// AgentSuspendedAt returns when the agent was suspended, nil when it is
// not; not_found for an unknown agent.
func (s *Store) AgentSuspendedAt(ctx context.Context, agentID string) (*time.Time, error) {
	var at *time.Time
	err := s.pool.QueryRow(ctx, `SELECT suspended_at FROM agents WHERE id = $1`, agentID).Scan(&at)
	if err != nil {
		return nil, notFound(err, "no agent %q", agentID)
	}
	if at != nil {
		t := at.UTC()
		at = &t
	}
	return at, nil
}

// stopTokenActions stops what was submitted with a revoked agent token,
// in the revocation's transaction, and announces the changes to every
// instance (this one included) when it commits. The conversation grants
// that approvals of the token's actions made are revoked with it (a token
// is revoked because it leaked: what its holder had approved for a
// conversation must not outlive it); it returns their grant.revoked
// events for the caller to write in tx.
func stopTokenActions(ctx context.Context, tx pgx.Tx, agentID, tokenID, actor string) ([]audit.Event, error) {
	stopped, err := stopActions(ctx, tx, agentID, tokenID, actor, fmt.Sprintf("token %s was revoked by %s", tokenID, actor))
	if err != nil {
		return nil, err
	}
	_, revoked, err := revokeGrants(ctx, tx, "agent_id = $2 AND action_id IN (SELECT id FROM actions WHERE agent_id = $2 AND token_id = $3)",
		[]any{agentID, tokenID}, actor, func(g hitl.Grant) audit.Event {
			return hitl.GrantRevoked(g, actor, map[string]any{"token_revoked": tokenID})
		})
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(stopped))
	for i, a := range stopped {
		ids[i] = a.ID
	}
	return revoked, notifyInTx(ctx, tx, ids)
}

// notifyInTx announces changed actions on the notify channel as part of tx
// (sent when it commits). The sender is not an instance, so every
// instance's listener, this one's included, wakes its local waiters.
func notifyInTx(ctx context.Context, tx pgx.Tx, ids []string) error {
	var sb strings.Builder
	flush := func() error {
		if sb.Len() == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, "store|"+sb.String())
		sb.Reset()
		if err != nil {
			return fmt.Errorf("store: notify: %w", err)
		}
		return nil
	}
	for _, id := range ids {
		sb.WriteString("u:" + id + ",")
		if sb.Len() >= maxPayload {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}
