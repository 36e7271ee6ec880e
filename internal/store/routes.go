package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/hitl"
)

// routeVariant turns an insert statement into the one for a pending action
// with a route (hitl.Guard.Route): the route's steps ($first, a JSON array)
// go to action_routes and the outbox gets one action.pending row per target
// ($first+1), in the statement's own transaction. Only an action whose rule
// or fleet configured notifications, reviewers or escalation runs it: every
// other submit runs the statement without any of it.
func routeVariant(q string, first int) string {
	steps, targets := "$"+strconv.Itoa(first), "$"+strconv.Itoa(first+1)
	marker := "), j AS ("
	return patchStatement("routeVariant", q, marker, `), rt AS (
	INSERT INTO action_routes (action_id, clause, rule_id, step, after_ms, due_at, notify, reviewers, reminder, fired_at)
	SELECT a.id, r.clause, r.rule_id, r.step, r.after_ms, r.due_at, r.notify, r.reviewers, r.reminder, CASE WHEN r.step = 0 THEN r.due_at END
	FROM a, jsonb_to_recordset(`+steps+`::jsonb) AS r(clause integer, rule_id text, step integer, after_ms bigint, due_at timestamptz,
		notify text[], reviewers text[], reminder boolean)
	WHERE $10 = 'pending'
), ob AS (
	INSERT INTO notify_outbox (action_id, target, event)
	SELECT a.id, t, 'action.pending' FROM a, unnest(`+targets+`::text[]) t WHERE $10 = 'pending'
`+marker)
}

type routeStepJSON struct {
	Clause    int      `json:"clause"`
	RuleID    string   `json:"rule_id"`
	Step      int      `json:"step"`
	AfterMS   int64    `json:"after_ms"`
	DueAt     string   `json:"due_at"`
	Notify    []string `json:"notify"`
	Reviewers []string `json:"reviewers"`
	Reminder  bool     `json:"reminder"`
}

// routeArgs are the route variants' two parameters.
func routeArgs(r *hitl.Route) ([]any, error) {
	steps := make([]routeStepJSON, len(r.Steps))
	for i, st := range r.Steps {
		steps[i] = routeStepJSON{Clause: st.Clause, RuleID: st.RuleID, Step: st.Step, AfterMS: st.After.Milliseconds(), DueAt: st.Due.UTC().Format("2006-01-02T15:04:05.999999Z07:00"),
			Notify: textArray(st.Notify), Reviewers: textArray(st.Reviewers), Reminder: st.Reminder}
	}
	b, err := json.Marshal(steps)
	if err != nil {
		return nil, fmt.Errorf("store: encoding route: %w", err)
	}
	targets := r.Notify
	if targets == nil {
		targets = []string{}
	}
	return []any{b, targets}, nil
}

// decidedOutboxSQL tells every target that was told of an action that it
// has been decided, and drops the escalation steps that will never fire
// now (the page keeps those that did).
const decidedOutboxSQL = `WITH r AS (
	DELETE FROM action_routes WHERE action_id = $1 AND fired_at IS NULL
)
INSERT INTO notify_outbox (action_id, target, event)
SELECT DISTINCT action_id, target, 'action.decided' FROM notify_outbox
WHERE action_id = $1 AND event <> 'action.decided'`

// ReviewerAccess implements hitl.Store: one row per clause whose step 0
// names reviewers (a rule that restricts who may approve), with the
// groups of that clause's fired steps and whether reviewer is in one.
func (s *Store) ReviewerAccess(ctx context.Context, actionID, reviewer string) (hitl.ReviewerAccess, error) {
	acc := hitl.ReviewerAccess{Rules: []hitl.RuleAccess{}}
	rows, err := s.pool.Query(ctx, `
SELECT o.rule_id,
	coalesce((SELECT array_agg(DISTINCT g ORDER BY g) FROM action_routes r, unnest(r.reviewers) g
		WHERE r.action_id = o.action_id AND r.clause = o.clause AND r.fired_at IS NOT NULL), '{}'),
	EXISTS (SELECT FROM action_routes r JOIN reviewer_group_members m ON m.group_name = ANY (r.reviewers)
		WHERE r.action_id = o.action_id AND r.clause = o.clause AND r.fired_at IS NOT NULL AND lower(m.username) = lower($2))
FROM action_routes o WHERE o.action_id = $1 AND o.step = 0 AND cardinality(o.reviewers) > 0
ORDER BY o.clause`, actionID, reviewer)
	if err == nil {
		acc.Rules, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (hitl.RuleAccess, error) {
			var ra hitl.RuleAccess
			err := r.Scan(&ra.RuleID, &ra.Groups, &ra.Member)
			return ra, err
		})
	}
	if err != nil {
		return acc, fmt.Errorf("store: reading who may approve %s: %w", actionID, err)
	}
	return acc, nil
}

// canApproveSQL is ListActions' preselection for CanApprove ($%d: the
// reviewer): not yet approved by them, and no clause whose step 0 names
// reviewers (a rule that restricts who may approve) leaves them out of
// the groups its fired steps name.
const canApproveSQL = `NOT approvals @> jsonb_build_array(jsonb_build_object('by', $%[1]d::text))
	AND NOT EXISTS (SELECT FROM action_routes o WHERE o.action_id = actions.id AND o.step = 0 AND cardinality(o.reviewers) > 0
		AND NOT EXISTS (SELECT FROM action_routes r JOIN reviewer_group_members m ON m.group_name = ANY (r.reviewers)
			WHERE r.action_id = o.action_id AND r.clause = o.clause AND r.fired_at IS NOT NULL AND lower(m.username) = lower($%[1]d)))`

