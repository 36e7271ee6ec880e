package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/hitl"
)

// planModeLock is the advisory lock that orders plan mode switches against
// approvals: a switch holds it exclusively, an approval shares it while it
// reads whether plan mode is on. An approval that began before a switch
// commits before it; one that begins after reads the new state. (The submit
// statement needs no lock: it reads plan_modes in its own snapshot, so any
// submit that starts after a switch returned sees it.)
const planModeLock int64 = 0x41_69_72_6c_50_6c_61_6e // "AirlPlan"

// refuseInPlanMode returns hitl.ErrPlanMode when plan mode is on for the
// agent or the fleet, holding planModeLock shared for the rest of tx.
func refuseInPlanMode(ctx context.Context, tx pgx.Tx, agentID string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1)`, planModeLock); err != nil {
		return fmt.Errorf("store: plan mode lock: %w", err)
	}
	var on bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM plan_modes WHERE scope IN ('fleet', 'agent:' || $1))`, agentID).Scan(&on)
	if err != nil {
		return fmt.Errorf("store: reading plan mode: %w", err)
	}
	if on {
		return hitl.ErrPlanMode
	}
	return nil
}

// planModeOf reads one switch; off when it has no row.
func planModeOf(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, scope string) (hitl.PlanMode, error) {
	pm := hitl.PlanMode{Scope: scope}
	var at time.Time
	err := q.QueryRow(ctx, `SELECT set_by, set_at, reason FROM plan_modes WHERE scope = $1`, scope).Scan(&pm.SetBy, &at, &pm.Reason)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return pm, nil
	case err != nil:
		return pm, fmt.Errorf("store: reading plan mode %s: %w", scope, err)
	}
	at = at.UTC()
	pm.On, pm.SetAt = true, &at
	return pm, nil
}

// agentExists returns not_found for an unknown agent.
func agentExists(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, agentID string) error {
	var id string
	err := q.QueryRow(ctx, `SELECT id FROM agents WHERE id = $1`, agentID).Scan(&id)
	return notFound(err, "no agent %q", agentID)
}

// SetPlanMode implements hitl.PlanModeStore.
func (s *Store) SetPlanMode(ctx context.Context, scope string, on bool, actor, reason string, ev func(was hitl.PlanMode) audit.Event) (hitl.PlanMode, error) {
	var out hitl.PlanMode
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, planModeLock); err != nil {
			return fmt.Errorf("store: plan mode lock: %w", err)
		}
		if agentID, ok := strings.CutPrefix(scope, "agent:"); ok {
			if err := agentExists(ctx, tx, agentID); err != nil {
				return err
			}
		} else if scope != hitl.FleetScope {
			return fmt.Errorf("store: unknown plan mode scope %q", scope)
		}
		was, err := planModeOf(ctx, tx, scope)
		if err != nil {
			return err
		}
		if on {
			_, err = tx.Exec(ctx, `INSERT INTO plan_modes (scope, set_by, reason) VALUES ($1, $2, $3)
				ON CONFLICT (scope) DO UPDATE SET set_by = excluded.set_by, set_at = now(), reason = excluded.reason`, scope, actor, reason)
		} else {
			_, err = tx.Exec(ctx, `DELETE FROM plan_modes WHERE scope = $1`, scope)
		}
		if err != nil {
			return fmt.Errorf("store: setting plan mode %s: %w", scope, err)
		}
		if out, err = planModeOf(ctx, tx, scope); err != nil {
			return err
		}
		return insertEvents(ctx, tx, ev(was))
	})
	return out, err
}

// PlanModes implements hitl.PlanModeStore.
func (s *Store) PlanModes(ctx context.Context, agentID string) (agent, fleet hitl.PlanMode, err error) {
	if fleet, err = planModeOf(ctx, s.pool, hitl.FleetScope); err != nil {
		return agent, fleet, err
	}
	if agentID == "" {
		return fleet, fleet, nil
	}
	if err := agentExists(ctx, s.pool, agentID); err != nil {
		return agent, fleet, err
	}
	agent, err = planModeOf(ctx, s.pool, hitl.AgentPlanScope(agentID))
	return agent, fleet, err
}

