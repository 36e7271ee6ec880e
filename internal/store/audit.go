package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/audit"
)

// insertEventSQL writes one event. Its JSON values go through jsonb, as
// every writer's do (migration 00032): the columns hold jsonb's text of
// the value, which verification hashes without parsing it.
const insertEventSQL = `INSERT INTO audit_events (kind, actor, agent_id, agent_instance, conversation_id, step_id,
	correlation_id, action_id, tool, args, risk, decision, data, digest)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11::jsonb, $12::jsonb, $13::jsonb, $14)`

// insertEvents writes events in tx. If any insert fails the caller's
// transaction fails with it: no change lands without its audit record.
func insertEvents(ctx context.Context, tx pgx.Tx, events ...audit.Event) error {
	if len(events) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	if err := queueEvents(b, events...); err != nil {
		return err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("store: writing audit events: %w", err)
	}
	return nil
}

// queueEvents queues the inserts of events in b.
func queueEvents(b *pgx.Batch, events ...audit.Event) error {
	for _, ev := range events {
		args, err := jsonArg(nilMap(ev.Args))
		if err != nil {
			return err
		}
		data, err := jsonArg(nilMap(ev.Data))
		if err != nil {
			return err
		}
		digest := eventDigest(&audit.Record{Kind: string(ev.Kind), Actor: ev.Actor, AgentID: ev.AgentID, AgentInstance: ev.AgentInstance,
			ConversationID: ev.ConversationID, StepID: ev.StepID, CorrelationID: ev.CorrelationID, ActionID: ev.ActionID,
			Tool: ev.Tool, Args: args, Risk: ev.Risk, Decision: ev.Decision, Data: data})
		b.Queue(insertEventSQL, ev.Kind, ev.Actor, ev.AgentID, ev.AgentInstance, ev.ConversationID, ev.StepID,
			ev.CorrelationID, nullString(ev.ActionID), ev.Tool, args, []byte(ev.Risk), []byte(ev.Decision), data, digest)
	}
	return nil
}

// eventDigest returns the content digest (audit.FormatV2) of the event r
// describes, r holding exactly the values its insert passes (JSON values
// as the bytes sent; nil or empty for NULL), or nil (stored NULL: the
// sealer works it out from the stored event) when the database would not
// store r's values as given: an action_id not in the form the uuid type
// prints, or JSON the canonical form refuses. The JSON values go through jsonb,
// which respells them (key order, whitespace, numbers, escapes; the json
// columns keep jsonb's text); the canonical form is the same for every
// spelling (audit.AppendCanonicalJSON), so the digest of the bytes sent is
// the digest of what is stored.
func eventDigest(r *audit.Record) []byte {
	if r.ActionID != "" && !isUUID(r.ActionID) { // the digest lowercases it as PostgreSQL prints it
		return nil
	}
	for _, j := range []*json.RawMessage{&r.Args, &r.Risk, &r.Decision, &r.Data} {
		if len(*j) == 0 {
			*j = nil
		}
	}
	return audit.ContentDigest(r)
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

// QueryEvents returns events matching f in insertion order, and the cursor
// of the next page (0 at the end).
func (s *Store) QueryEvents(ctx context.Context, f audit.Filter) ([]audit.Event, int64, error) {
	where, args, ok := auditWhere(f, "id", f.After)
	if !ok {
		return []audit.Event{}, 0, nil
	}
	args = append(args, f.Limit+1)
	q := `SELECT ` + recordColumns + ` FROM audit_events WHERE ` + where +
		fmt.Sprintf(` ORDER BY id LIMIT $%d`, len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("store: querying audit: %w", err)
	}
	recs, err := collectRecords(rows, f.Limit+1)
	if err != nil {
		return nil, 0, fmt.Errorf("store: querying audit: %w", err)
	}
	events := make([]audit.Event, len(recs))
	for i := range recs {
		if events[i], err = recs[i].Event(); err != nil {
			return nil, 0, fmt.Errorf("store: querying audit: %w", err)
		}
	}
	var next int64
	if len(events) > f.Limit {
		events = events[:f.Limit]
		next = events[len(events)-1].ID
	}
	return events, next, nil
}

// auditWhere returns the WHERE condition selecting f's events with key (id
// or seq) greater than after, and its arguments; ok is false when no event
// can match.
func auditWhere(f audit.Filter, key string, after int64) (where string, args []any, ok bool) {
	conds := []string{key + " > $1"}
	args = []any{after}
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, fmt.Sprintf(cond, len(args)))
	}
	// The lookup indexes are partial (correlation_id <> '' and so on,
	// migration 00001), and a parameter could be '' for all the planner
	// knows: each condition states its index's predicate as well, so that
	// the statement's generic plan, cached with the prepared statement, can
	// use the index. Without it PostgreSQL plans every lookup afresh over
	// every partition (issue 14: most of a correlation-ID lookup).
	if f.CorrelationID != "" {
		add("correlation_id = $%d AND correlation_id <> ''", f.CorrelationID)
	}
	if f.AgentID != "" {
		add("agent_id = $%d AND agent_id <> ''", f.AgentID)
	}
	if f.ConversationID != "" {
		add("conversation_id = $%d AND conversation_id <> ''", f.ConversationID)
	}
	if f.ActionID != "" {
		if !isUUID(f.ActionID) {
			return "", nil, false
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
	return strings.Join(conds, " AND "), args, true
}
