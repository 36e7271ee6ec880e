// Package store is Airlock's Postgres adapter: all SQL lives here, one file
// per domain. Every state change runs in one transaction together with the
// audit event that records it; pgx errors are translated into domain errors
// at this boundary.
//
// Lock order. A transaction that takes more than one of these row locks
// takes them in this order, so that no two wait on each other in a cycle
// (PostgreSQL would abort one with deadlock_detected):
//
//  1. agents: a pending or budgeted submit (FOR NO KEY UPDATE; a pending
//     one reads the suspension there), a suspension or resume, the fleet
//     stop, an agent token's revocation; several in id order (COLLATE "C",
//     the group commit's order of a batch, whose statements run in one
//     transaction);
//  2. tokens: a pending submit (FOR SHARE: it reads the revocation
//     there), a revocation, a suspension marking the agent's tokens (a
//     batch's later statement may lock a token after an earlier one locked
//     the agent's pending count: whoever waits for a token of an agent
//     holds that agent's row, so no batch holds anything it waits for);
//  3. actions: a transition (approve, deny, expire, cancel, stop);
//  4. agent_pending: the pending count, locked by a pending submit and by
//     airlock_admit (budgets and rates) after the agent's row, by an
//     approval under a budget (approvalFits), and by the trigger on every
//     way out of pending, which fires at the end of the statement that
//     moved the action; a statement that moves the actions of several
//     agents (the expiry sweep) locks their counts in id order first.
//
// A grant's row is locked alone (a revocation by id) or under its
// action's: an approval writes the grant it makes, a stop revokes it.
//
// A job's row is locked only under its action's: a stop or an expiry moves
// the action and then retires its jobs, and the worker's calls (lease,
// completion, the lease sweep) lock the action first or skip the job while
// its action is locked. (A heartbeat's statement holds nothing else.)
//
// A submit inserts its action (no existing row of actions locked).
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/airlockhq/airlock/internal/apperr"
)

// Store is the Postgres implementation of every Airlock repository.
type Store struct {
	pool *pgxpool.Pool
	log  *slog.Logger

	// compiled caches policies by scope and version: a version never
	// changes, so each is compiled once.
	compiled sync.Map // policyKey -> *policy.Compiled
	// agents caches each agent and the policy versions that applied when
	// it was last read. It may be stale: InsertAction re-checks the
	// versions in the statement that writes the action (hitl.Guard).
	agents sync.Map // agent ID -> agentEntry
	// submits batches concurrent InsertActions into shared commits.
	submits *groupCommit
}

type policyKey struct {
	scope   string
	version int
}

// New returns a Store over pool.
func New(pool *pgxpool.Pool, log *slog.Logger) *Store {
	if log == nil {
		log = slog.Default()
	}
	return &Store{pool: pool, log: log, submits: newGroupCommit(pool, submitBatch, submitBatchesInFlight)}
}

// Submits are written in batches of up to submitBatch, with up to
// submitBatchesInFlight batches (connections) at once; see groupCommit.
const (
	submitBatch           = 64
	submitBatchesInFlight = 2
)

// SubmitBatches reports how many submits were written and in how many
// group commits (their ratio is the mean batch size).
func (s *Store) SubmitBatches() (statements, commits uint64) {
	return s.submits.statements.Load(), s.submits.commits.Load()
}

// MergedSubmitBatches reports how many group commits of submits were one
// merged statement (insertManySQL).
func (s *Store) MergedSubmitBatches() uint64 { return s.submits.merges.Load() }

// Pool returns the underlying pool (for health checks and benchmarks).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// inTx runs fn in a transaction, committing if it returns nil. Rollback runs
// even when ctx is cancelled.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	return nil
}

// pgCode returns the SQLSTATE of err and the constraint it names, if any.
func pgCode(err error) (code, constraint string) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code, pe.ConstraintName
	}
	return "", ""
}

const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
	checkViolation      = "23514"
)

// notFound turns pgx.ErrNoRows into a not_found error.
func notFound(err error, format string, args ...any) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return apperr.NotFound(format, args...)
	}
	return err
}
