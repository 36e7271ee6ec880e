package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// groupCommit runs single-statement writes from concurrent callers as
// pipelined batches: every statement that arrives while earlier batches are
// in flight waits for a free batch slot and then goes out with the others
// in one round trip and one implicit transaction, so one commit (one WAL
// flush) makes all of them durable. A caller alone goes out at once, in a
// batch of one: it never waits for company.
//
// A caller learns its statement succeeded only after the whole batch has
// committed. When a statement fails the server rolls the batch back; each
// statement of it is then run again on its own, so that one caller's error
// (a duplicate, a vanished agent) is never another's.
//
// A batch whose every statement says which merged statement stands for it
// (queryRowMergeable: a plain submit, insertManySQL) goes out as that one
// statement over all their rows instead: the same commit, a fraction of
// the server's work (runMerged).
//
// There is no goroutine of its own: the first caller to find a free slot
// leads, runs a batch, and hands the slot to the oldest waiting caller.
type groupCommit struct {
	pool       *pgxpool.Pool
	maxBatch   int // statements per batch
	maxLeaders int // batches in flight at once (connections used)

	mu      sync.Mutex
	queue   []*queued
	leaders int

	statements, commits atomic.Uint64 // for the metrics
	merges              atomic.Uint64 // batches that went out as one merged statement
	// deadlocks counts batches PostgreSQL aborted as a deadlock (each
	// statement then ran again on its own): a batch's statements take
	// their locks in the lock order (store.go), so a test expects none.
	deadlocks atomic.Uint64
}

// queued is one caller's statement.
type queued struct {
	// key orders the statements of a batch: statements that lock the same
	// rows (an agent's pending count) take them in key order in every
	// batch, so that two batches in flight never wait on each other in a
	// cycle.
	key  string
	sql  string
	args []any
	dest []any
	// row, when set, is the statement's parameters as a row of merged (a
	// statement for many callers at once, see runMerged): a batch in which
	// every statement has one runs as that statement.
	row    []byte
	merged string
	err    error
	// turn says, once the caller may go on, whether it got a batch slot
	// to lead (true) or its result is in (false).
	turn chan bool
}

// batchTimeout bounds one batch. The batch does not stop when the caller
// that leads it goes away: the statements of the others ride on it.
const batchTimeout = 30 * time.Second

func newGroupCommit(pool *pgxpool.Pool, maxBatch, maxLeaders int) *groupCommit {
	return &groupCommit{pool: pool, maxBatch: maxBatch, maxLeaders: maxLeaders}
}

// queryRow runs sql with args, in a batch with whatever else is waiting,
// and scans the one row it returns into dest.
func (g *groupCommit) queryRow(ctx context.Context, sql string, args []any, dest ...any) error {
	return g.queryRowKeyed(ctx, "", sql, args, dest...)
}

// queryRowKeyed is queryRow for a statement whose batch runs in key order.
func (g *groupCommit) queryRowKeyed(ctx context.Context, key, sql string, args []any, dest ...any) error {
	return g.enqueue(ctx, &queued{key: key, sql: sql, args: args, dest: dest})
}

// queryRowMergeable is queryRowKeyed for a statement that merged, a
// statement for many callers at once, can stand for: row is this caller's
// row of it (see runMerged).
func (g *groupCommit) queryRowMergeable(ctx context.Context, key, sql string, args []any, merged string, row []byte, dest ...any) error {
	return g.enqueue(ctx, &queued{key: key, sql: sql, args: args, dest: dest, merged: merged, row: row})
}

func (g *groupCommit) enqueue(ctx context.Context, q *queued) error {
	q.turn = make(chan bool, 1)
	g.mu.Lock()
	if g.leaders < g.maxLeaders {
		g.leaders++
		g.mu.Unlock()
		g.lead(ctx, q)
		return q.err
	}
	g.queue = append(g.queue, q)
	g.mu.Unlock()
	if <-q.turn {
		g.lead(ctx, q)
	}
	return q.err
}

// lead runs a batch made of first and the oldest waiting statements, tells
// their callers, and hands its slot on, even if the batch panics: no caller
// is left waiting.
func (g *groupCommit) lead(ctx context.Context, first *queued) {
	g.mu.Lock()
	n := min(len(g.queue), g.maxBatch-1)
	batch := make([]*queued, 0, n+1)
	batch = append(append(batch, first), g.queue[:n]...)
	g.queue = append(g.queue[:0:0], g.queue[n:]...)
	g.mu.Unlock()

	ran := false
	defer func() {
		if !ran { // run panicked: the leader's caller gets the panic, the others this
			for _, q := range batch[1:] {
				q.err = errBatchPanicked
			}
		}
		for _, q := range batch[1:] {
			q.turn <- false
		}
		g.handOn()
	}()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
	defer cancel()
	g.run(ctx, batch)
	ran = true
	g.statements.Add(uint64(len(batch)))
	g.commits.Add(1)
}

// errBatchPanicked is what the callers batched with a panicking leader get:
// whether their statements committed is unknown.
var errBatchPanicked = errors.New("store: group commit: the batch failed (panic); its outcome is unknown")

