package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/hitl"
)

// insertJob queues j in tx.
func insertJob(ctx context.Context, tx pgx.Tx, j *hitl.Job) error {
	_, err := tx.Exec(ctx, `INSERT INTO jobs (action_id, kind, target, max_attempts) VALUES ($1, $2, $3, $4)`,
		j.ActionID, j.Kind, j.Target, j.MaxAttempts)
	if err != nil {
		return fmt.Errorf("store: queueing job: %w", err)
	}
	return nil
}

// LeaseJob implements hitl.Store: it claims the oldest queued job whose
// kind and target this worker serves (SKIP LOCKED: workers never wait on
// each other), moves its action approved → running and audits it, in one
// transaction. It returns nil when there is no such job.
func (s *Store) LeaseJob(ctx context.Context, worker string, kinds, targets []string, ttl time.Duration) (*hitl.Lease, error) {
	var lease *hitl.Lease
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var l hitl.Lease
		err := tx.QueryRow(ctx, `
			WITH j AS (
				SELECT action_id FROM jobs
				WHERE state = 'queued' AND kind = ANY($2) AND target = ANY($3)
				ORDER BY created_at
				LIMIT 1
				FOR UPDATE SKIP LOCKED
			)
			UPDATE jobs SET state = 'leased', fence = fence + 1, attempts = attempts + 1, worker = $1,
				lease_expires_at = now() + $4 * interval '1 millisecond', updated_at = now()
			FROM j WHERE jobs.action_id = j.action_id
			RETURNING jobs.action_id, jobs.fence, jobs.kind, jobs.target, jobs.attempts, jobs.lease_expires_at`,
			worker, kinds, targets, ttl.Milliseconds()).Scan(&l.ActionID, &l.Fence, &l.Kind, &l.Target, &l.Attempt, &l.ExpiresAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("store: leasing job: %w", err)
		}
		a, err := scanAction(tx.QueryRow(ctx, `
			UPDATE actions SET status = 'running', version = version + 1, updated_at = now()
			WHERE id = $1 AND status = 'approved'
			RETURNING `+actionColumns, l.ActionID))
		if err != nil {
			// The action is not approved (cancelled by an operator, or a
			// bug): never run it. Roll back; the job stays queued for a
			// human to look at, and the worker gets nothing.
			return fmt.Errorf("store: job %s has no approved action: %w", l.ActionID, err)
		}
		l.Args = a.Args
		l.AgentID = a.AgentID
		l.ExpiresAt = l.ExpiresAt.UTC()
		lease = &l
		return insertEvents(ctx, tx, actionEvent(a, audit.KindActionRunning, "worker:"+worker,
			map[string]any{"attempt": l.Attempt, "fence": l.Fence, "lease_expires_at": l.ExpiresAt}))
	})
	return lease, err
}

// actionEvent builds an audit event about a from the store side (for
// transitions the store makes on its own, like leases and their expiry).
func actionEvent(a *hitl.Action, kind audit.Kind, actor string, data map[string]any) audit.Event {
	riskJSON, _ := json.Marshal(a.Risk)
	decisionJSON, _ := json.Marshal(a.Decision)
	return audit.Event{Kind: kind, Actor: actor, AgentID: a.AgentID, AgentInstance: a.AgentInstance,
		ConversationID: a.ConversationID, StepID: a.StepID, CorrelationID: a.CorrelationID, ActionID: a.ID,
		Tool: a.Tool, Args: a.Args, Risk: riskJSON, Decision: decisionJSON, Data: data}
}

// errLeaseLost is returned when a heartbeat or completion presents a lease
// that is no longer current.
func errLeaseLost(id string) error {
	return apperr.Conflict("the lease on job %s is no longer held by this worker (expired, re-leased or completed)", id)
}

// HeartbeatJob implements hitl.Store: it extends a current lease.
func (s *Store) HeartbeatJob(ctx context.Context, id string, fence int64, worker string, ttl time.Duration) (time.Time, error) {
	if !isUUID(id) {
		return time.Time{}, apperr.NotFound("no job %q", id)
	}
	var until time.Time
	err := s.pool.QueryRow(ctx, `
		UPDATE jobs SET lease_expires_at = now() + $4 * interval '1 millisecond', updated_at = now()
		WHERE action_id = $1 AND fence = $2 AND worker = $3 AND state = 'leased' AND lease_expires_at > now()
		RETURNING lease_expires_at`, id, fence, worker, ttl.Milliseconds()).Scan(&until)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, errLeaseLost(id)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("store: heartbeat: %w", err)
	}
	return until.UTC(), nil
}

