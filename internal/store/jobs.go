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
	"github.com/airlockhq/airlock/internal/risk"
)

// insertJob queues j in tx.
func insertJob(ctx context.Context, tx pgx.Tx, j *hitl.Job) error {
	_, err := tx.Exec(ctx, `INSERT INTO jobs (id, action_id, kind, target, max_attempts, pin) VALUES ($1, $2, $3, $4, $5, $6)`,
		j.ID, j.ActionID, j.Kind, j.Target, j.MaxAttempts, j.Pin)
	if err != nil {
		return fmt.Errorf("store: queueing job: %w", err)
	}
	return nil
}

// planModeJobKinds are the jobs leased even in plan mode: those of the
// built-in that only reads (hitl.IsRead). A pending merge's preview waits
// too (it commits the worktree's changes), as its approval would.
var planModeJobKinds = []string{hitl.ToolWorktreeDiff}

// LeaseJob implements hitl.Store: it claims the oldest queued job whose
// kind and target this worker asks for and its token was issued for
// (tokens.targets: read here, so a revocation or a narrower token holds at
// once on every instance), whose agent is not suspended and whose action's
// token was not revoked, and, while plan mode is on for its agent or the
// fleet, only reads (planModeJobKinds: an approved exec waits for plan
// mode to end) (SKIP LOCKED: workers never wait on each other, and the
// job's action is locked with it, so that a lease never waits for an
// action while holding its job: the lock order, store.go),
// moves its action approved → running (hitl.MoveLease) and audits it, in
// one transaction. It returns nil when there is no such job.
func (s *Store) LeaseJob(ctx context.Context, w hitl.Worker, ttl time.Duration) (*hitl.Lease, error) {
	var lease *hitl.Lease
	var l hitl.Lease     // l.ID is empty while no job is leased
	var ran *hitl.Action // the action leaseRunSQL moved: a run's (nil for a preview's)
	err := s.inPipedTx(ctx, []pipedQuery{{sql: leaseJobSQL, args: []any{w.Name, w.Kinds, w.Targets, ttl.Milliseconds(), w.TokenID, planModeJobKinds},
		scan: func(row pgx.Row) error {
			var tokenOK bool
			var id, actionID, kind, target, pin *string
			var fence *int64
			var attempt *int
			var expires *time.Time
			var marked string // leasedJobSetting, for leaseRunSQL
			if err := row.Scan(&tokenOK, &id, &actionID, &fence, &kind, &target, &attempt, &expires, &pin, &marked); err != nil {
				return fmt.Errorf("store: leasing job: %w", err)
			}
			if !tokenOK {
				return errTokenInactive
			}
			if id == nil {
				return nil // no job
			}
			l = hitl.Lease{ID: *id, ActionID: *actionID, Fence: *fence, Kind: *kind, Target: *target, Attempt: *attempt,
				ExpiresAt: *expires, Pin: *pin}
			return nil
		}}, {sql: leaseRunSQL, args: []any{hitl.PreviewJobKinds(), hitl.MoveLease.To, hitl.MoveLease.FromStrings()},
		scan: func(row pgx.Row) error {
			a, err := scanAction(row)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil // no job, a preview's job, or an action no longer approved: see below
			}
			if err != nil {
				return fmt.Errorf("store: leasing job: %w", err)
			}
			ran = a
			return nil
		}}},
		func(tx execer) ([]audit.Event, error) {
			if l.ID == "" {
				return nil, nil
			}
			// A preview job works for a pending merge and changes no status;
			// every other job runs an approved action, which is now running
			// (leaseRunSQL moved it).
			kind, a := audit.KindActionRunning, ran
			if hitl.IsPreviewJob(l.Kind) {
				kind = audit.KindActionPreviewing
				var err error
				a, err = scanAction(tx.QueryRow(ctx, `SELECT `+actionColumns+` FROM actions WHERE id = $1 AND status = 'pending'`, l.ActionID))
				if err != nil && !errors.Is(err, pgx.ErrNoRows) {
					return nil, fmt.Errorf("store: job %s: %w", l.ID, err)
				}
			}
			switch {
			case a == nil:
				// The action is no longer in the state the job needs (a preview
				// for a merge decided meanwhile): retire the job, run nothing.
				return nil, retireJob(ctx, tx, l.ID)
			case a.ID != l.ActionID:
				return nil, fmt.Errorf("store: job %s: moved action %s, not its own %s", l.ID, a.ID, l.ActionID)
			}
			l.Args = a.Args
			l.AgentID = a.AgentID
			l.Tool = a.Tool
			l.ExpiresAt = l.ExpiresAt.UTC()
			lease = &l
			return []audit.Event{a.AuditEvent(kind, "worker:"+w.Name,
				map[string]any{"job": l.ID, "kind": l.Kind, "attempt": l.Attempt, "fence": l.Fence, "lease_expires_at": l.ExpiresAt})}, nil
		})
	if err != nil {
		return nil, err
	}
	return lease, nil
}

