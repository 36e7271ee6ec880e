package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/airlockhq/airlock/internal/audit"
)

// execer is what a statement inside a transaction runs on: a pgx.Tx, or
// the connection of an inPipedTx.
type execer interface {
	querier
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// pipedQuery is a statement of an inPipedTx's first round trip, its row
// read by scan. What a row scan reports is scan's business: scan may take
// pgx.ErrNoRows as an answer (return nil) or as the error to end with.
type pipedQuery struct {
	sql  string
	args []any
	scan func(pgx.Row) error
}

// inPipedTx is inTx in two round trips fewer, for the short transactions
// a worker waits on (lease, complete): BEGIN travels with the first
// statements (first, run in order, each seeing what the ones before it
// wrote), and COMMIT with the audit events rest returns. In between, rest
// runs what else the transaction needs on the transaction's connection.
// If a scan (the first that fails, in first's order) or rest fails, or any
// statement does, nothing is committed: the transaction is rolled back
// (or, should that fail too, its connection closed).
func (s *Store) inPipedTx(ctx context.Context, first []pipedQuery, rest func(c execer) ([]audit.Event, error)) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	defer func() {
		if c.Conn().PgConn().TxStatus() != 'I' {
			// A connection still in the transaction is closed by Release.
			_, _ = c.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
		c.Release()
	}()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	scanErrs := make([]error, len(first))
	for i, q := range first {
		b.Queue(q.sql, q.args...).QueryRow(func(row pgx.Row) error {
			scanErrs[i] = q.scan(row)
			return nil
		})
	}
	if err := c.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	for _, err := range scanErrs {
		if err != nil {
			return err
		}
	}
	events, err := rest(c)
	if err != nil {
		return err
	}
	b = &pgx.Batch{}
	if err := queueEvents(b, events...); err != nil {
		return err
	}
	// A statement whose error rest did not pass on aborted the
	// transaction; COMMIT then answers ROLLBACK, without an error.
	b.Queue("COMMIT").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() != "COMMIT" {
			return fmt.Errorf("store: commit: the transaction was rolled back (%s)", tag)
		}
		return nil
	})
	if err := c.SendBatch(ctx, b).Close(); err != nil {
		if len(events) > 0 {
			return fmt.Errorf("store: writing audit events and committing: %w", err)
		}
		return err
	}
	return nil
}
