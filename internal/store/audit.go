package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/audit"
)

const insertEventSQL = `INSERT INTO audit_events (kind, actor, agent_id, agent_instance, conversation_id, step_id,
	correlation_id, action_id, tool, args, risk, decision, data)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`

// insertEvents writes events in tx. If any insert fails the caller's
// transaction fails with it: no change lands without its audit record.
func insertEvents(ctx context.Context, tx pgx.Tx, events ...audit.Event) error {
	if len(events) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, ev := range events {
		args, err := jsonArg(nilMap(ev.Args))
		if err != nil {
			return err
		}
		data, err := jsonArg(nilMap(ev.Data))
		if err != nil {
			return err
		}
		b.Queue(insertEventSQL, ev.Kind, ev.Actor, ev.AgentID, ev.AgentInstance, ev.ConversationID, ev.StepID,
			ev.CorrelationID, nullString(ev.ActionID), ev.Tool, args, []byte(ev.Risk), []byte(ev.Decision), data)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("store: writing audit events: %w", err)
	}
	return nil
}

// nilMap keeps an absent map NULL in the database rather than 'null'.
func nilMap(m map[string]any) any {
	if m == nil {
		return json.RawMessage(nil)
	}
	return m
}

// AppendEvents writes events in their own transaction (for events that are
// not part of another change, such as a failed login).
func (s *Store) AppendEvents(ctx context.Context, events ...audit.Event) error {
	return s.inTx(ctx, func(tx pgx.Tx) error { return insertEvents(ctx, tx, events...) })
}

const eventColumns = `id, at, kind, actor, agent_id, agent_instance, conversation_id, step_id, correlation_id,
	coalesce(action_id::text, ''), tool, args, risk, decision, data`

// QueryEvents returns events matching f in insertion order, and the cursor
// of the next page (0 at the end).
func (s *Store) QueryEvents(ctx context.Context, f audit.Filter) ([]audit.Event, int64, error) {
	where := []string{"id > $1"}
	args := []any{f.After}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.CorrelationID != "" {
		add("correlation_id = $%d", f.CorrelationID)
	}
	if f.AgentID != "" {
		add("agent_id = $%d", f.AgentID)
	}
	if f.ConversationID != "" {
		add("conversation_id = $%d", f.ConversationID)
	}
	if f.ActionID != "" {
		if !isUUID(f.ActionID) {
			return []audit.Event{}, 0, nil
		}
		add("action_id = $%d", f.ActionID)
	}
	if f.Kind != "" {
		add("kind = $%d", f.Kind)
	}
	if !f.Since.IsZero() {
		add("at >= $%d", f.Since)
	}
	if !f.Until.IsZero() {
		add("at < $%d", f.Until)
	}
	args = append(args, f.Limit+1)
	q := `SELECT ` + eventColumns + ` FROM audit_events WHERE ` + strings.Join(where, " AND ") +
		fmt.Sprintf(` ORDER BY id LIMIT $%d`, len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("store: querying audit: %w", err)
	}
	events, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, 0, fmt.Errorf("store: querying audit: %w", err)
	}
	var next int64
	if len(events) > f.Limit {
		events = events[:f.Limit]
		next = events[len(events)-1].ID
	}
	return events, next, nil
}

func scanEvent(row pgx.CollectableRow) (audit.Event, error) {
	var ev audit.Event
	var args, risk, decision, data []byte
	err := row.Scan(&ev.ID, &ev.At, &ev.Kind, &ev.Actor, &ev.AgentID, &ev.AgentInstance, &ev.ConversationID,
		&ev.StepID, &ev.CorrelationID, &ev.ActionID, &ev.Tool, &args, &risk, &decision, &data)
	if err != nil {
		return ev, err
	}
	ev.At = ev.At.UTC()
	if len(args) > 0 {
		if err := json.Unmarshal(args, &ev.Args); err != nil {
			return ev, err
		}
	}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &ev.Data); err != nil {
			return ev, err
		}
	}
	ev.Risk = nullRaw(risk)
	ev.Decision = nullRaw(decision)
	return ev, nil
}