// leaseJobSQL claims the job LeaseJob leases (see there). It answers one
// row whether or not there is a job: whether the worker's token is active
// (the route leaves that check to this statement, see
// httpapi.authenticateWorkerJob), and the job, if any.
const leaseJobSQL = `
	WITH tok AS (
		SELECT targets FROM tokens WHERE id = $5 AND kind = 'worker' AND revoked_at IS NULL AND expires_at > now()
	), j AS (
		SELECT jobs.id FROM jobs
		JOIN actions a ON a.id = jobs.action_id
		JOIN agents ag ON ag.id = a.agent_id
		WHERE jobs.state = 'queued' AND jobs.kind = ANY($2) AND jobs.target = ANY($3)
			AND jobs.target = ANY(coalesce((SELECT targets FROM tok), '{}'))
			AND ag.suspended_at IS NULL
			AND (jobs.kind = ANY($6) OR NOT EXISTS (SELECT FROM plan_modes WHERE scope IN ('fleet', 'agent:' || a.agent_id)))
			AND (a.token_id IS NULL OR NOT EXISTS (SELECT FROM tokens t WHERE t.id = a.token_id AND t.revoked_at IS NOT NULL))
		ORDER BY jobs.created_at
		LIMIT 1
		FOR NO KEY UPDATE OF jobs, a SKIP LOCKED
	), l AS (
		UPDATE jobs SET state = 'leased', fence = fence + 1, attempts = attempts + 1, worker = $1, token_id = $5,
			lease_expires_at = now() + $4 * interval '1 millisecond', updated_at = now()
		FROM j WHERE jobs.id = j.id
		RETURNING jobs.id, jobs.action_id, jobs.fence, jobs.kind, jobs.target, jobs.attempts, jobs.lease_expires_at, jobs.pin
	)
	SELECT EXISTS (SELECT FROM tok), l.id, l.action_id, l.fence, l.kind, l.target, l.attempts, l.lease_expires_at, l.pin,
		set_config('` + leasedJobSetting + `', coalesce(l.id::text, ''), true)
	FROM (SELECT) AS one LEFT JOIN l ON true`

// leasedJobSetting is the transaction-local setting in which leaseJobSQL
// names the job it leased (empty for none), so that leaseRunSQL, in the
// same round trip, acts on that job only.
const leasedJobSetting = "airlock.leased_job"

// leaseRunSQL moves the action of the run leaseJobSQL, just before it in
// the same transaction, leased: a job of a kind that is not a preview's
// ($1) moves its action to $2 if its status is one of $3. It answers the
// action, or no row (no job, a preview's job, an action no longer
// approved); LeaseJob tells these apart.
const leaseRunSQL = `
	UPDATE actions SET status = $2, version = version + 1, updated_at = now()
	WHERE id = (SELECT action_id FROM jobs
			WHERE id = nullif(current_setting('` + leasedJobSetting + `', true), '')::uuid AND kind <> ALL($1))
		AND status = ANY($3)
	RETURNING ` + actionColumns