// PlanModesOn implements hitl.PlanModeStore.
func (s *Store) PlanModesOn(ctx context.Context) ([]hitl.PlanMode, error) {
	rows, err := s.pool.Query(ctx, `SELECT scope, set_by, set_at, reason FROM plan_modes ORDER BY scope <> 'fleet', scope`)
	if err != nil {
		return nil, fmt.Errorf("store: listing plan modes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (hitl.PlanMode, error) {
		pm := hitl.PlanMode{On: true}
		var at time.Time
		err := r.Scan(&pm.Scope, &pm.SetBy, &at, &pm.Reason)
		at = at.UTC()
		pm.SetAt = &at
		return pm, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: listing plan modes: %w", err)
	}
	return out, nil
}

// fleetStopOf reads the fleet stop.
func fleetStopOf(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (hitl.FleetStop, error) {
	var st hitl.FleetStop
	var at time.Time
	err := q.QueryRow(ctx, `SELECT stopped_by, stopped_at, reason FROM fleet_stops`).Scan(&st.StoppedBy, &at, &st.Reason)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return st, nil
	case err != nil:
		return st, fmt.Errorf("store: reading the fleet stop: %w", err)
	}
	at = at.UTC()
	st.Stopped, st.StoppedAt = true, &at
	return st, nil
}

// FleetStop implements hitl.PlanModeStore.
func (s *Store) FleetStop(ctx context.Context) (hitl.FleetStop, error) {
	return fleetStopOf(ctx, s.pool)
}

// SuspendFleet implements hitl.PlanModeStore. The agents are suspended by
// one statement that locks their rows (a token issued meanwhile waits and
// carries the suspension, as with SuspendAgent); their tokens are marked
// and their unfinished actions stopped, each audited.
func (s *Store) SuspendFleet(ctx context.Context, actor, reason string) (hitl.FleetStop, []*hitl.Action, error) {
	var st hitl.FleetStop
	var out []*hitl.Action
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO fleet_stops (stopped_by, reason) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, actor, reason)
		if err != nil {
			return fmt.Errorf("store: recording the fleet stop: %w", err)
		}
		already := tag.RowsAffected() == 0
		// The rows locked in id order first, as every batch of submits
		// locks them (the lock order, store.go).
		rows, err := tx.Query(ctx, `UPDATE agents a SET suspended_at = now(), suspended_by_fleet = true
			FROM (SELECT id FROM agents WHERE suspended_at IS NULL ORDER BY id COLLATE "C" FOR NO KEY UPDATE) l
			WHERE a.id = l.id RETURNING a.id`)
		if err != nil {
			return fmt.Errorf("store: suspending the fleet: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("store: suspending the fleet: %w", err)
		}
		why := "the fleet was stopped by " + actor
		if reason != "" {
			why += ": " + reason
		}
		if err := markSuspended(ctx, tx, ids, true); err != nil {
			return err
		}
		events := make([]audit.Event, 0, len(ids)+1)
		for _, id := range ids {
			stopped, err := stopActions(ctx, tx, id, "", actor, why)
			if err != nil {
				return err
			}
			out = append(out, stopped...)
			events = append(events, audit.Event{Kind: audit.KindAgentSuspended, Actor: actor, AgentID: id,
				Data: map[string]any{"already_suspended": false, "cancelled": len(stopped), "fleet": true, "reason": reason}})
		}
		revoked, err := revokeSuspendedGrants(ctx, tx, ids, actor, map[string]any{"fleet": true})
		if err != nil {
			return err
		}
		events = append(events, revoked...)
		events = append(events, audit.Event{Kind: hitl.KindFleetSuspended, Actor: actor,
			Data: map[string]any{"reason": reason, "agents": ids, "cancelled": len(out), "already_stopped": already,
				"grants_revoked": len(revoked)}})
		if err := insertEvents(ctx, tx, events...); err != nil {
			return err
		}
		if st, err = fleetStopOf(ctx, tx); err != nil {
			return err
		}
		st.Agents = ids
		return nil
	})
	if err != nil {
		return hitl.FleetStop{}, nil, err
	}
	for _, a := range out {
		st.Cancelled = append(st.Cancelled, a.ID)
	}
	return st, out, nil
}

// ResumeFleet implements hitl.PlanModeStore.
func (s *Store) ResumeFleet(ctx context.Context, actor string, why func(agentID string) string) (hitl.FleetStop, []*hitl.Action, error) {
	var st hitl.FleetStop
	var out []*hitl.Action
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM fleet_stops`)
		if err != nil {
			return fmt.Errorf("store: lifting the fleet stop: %w", err)
		}
		rows, err := tx.Query(ctx, `UPDATE agents a SET suspended_at = NULL, suspended_by_fleet = false
			FROM (SELECT id FROM agents WHERE suspended_by_fleet ORDER BY id COLLATE "C" FOR NO KEY UPDATE) l
			WHERE a.id = l.id RETURNING a.id`)
		if err != nil {
			return fmt.Errorf("store: resuming the fleet: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("store: resuming the fleet: %w", err)
		}
		events := make([]audit.Event, 0, len(ids)+1)
		for _, id := range ids {
			// Only a submit that raced the stop can have left something
			// open, and it must not run now (as with ResumeAgent).
			stopped, err := stopActions(ctx, tx, id, "", actor, why(id))
			if err != nil {
				return err
			}
			out = append(out, stopped...)
			events = append(events, audit.Event{Kind: audit.KindAgentResumed, Actor: actor, AgentID: id,
				Data: map[string]any{"was_suspended": true, "cancelled": len(stopped), "fleet": true}})
		}
		if err := markSuspended(ctx, tx, ids, false); err != nil {
			return err
		}
		events = append(events, audit.Event{Kind: hitl.KindFleetResumed, Actor: actor,
			Data: map[string]any{"agents": ids, "was_stopped": tag.RowsAffected() > 0, "cancelled": len(out)}})
		if err := insertEvents(ctx, tx, events...); err != nil {
			return err
		}
		st.Agents = ids
		return nil
	})
	if err != nil {
		return hitl.FleetStop{}, nil, err
	}
	for _, a := range out {
		st.Cancelled = append(st.Cancelled, a.ID)
	}
	return st, out, nil
}
