package main

import (
	"context"
	"fmt"
	"os"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/airlockhq/airlock/internal/pgembed"
)

// The bare floor (issue 14): the same decision's two rows, one transaction
// each, into bare tables (primary keys only: no foreign key, check,
// trigger, partition or lookup index) on a second, fresh cluster with
// PostgreSQL's default settings (pgembed's durable defaults: nothing but
// the socket and max_connections set), in its own directory.

// bareSchema is the floor's two tables: the action's and the audit event's
// columns that the floor writes, primary keys only.
const bareSchema = `
CREATE TABLE actions (
    id             uuid PRIMARY KEY,
    agent_id       text NOT NULL,
    correlation_id text NOT NULL,
    tool           text NOT NULL,
    args           jsonb NOT NULL,
    status         text NOT NULL,
    risk           jsonb NOT NULL,
    decision       jsonb NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE audit_events (
    id             bigserial PRIMARY KEY,
    at             timestamptz NOT NULL DEFAULT clock_timestamp(),
    kind           text NOT NULL,
    actor          text NOT NULL,
    agent_id       text NOT NULL,
    correlation_id text NOT NULL,
    action_id      uuid,
    tool           text NOT NULL,
    args           jsonb,
    risk           jsonb,
    decision       jsonb
);`

// bareFloor is the fresh cluster and a pool of workers connections to it.
type bareFloor struct {
	dir     string
	cluster *pgembed.Cluster
	pool    *pgxpool.Pool
}

// startBareFloor starts the fresh cluster in a new temporary directory and
// creates the bare tables.
func startBareFloor(ctx context.Context, workers int, keep bool) (*bareFloor, error) {
	dir, err := os.MkdirTemp("", "airlock-barefloor-")
	if err != nil {
		return nil, fmt.Errorf("bare floor: %w", err)
	}
	b := &bareFloor{dir: dir}
	if !keep {
		defer func() {
			if b.pool == nil {
				os.RemoveAll(dir)
			}
		}()
	}
	if err := os.Chmod(dir, 0o755); err != nil { // the cluster may run as another OS user
		return nil, fmt.Errorf("bare floor: %w", err)
	}
	b.cluster, err = pgembed.Start(ctx, pgembed.Options{Dir: dir, Durable: true})
	if err != nil {
		return nil, fmt.Errorf("bare floor: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(b.cluster.URL("postgres"))
	if err != nil {
		b.cluster.Stop(ctx)
		return nil, fmt.Errorf("bare floor: %w", err)
	}
	cfg.MaxConns, cfg.MinConns = int32(workers), int32(workers)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		_, err = pool.Exec(ctx, bareSchema)
		if err != nil {
			pool.Close()
		}
	}
	if err != nil {
		b.cluster.Stop(ctx)
		return nil, fmt.Errorf("bare floor: %w", err)
	}
	b.pool = pool
	return b, nil
}

// close stops the cluster and, unless keep, removes its directory.
func (b *bareFloor) close(keep bool) {
	b.pool.Close()
	b.cluster.Stop(context.Background())
	if !keep {
		os.RemoveAll(b.dir)
	}
}

// settings returns the fresh cluster's fsync and synchronous_commit.
func (b *bareFloor) settings(ctx context.Context) (fsync, synchronous string, err error) {
	err = b.pool.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('synchronous_commit')").Scan(&fsync, &synchronous)
	return fsync, synchronous, err
}

// decisionTx is the bare database work of one decision, on either floor
// (the server's schema or the bare tables): BEGIN; INSERT action; INSERT
// audit; COMMIT, one statement after another through pgx.
func decisionTx(pool *pgxpool.Pool) func(ctx context.Context, w, i int) error {
	args := []byte(`{"path":"/srv/data/report.csv"}`)
	riskJSON := []byte(`{"level":"low","score":5,"reasons":["read tool"],"injection":false}`)
	decision := []byte(`{"effect":"allow","by":"policy","rule_id":"reads","policy_version":1,"source":"agent","reason":"rule reads"}`)
	return func(ctx context.Context, w, i int) error {
		id := uuid.Must(uuid.NewV7()).String()
		agent := fmt.Sprintf("bench-agent-%02d", w)
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `INSERT INTO actions (id, agent_id, correlation_id, tool, args, status, risk, decision)
			VALUES ($1, $2, $6, 'fs.read', $3, 'approved', $4, $5)`, id, agent, args, riskJSON, decision, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO audit_events (kind, actor, agent_id, correlation_id, action_id, tool, args, risk, decision)
			VALUES ('action.submitted', $2, $2, $6, $1, 'fs.read', $3, $4, $5)`, id, agent, args, riskJSON, decision, id); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
}