// errTokenInactive answers a call whose token the statement acting on it
// found revoked or expired (its route checked the signature only).
var errTokenInactive = apperr.Unauthorized("token revoked or expired")

// errLeaseLost is returned when a heartbeat or completion presents a lease
// that is no longer current.
func errLeaseLost(id string) error {
	return apperr.Conflict("the lease on job %s is no longer held by this worker (expired, re-leased or completed)", id)
}

// completeRunSQL moves the action of a run that CompleteJob's first
// statement, just before it in the same transaction, completed: job $1,
// done under fence $2 by worker $3 with token $4, of a kind that is not a
// preview's ($5), moves to $6 with result $7 if its status is one of $8.
// It answers the action, or no row (a preview's job, a lease not held, an
// action no longer running); CompleteJob tells these apart.
const completeRunSQL = `
	UPDATE actions SET status = $6, result = $7, version = version + 1, updated_at = now()
	WHERE id = (SELECT action_id FROM jobs
			WHERE id = $1 AND fence = $2 AND worker = $3 AND token_id = $4 AND state = 'done' AND kind <> ALL($5))
		AND status = ANY($8)
	RETURNING ` + actionColumns

// HeartbeatJob implements hitl.Store: it extends a current lease held by
// w's token. A lease whose action was stopped meanwhile answers Stop with
// the reason, so its worker kills the run.
func (s *Store) HeartbeatJob(ctx context.Context, id string, fence int64, w hitl.Worker, ttl time.Duration) (hitl.HeartbeatAnswer, error) {
	if !isUUID(id) {
		return hitl.HeartbeatAnswer{}, apperr.NotFound("no job %q", id)
	}
	var until *time.Time
	var stop *string
	err := s.pool.QueryRow(ctx, `
		WITH hb AS (
			UPDATE jobs SET lease_expires_at = now() + $4 * interval '1 millisecond', updated_at = now()
			WHERE id = $1 AND fence = $2 AND worker = $3 AND token_id = $5 AND state = 'leased' AND lease_expires_at > now()
			RETURNING lease_expires_at
		)
		SELECT (SELECT lease_expires_at FROM hb),
			(SELECT stop_reason FROM jobs WHERE id = $1 AND fence = $2 AND worker = $3 AND token_id = $5 AND state = 'done')`,
		id, fence, w.Name, ttl.Milliseconds(), w.TokenID).Scan(&until, &stop)
	if err != nil {
		return hitl.HeartbeatAnswer{}, fmt.Errorf("store: heartbeat: %w", err)
	}
	switch {
	case stop != nil:
		return hitl.HeartbeatAnswer{Stop: true, Reason: *stop}, nil
	case until == nil:
		return hitl.HeartbeatAnswer{}, errLeaseLost(id)
	}
	return hitl.HeartbeatAnswer{Until: until.UTC()}, nil
}