// CompleteJob implements hitl.Store: with the current fence, it marks the
// job done and moves the action running → succeeded|failed with its result
// and audit event, in one transaction. A second completion, or one with a
// stale fence, changes nothing.
func (s *Store) CompleteJob(ctx context.Context, id string, fence int64, worker string, to hitl.Status, result json.RawMessage) (*hitl.Action, error) {
	if !isUUID(id) {
		return nil, apperr.NotFound("no job %q", id)
	}
	var out *hitl.Action
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE jobs SET state = 'done', updated_at = now()
			WHERE action_id = $1 AND fence = $2 AND worker = $3 AND state = 'leased'`, id, fence, worker)
		if err != nil {
			return fmt.Errorf("store: completing job: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return errLeaseLost(id)
		}
		a, err := scanAction(tx.QueryRow(ctx, `
			UPDATE actions SET status = $2, result = $3, version = version + 1, updated_at = now()
			WHERE id = $1 AND status = 'running'
			RETURNING `+actionColumns, id, to, []byte(result)))
		if err != nil {
			return fmt.Errorf("store: completing action %s: %w", id, err)
		}
		var res map[string]any
		_ = json.Unmarshal(result, &res)
		out = a
		return insertEvents(ctx, tx, actionEvent(a, audit.KindActionResult, "worker:"+worker,
			map[string]any{"outcome": to, "fence": fence, "result": res}))
	})
	return out, err
}

// ExpireLeases implements hitl.Store: every leased job whose lease ran out
// is either queued again (retryable, attempts left: the action goes back to
// approved) or done with its action failed as interrupted. Each, with its
// audit event, in one transaction; SKIP LOCKED keeps instances apart.
func (s *Store) ExpireLeases(ctx context.Context, limit int) ([]*hitl.Action, error) {
	var out []*hitl.Action
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT action_id, attempts, max_attempts, fence, coalesce(worker, '') FROM jobs
			WHERE state = 'leased' AND lease_expires_at <= now()
			ORDER BY lease_expires_at LIMIT $1 FOR UPDATE SKIP LOCKED`, limit)
		if err != nil {
			return fmt.Errorf("store: expired leases: %w", err)
		}
		type expired struct {
			id                string
			attempts, maxAtts int
			fence             int64
			worker            string
		}
		list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (expired, error) {
			var e expired
			return e, r.Scan(&e.id, &e.attempts, &e.maxAtts, &e.fence, &e.worker)
		})
		if err != nil {
			return fmt.Errorf("store: expired leases: %w", err)
		}
		for _, e := range list {
			data := map[string]any{"attempt": e.attempts, "max_attempts": e.maxAtts, "fence": e.fence, "worker": e.worker}
			var a *hitl.Action
			if e.attempts < e.maxAtts {
				if _, err := tx.Exec(ctx, `UPDATE jobs SET state = 'queued', worker = NULL, lease_expires_at = NULL, updated_at = now()
					WHERE action_id = $1`, e.id); err != nil {
					return fmt.Errorf("store: requeueing job: %w", err)
				}
				a, err = scanAction(tx.QueryRow(ctx, `UPDATE actions SET status = 'approved', version = version + 1, updated_at = now()
					WHERE id = $1 AND status = 'running' RETURNING `+actionColumns, e.id))
				if err != nil {
					return fmt.Errorf("store: requeueing action %s: %w", e.id, err)
				}
				if err := insertEvents(ctx, tx, actionEvent(a, audit.KindActionRequeued, "system", data)); err != nil {
					return err
				}
			} else {
				if _, err := tx.Exec(ctx, `UPDATE jobs SET state = 'done', updated_at = now() WHERE action_id = $1`, e.id); err != nil {
					return fmt.Errorf("store: ending job: %w", err)
				}
				result := []byte(`{"error":"interrupted","exit_code":-1}`)
				a, err = scanAction(tx.QueryRow(ctx, `UPDATE actions SET status = 'failed', result = $2, version = version + 1, updated_at = now()
					WHERE id = $1 AND status = 'running' RETURNING `+actionColumns, e.id, result))
				if err != nil {
					return fmt.Errorf("store: failing action %s: %w", e.id, err)
				}
				data["reason"] = "interrupted"
				if err := insertEvents(ctx, tx, actionEvent(a, audit.KindActionInterrupted, "system", data)); err != nil {
					return err
				}
			}
			out = append(out, a)
		}
		return nil
	})
	return out, err
}