// RouteSteps implements hitl.Store.
func (s *Store) RouteSteps(ctx context.Context, actionID string) ([]hitl.RouteStep, error) {
	if !isUUID(actionID) {
		return []hitl.RouteStep{}, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT clause, rule_id, step, after_ms, due_at, notify, reviewers, reminder, fired_at
		FROM action_routes WHERE action_id = $1 ORDER BY clause, step`, actionID)
	if err != nil {
		return nil, fmt.Errorf("store: reading route of %s: %w", actionID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (hitl.RouteStep, error) {
		var st hitl.RouteStep
		var ms int64
		err := r.Scan(&st.Clause, &st.RuleID, &st.Step, &ms, &st.Due, &st.Notify, &st.Reviewers, &st.Reminder, &st.FiredAt)
		st.After = msDuration(ms)
		st.Due = st.Due.UTC()
		if st.FiredAt != nil {
			t := st.FiredAt.UTC()
			st.FiredAt = &t
		}
		return st, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: reading route of %s: %w", actionID, err)
	}
	return out, nil
}

// Deliveries implements hitl.Store.
func (s *Store) Deliveries(ctx context.Context, actionID string) ([]hitl.Delivery, error) {
	if !isUUID(actionID) {
		return []hitl.Delivery{}, nil
	}
	rows, err := s.pool.Query(ctx, `
SELECT o.id, o.target, o.event, o.step, o.status, o.last_error, o.created_at, o.delivered_at,
	CASE WHEN o.status = 'queued' THEN o.next_at END,
	coalesce((SELECT jsonb_agg(jsonb_build_object('n', t.n, 'at', t.at, 'ok', t.ok, 'status_code', t.status_code, 'error', t.error) ORDER BY t.n)
		FROM notify_attempts t WHERE t.outbox_id = o.id), '[]')
FROM notify_outbox o WHERE o.action_id = $1 ORDER BY o.id`, actionID)
	if err != nil {
		return nil, fmt.Errorf("store: reading deliveries of %s: %w", actionID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (hitl.Delivery, error) {
		var d hitl.Delivery
		var attempts []byte
		if err := r.Scan(&d.ID, &d.Target, &d.Event, &d.Step, &d.Status, &d.LastError, &d.CreatedAt, &d.DeliveredAt, &d.NextAt, &attempts); err != nil {
			return d, err
		}
		d.CreatedAt = d.CreatedAt.UTC()
		if err := json.Unmarshal(attempts, &d.Attempts); err != nil {
			return d, err
		}
		return d, nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: reading deliveries of %s: %w", actionID, err)
	}
	return out, nil
}

// FireEscalations implements hitl.Store. SKIP LOCKED lets several
// instances fire at once without waiting on each other; fired_at IS NULL
// under the row lock makes each step fire once, with one audit event. The
// action's row is locked too, so that a decision committing meanwhile is
// either seen (the step does not fire) or waits for it.
func (s *Store) FireEscalations(ctx context.Context, limit int) ([]string, error) {
	// cand is read first, from the partial index of unfired steps (empty
	// when nothing is configured), so that the sweep never scans actions;
	// steps of actions decided meanwhile are dropped by the decision.
	rows, err := s.pool.Query(ctx, `
WITH cand AS MATERIALIZED (
	SELECT action_id, clause, step FROM action_routes WHERE fired_at IS NULL AND due_at <= now() ORDER BY due_at LIMIT $1 * 2
), due AS (
	SELECT r.action_id, r.clause, r.step FROM cand JOIN action_routes r USING (action_id, clause, step) JOIN actions a ON a.id = r.action_id
	WHERE r.fired_at IS NULL AND a.status = 'pending' AND (a.expires_at IS NULL OR a.expires_at > now())
	LIMIT $1
	FOR UPDATE OF r, a SKIP LOCKED
), f AS (
	UPDATE action_routes r SET fired_at = now()
	FROM due WHERE r.action_id = due.action_id AND r.clause = due.clause AND r.step = due.step AND r.fired_at IS NULL
	RETURNING r.*
), o AS (
	INSERT INTO notify_outbox (action_id, target, event, step)
	SELECT f.action_id, t, 'action.escalated', f.step FROM f, unnest(f.notify) t
), e AS (
	INSERT INTO audit_events (kind, actor, agent_id, agent_instance, conversation_id, step_id, correlation_id,
		action_id, tool, args, risk, decision, data)
	SELECT 'action.escalated', 'system', a.agent_id, a.agent_instance, a.conversation_id, a.step_id, a.correlation_id,
		a.id, a.tool, a.args, a.risk, a.decision,
		jsonb_build_object('rule_id', f.rule_id, 'step', f.step, 'after_ms', f.after_ms, 'due_at', f.due_at, 'notify', to_jsonb(f.notify),
			'reviewers', to_jsonb(f.reviewers), 'reminder', f.reminder)
	FROM f JOIN actions a ON a.id = f.action_id
)
SELECT DISTINCT action_id::text FROM f`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: firing escalations: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: firing escalations: %w", err)
	}
	return ids, nil
}

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