// CompleteJob implements hitl.Store: with the current fence and the token
// that leased it, it marks the job done and records its outcome with the
// audit event, in one transaction: a run makes its action's move m
// (running → succeeded|failed) with the result; a preview leaves its
// merge pending with the preview; a worktree.create that succeeded
// records the worktree as its agent's. A second completion, one with a
// stale fence, by another token, or of a stopped job, changes nothing; a
// preview whose action was decided meanwhile ends its job and is refused
// (409) without being recorded. The job's action is locked before the job
// (la), as a stop locks them (the lock order, store.go).
func (s *Store) CompleteJob(ctx context.Context, id string, fence int64, w hitl.Worker, m hitl.Move, result, preview json.RawMessage) (*hitl.Action, error) {
	if !isUUID(id) {
		return nil, apperr.NotFound("no job %q", id)
	}
	var out *hitl.Action
	decided := false
	var actionID, kind, target string
	var ran *hitl.Action // the action completeRunSQL moved: a run's (nil for a preview's)
	// One row whether or not the lease holds: whether the worker's token
	// is active (the route leaves that to this statement, see
	// httpapi.authenticateWorkerJob), and the job it completed, if any.
	// A run's action moves in the same round trip (completeRunSQL).
	err := s.inPipedTx(ctx, []pipedQuery{{sql: `
		WITH tok AS (
			SELECT FROM tokens WHERE id = $4 AND kind = 'worker' AND revoked_at IS NULL AND expires_at > now()
		), la AS (
			SELECT FROM actions WHERE id = (SELECT action_id FROM jobs WHERE id = $1) FOR NO KEY UPDATE
		), d AS (
			UPDATE jobs SET state = 'done', updated_at = now()
			WHERE id = $1 AND fence = $2 AND worker = $3 AND token_id = $4 AND state = 'leased' AND EXISTS (SELECT FROM tok)
				AND EXISTS (SELECT FROM la)
			RETURNING action_id, kind, target
		)
		SELECT EXISTS (SELECT FROM tok), d.action_id, d.kind, d.target FROM (SELECT) AS one LEFT JOIN d ON true`,
		args: []any{id, fence, w.Name, w.TokenID},
		scan: func(row pgx.Row) error {
			var tokenOK bool
			var a, k, t *string
			if err := row.Scan(&tokenOK, &a, &k, &t); err != nil {
				return fmt.Errorf("store: completing job: %w", err)
			}
			switch {
			case !tokenOK:
				return errTokenInactive
			case a == nil:
				return errLeaseLost(id)
			}
			actionID, kind, target = *a, *k, *t
			return nil
		}}, {sql: completeRunSQL,
		args: []any{id, fence, w.Name, w.TokenID, hitl.PreviewJobKinds(), m.To, []byte(result), m.FromStrings()},
		scan: func(row pgx.Row) error {
			a, err := scanAction(row)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil // a preview's job, or an action no longer running: see below
			}
			if err != nil {
				return fmt.Errorf("store: completing job %s: %w", id, err)
			}
			ran = a
			return nil
		}}},
		func(tx execer) ([]audit.Event, error) {
			var res map[string]any
			_ = json.Unmarshal(result, &res)
			data := map[string]any{"job": id, "kind": kind, "outcome": m.To, "fence": fence, "result": res}
			evKind, a, isPreview := audit.KindActionResult, ran, hitl.IsPreviewJob(kind)
			switch {
			case !isPreview && a == nil: // no longer running
				return nil, fmt.Errorf("store: completing action %s: %w", actionID, pgx.ErrNoRows)
			case !isPreview && a.ID != actionID:
				return nil, fmt.Errorf("store: completing job %s: moved action %s, not its own %s", id, a.ID, actionID)
			case isPreview:
				evKind = audit.KindActionPreview
				delete(data, "outcome")
				var err error
				a, err = scanAction(tx.QueryRow(ctx, `UPDATE actions SET preview = $2, version = version + 1, updated_at = now()
				WHERE id = $1 AND status = 'pending' RETURNING `+actionColumns, actionID, []byte(preview)))
				if errors.Is(err, pgx.ErrNoRows) {
					// Decided while its preview was prepared: the job is done and
					// the preview dropped (committed: the worker stops on 409).
					decided = true
					return nil, nil
				}
				if err != nil {
					return nil, fmt.Errorf("store: completing action %s: %w", actionID, err)
				}
				if r, raised := a.PreviewRisk(); raised {
					if a, err = setRisk(ctx, tx, a.ID, r); err != nil {
						return nil, err
					}
				}
			}
			out = a
			if kind == hitl.ToolWorktreeCreate && a.Status == hitl.StatusSucceeded {
				if err := recordWorktree(ctx, tx, a, target, res); err != nil {
					return nil, err
				}
			}
			return []audit.Event{a.AuditEvent(evKind, "worker:"+w.Name, data)}, nil
		})
	if err == nil && decided {
		return nil, apperr.Conflict("the action of job %s was decided while its preview was prepared; the preview is dropped", id)
	}
	return out, err
}