// handOn gives the caller's batch slot to the oldest waiting statement, or
// frees it.
func (g *groupCommit) handOn() {
	g.mu.Lock()
	if len(g.queue) == 0 {
		g.leaders--
		g.mu.Unlock()
		return
	}
	next := g.queue[0]
	g.queue = g.queue[1:]
	g.mu.Unlock()
	next.turn <- true
}

// run executes batch and sets each statement's err.
func (g *groupCommit) run(ctx context.Context, batch []*queued) {
	if len(batch) == 1 {
		batch[0].runAlone(ctx, g.pool)
		return
	}
	batch = slices.SortedStableFunc(slices.Values(batch), func(a, b *queued) int { return strings.Compare(a.key, b.key) })
	if mergeable(batch) {
		g.runMerged(ctx, batch)
		return
	}
	b := &pgx.Batch{}
	for _, q := range batch {
		b.Queue(q.sql, q.args...)
	}
	br := g.pool.SendBatch(ctx, b)
	closed := false
	defer func() {
		if !closed {
			_ = br.Close() // a panic while scanning: the connection goes back all the same
		}
	}()
	var failed error
	for _, q := range batch {
		if err := br.QueryRow().Scan(q.dest...); err != nil && failed == nil {
			failed = err
		}
	}
	// Close reads the end of the implicit transaction: only now is the
	// batch committed.
	closed = true
	if err := br.Close(); err != nil && failed == nil {
		failed = err
	}
	if failed == nil {
		return
	}
	var pe *pgconn.PgError
	if !errors.As(failed, &pe) {
		// The connection failed: the batch may or may not have committed,
		// and running it again could write twice. Each caller gets the error.
		for _, q := range batch {
			q.err = failed
		}
		return
	}
	// The server refused a statement and rolled the batch back.
	g.countDeadlock(pe)
	g.runEachAlone(ctx, batch)
}

// countDeadlock counts a batch refused as a deadlock.
func (g *groupCommit) countDeadlock(pe *pgconn.PgError) {
	if pe.Code == "40P01" {
		g.deadlocks.Add(1)
	}
}

// runEachAlone runs each statement of a batch the server refused on its
// own, so that one caller's error is never another's.
func (g *groupCommit) runEachAlone(ctx context.Context, batch []*queued) {
	for _, q := range batch {
		q.runAlone(ctx, g.pool)
	}
}

// mergeable reports whether one merged statement can stand for the whole
// batch: every statement has a row of the same one. (Only a whole batch is
// merged: a merged statement and single ones in one transaction could
// take their locks in an order another batch reverses.)
func mergeable(batch []*queued) bool {
	for _, q := range batch {
		if q.row == nil || q.merged != batch[0].merged {
			return false
		}
	}
	return true
}

// runMerged runs the batch as its merged statement: one statement whose $1
// is the JSON array of the statements' rows, each with "n", its place in
// the batch, and which returns one row per statement in that order (what
// the statement alone would have returned). When the server refuses it,
// each statement runs on its own, as a refused batch does.
func (g *groupCommit) runMerged(ctx context.Context, batch []*queued) {
	size := 2
	for _, q := range batch {
		size += len(q.row) + 16
	}
	rows := make([]byte, 0, size)
	rows = append(rows, '[')
	for i, q := range batch {
		if i > 0 {
			rows = append(rows, ',')
		}
		rows = append(rows, q.row...) // an open object: {"p1":…,"p37":…,
		rows = append(rows, `"n":`...)
		rows = strconv.AppendInt(rows, int64(i), 10)
		rows = append(rows, '}')
	}
	rows = append(rows, ']')
	res, err := g.pool.Query(ctx, batch[0].merged, string(rows))
	if err != nil {
		g.mergedFailed(ctx, batch, err)
		return
	}
	defer res.Close()
	i := 0
	for res.Next() {
		if i == len(batch) {
			err = errors.New("store: group commit: the merged statement returned more rows than it was given")
			break
		}
		if err = res.Scan(batch[i].dest...); err != nil {
			break
		}
		i++
	}
	res.Close() // the end of the implicit transaction: only now is it committed
	if err == nil {
		err = res.Err()
	}
	if err == nil && i != len(batch) {
		err = fmt.Errorf("store: group commit: the merged statement returned %d rows for %d", i, len(batch))
	}
	if err != nil {
		g.mergedFailed(ctx, batch, err)
		return
	}
	g.merges.Add(1)
}

// mergedFailed is runMerged's failure: refused by the server, each statement
// runs on its own; a failed connection (committed or not, unknown) is each
// caller's error.
func (g *groupCommit) mergedFailed(ctx context.Context, batch []*queued, err error) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		g.countDeadlock(pe)
		g.runEachAlone(ctx, batch)
		return
	}
	for _, q := range batch {
		q.err = err
	}
}

func (q *queued) runAlone(ctx context.Context, pool *pgxpool.Pool) {
	q.err = pool.QueryRow(ctx, q.sql, q.args...).Scan(q.dest...)
}
