package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/notify"
)

const targetColumns = `name, kind, url, secret, recipients, allow_private, created_by, created_at`

func scanTarget(row pgx.Row) (notify.Target, error) {
	var t notify.Target
	err := row.Scan(&t.Name, &t.Kind, &t.URL, &t.Secret, &t.To, &t.AllowPrivate, &t.CreatedBy, &t.CreatedAt)
	t.CreatedAt = t.CreatedAt.UTC()
	if len(t.To) == 0 {
		t.To = nil
	}
	if len(t.AllowPrivate) == 0 {
		t.AllowPrivate = nil
	}
	return t, err
}

func textArray(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// CreateTarget implements notify.Store; view (the secret redacted) goes
// into the audit event.
func (s *Store) CreateTarget(ctx context.Context, actor string, t notify.Target, view notify.Target) (notify.Target, error) {
	var out notify.Target
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = scanTarget(tx.QueryRow(ctx, `INSERT INTO notify_targets (name, kind, url, secret, recipients, allow_private, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING `+targetColumns,
			t.Name, t.Kind, t.URL, t.Secret, textArray(t.To), textArray(t.AllowPrivate), actor))
		if errors.Is(err, pgx.ErrNoRows) {
			return apperr.Conflict("notification target %q already exists", t.Name)
		}
		if err != nil {
			return fmt.Errorf("store: creating notification target: %w", err)
		}
		return insertEvents(ctx, tx, audit.Event{Kind: audit.KindNotifyTargetCreated, Actor: actor, Data: map[string]any{
			"name": view.Name, "kind": view.Kind, "url": view.URL, "secret": view.Secret, "to": view.To, "allow_private": view.AllowPrivate}})
	})
	return out, err
}

// Targets implements notify.Store and notify.Outbox.
func (s *Store) Targets(ctx context.Context) ([]notify.Target, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+targetColumns+` FROM notify_targets ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: listing notification targets: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (notify.Target, error) { return scanTarget(r) })
	if err != nil {
		return nil, fmt.Errorf("store: listing notification targets: %w", err)
	}
	return out, nil
}

// DeleteTarget implements notify.Store.
func (s *Store) DeleteTarget(ctx context.Context, actor, name string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM notify_targets WHERE name = $1`, name)
		if err != nil {
			return fmt.Errorf("store: deleting notification target: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return apperr.NotFound("no notification target %q", name)
		}
		return insertEvents(ctx, tx, audit.Event{Kind: audit.KindNotifyTargetDeleted, Actor: actor, Data: map[string]any{"name": name}})
	})
}

// missingNames returns which of names no row of table (notify_targets or
// reviewer_groups) has.
func missingNames(ctx context.Context, tx pgx.Tx, table string, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `SELECT n FROM unnest($1::text[]) n WHERE NOT EXISTS (SELECT FROM `+table+` t WHERE t.name = n) ORDER BY n`, names)
	if err != nil {
		return nil, fmt.Errorf("store: checking names: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: checking names: %w", err)
	}
	return out, nil
}

// ClaimDeliveries implements notify.Outbox.
func (s *Store) ClaimDeliveries(ctx context.Context, limit int, lease time.Duration) ([]notify.Claim, error) {
	rows, err := s.pool.Query(ctx, `
WITH c AS (
	SELECT id FROM notify_outbox WHERE status = 'queued' AND next_at <= now()
	ORDER BY next_at LIMIT $1 FOR UPDATE SKIP LOCKED
)
UPDATE notify_outbox o SET next_at = now() + $2 * interval '1 millisecond', attempts = o.attempts + 1
FROM c WHERE o.id = c.id
RETURNING o.id, o.action_id::text, o.target, o.event, o.step, o.attempts`, limit, lease.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("store: claiming notifications: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (notify.Claim, error) {
		var c notify.Claim
		err := r.Scan(&c.ID, &c.ActionID, &c.Target, &c.Event, &c.Step, &c.Attempt)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: claiming notifications: %w", err)
	}
	return out, nil
}

// RecordAttempt implements notify.Outbox. The claim's attempt number is
// the compare-and-set: a claim that expired and was taken again records
// nothing over the newer one.
func (s *Store) RecordAttempt(ctx context.Context, c notify.Claim, o notify.Outcome) error {
	status := "queued"
	switch {
	case o.OK:
		status = "delivered"
	case o.Final:
		status = "failed"
	}
	var next *time.Time
	if !o.Final {
		next = &o.NextAt
	}
	_, err := s.pool.Exec(ctx, `
WITH u AS (
	UPDATE notify_outbox SET status = $2, next_at = coalesce($3, next_at), last_error = $4,
		delivered_at = CASE WHEN $5 THEN now() END
	WHERE id = $1 AND attempts = $6 AND status = 'queued'
	RETURNING id
)
INSERT INTO notify_attempts (outbox_id, n, ok, status_code, error)
SELECT id, $6, $5, $7, $4 FROM u`, c.ID, status, next, o.Error, o.OK, c.Attempt, o.StatusCode)
	if err != nil {
		return fmt.Errorf("store: recording notification attempt: %w", err)
	}
	return nil
}

// ReleaseClaim implements notify.Outbox.
func (s *Store) ReleaseClaim(ctx context.Context, c notify.Claim) error {
	_, err := s.pool.Exec(ctx, `UPDATE notify_outbox SET next_at = now(), attempts = attempts - 1
		WHERE id = $1 AND attempts = $2 AND status = 'queued'`, c.ID, c.Attempt)
	if err != nil {
		return fmt.Errorf("store: releasing notification claim: %w", err)
	}
	return nil
}