// setRisk records an action's raised risk (a merge's, once its preview
// shows what the diff holds).
func setRisk(ctx context.Context, tx execer, id string, r risk.Assessment) (*hitl.Action, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("store: encoding risk: %w", err)
	}
	a, err := scanAction(tx.QueryRow(ctx, `UPDATE actions SET risk = $2 WHERE id = $1 RETURNING `+actionColumns, id, raw))
	if err != nil {
		return nil, fmt.Errorf("store: raising the risk of action %s: %w", id, err)
	}
	return a, nil
}

// recordWorktree makes the worktree a worktree.create reported its
// agent's. A name outside the job's repository, or one another action
// already holds, is not recorded: nobody can name it (fail closed).
func recordWorktree(ctx context.Context, tx execer, a *hitl.Action, target string, res map[string]any) error {
	name, _ := res["worktree"].(string)
	repo, ok := hitl.WorktreeRepo(name)
	if !ok || "repo:"+repo != target {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO worktrees (name, agent_id, action_id) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING`,
		name, a.AgentID, a.ID)
	if err != nil {
		return fmt.Errorf("store: recording worktree %s: %w", name, err)
	}
	return nil
}

// retireJob ends a job whose action no longer needs it (nothing runs).
func retireJob(ctx context.Context, tx execer, id string) error {
	if _, err := tx.Exec(ctx, `UPDATE jobs SET state = 'done', updated_at = now() WHERE id = $1`, id); err != nil {
		return fmt.Errorf("store: retiring job %s: %w", id, err)
	}
	return nil
}

// stopJobs retires every job of an action that has not finished: a queued
// one is never leased, a leased one's worker is told to stop (why) on its
// next heartbeat and can no longer complete it.
func stopJobs(ctx context.Context, tx pgx.Tx, actionID, why string) error {
	_, err := tx.Exec(ctx, `UPDATE jobs SET state = 'done', stop_reason = $2, updated_at = now()
		WHERE action_id = $1 AND state <> 'done'`, actionID, why)
	if err != nil {
		return fmt.Errorf("store: stopping jobs of %s: %w", actionID, err)
	}
	return nil
}

// ExpireLeases implements hitl.Store: every leased job whose lease ran out
// is either queued again (retryable, attempts left: the action goes back to
// approved) or done with its action failed as interrupted. A job whose
// action is no longer running (it cannot be: a stop retires its jobs) is
// retired, so one such row never blocks the sweep. Each, with its
// audit event, in one transaction; SKIP LOCKED keeps instances apart, and
// skips a job whose action is locked (a stop holding it waits for the job
// next: the lock order, store.go).
func (s *Store) ExpireLeases(ctx context.Context, limit int) ([]*hitl.Action, error) {
	var out []*hitl.Action
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT j.id, j.action_id, j.kind, j.attempts, j.max_attempts, j.fence, coalesce(j.worker, '')
			FROM jobs j JOIN actions a ON a.id = j.action_id
			WHERE j.state = 'leased' AND j.lease_expires_at <= now()
			ORDER BY j.lease_expires_at LIMIT $1 FOR NO KEY UPDATE OF j, a SKIP LOCKED`, limit)
		if err != nil {
			return fmt.Errorf("store: expired leases: %w", err)
		}
		type expired struct {
			id, actionID, kind string
			attempts, maxAtts  int
			fence              int64
			worker             string
		}
		list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (expired, error) {
			var e expired
			return e, r.Scan(&e.id, &e.actionID, &e.kind, &e.attempts, &e.maxAtts, &e.fence, &e.worker)
		})
		if err != nil {
			return fmt.Errorf("store: expired leases: %w", err)
		}
		for _, e := range list {
			data := map[string]any{"job": e.id, "kind": e.kind, "attempt": e.attempts, "max_attempts": e.maxAtts, "fence": e.fence, "worker": e.worker}
			var a *hitl.Action
			if hitl.IsPreviewJob(e.kind) {
				a, err = s.expirePreview(ctx, tx, e.id, e.actionID, e.attempts < e.maxAtts, data)
				if err != nil {
					return err
				}
				if a != nil {
					out = append(out, a)
				}
				continue
			}
			if e.attempts < e.maxAtts {
				if _, err := tx.Exec(ctx, `UPDATE jobs SET state = 'queued', worker = NULL, lease_expires_at = NULL, updated_at = now()
					WHERE id = $1`, e.id); err != nil {
					return fmt.Errorf("store: requeueing job: %w", err)
				}
				a, err = scanAction(tx.QueryRow(ctx, `UPDATE actions SET status = $2, version = version + 1, updated_at = now()
					WHERE id = $1 AND status = ANY($3) RETURNING `+actionColumns, e.actionID, hitl.MoveRequeue.To, hitl.MoveRequeue.FromStrings()))
				if errors.Is(err, pgx.ErrNoRows) {
					if err := retireJob(ctx, tx, e.id); err != nil {
						return err
					}
					continue
				}
				if err != nil {
					return fmt.Errorf("store: requeueing action %s: %w", e.actionID, err)
				}
				if err := insertEvents(ctx, tx, a.AuditEvent(audit.KindActionRequeued, "system", data)); err != nil {
					return err
				}
			} else {
				if _, err := tx.Exec(ctx, `UPDATE jobs SET state = 'done', updated_at = now() WHERE id = $1`, e.id); err != nil {
					return fmt.Errorf("store: ending job: %w", err)
				}
				result := []byte(`{"error":"interrupted","exit_code":-1}`)
				a, err = scanAction(tx.QueryRow(ctx, `UPDATE actions SET status = $3, result = $2, version = version + 1, updated_at = now()
					WHERE id = $1 AND status = ANY($4) RETURNING `+actionColumns, e.actionID, result, hitl.MoveInterrupt.To, hitl.MoveInterrupt.FromStrings()))
				if errors.Is(err, pgx.ErrNoRows) {
					continue // the job is done already; its action is no longer running
				}
				if err != nil {
					return fmt.Errorf("store: failing action %s: %w", e.actionID, err)
				}
				data["reason"] = "interrupted"
				if err := insertEvents(ctx, tx, a.AuditEvent(audit.KindActionInterrupted, "system", data)); err != nil {
					return err
				}
			}
			out = append(out, a)
		}
		return nil
	})
	return out, err
}

// expirePreview requeues a preview job whose lease ran out, or, with no
// attempts left, records the failed preview on the still-pending merge
// (which can then only be denied).
func (s *Store) expirePreview(ctx context.Context, tx pgx.Tx, jobID, actionID string, retry bool, data map[string]any) (*hitl.Action, error) {
	if retry {
		_, err := tx.Exec(ctx, `UPDATE jobs SET state = 'queued', worker = NULL, lease_expires_at = NULL, updated_at = now()
			WHERE id = $1`, jobID)
		if err != nil {
			return nil, fmt.Errorf("store: requeueing preview: %w", err)
		}
		return nil, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE jobs SET state = 'done', updated_at = now() WHERE id = $1`, jobID); err != nil {
		return nil, fmt.Errorf("store: ending preview job: %w", err)
	}
	a, err := scanAction(tx.QueryRow(ctx, `UPDATE actions SET preview = '{"status":"failed","error":"interrupted"}', version = version + 1, updated_at = now()
		WHERE id = $1 AND status = 'pending' RETURNING `+actionColumns, actionID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil // decided meanwhile (denied, expired, cancelled)
	}
	if err != nil {
		return nil, fmt.Errorf("store: failing preview of %s: %w", actionID, err)
	}
	data["reason"] = "interrupted"
	return a, insertEvents(ctx, tx, a.AuditEvent(audit.KindActionPreview, "system", data))
}
