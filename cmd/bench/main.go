// Command bench measures Airlock's submit path against the embedded,
// durable PostgreSQL: concurrent agents submitting over HTTP for a fixed
// time, once on the allow path and once creating pending actions, and two
// database floors at the same concurrency: the same action row and audit
// row inserted in one transaction straight through pgx into the server's
// tables, and (issue 14's floor) into bare tables on a fresh cluster with
// default settings. With -results FILE it appends the figures of issue
// 14's table that it measured (see cmd/benchreport).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/app"
	"github.com/airlockhq/airlock/internal/benchtable"
	"github.com/airlockhq/airlock/internal/pgembed"
)

func main() {
	duration := flag.Duration("duration", 10*time.Second, "how long each phase runs")
	agents := flag.Int("agents", 32, "concurrent agents")
	keep := flag.Bool("keep", false, "keep the data dir")
	pgStats := flag.Bool("pgstats", false, "print the top statements from pg_stat_statements")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the first allow phase (the server and its agents) to this file")
	memprofile := flag.String("memprofile", "", "write an allocation profile of the run to this file")
	seal := flag.Bool("seal", true, "run the audit sealer during the submit phases (false: the issue-2 setup, no chain)")
	auditMode := flag.Bool("audit", false, "run the audit benchmark instead (seeds -events audit events)")
	events := flag.Int("events", 5_000_000, "audit events to seed (-audit)")
	resultsPath := flag.String("results", "", "append the performance table's figures to this file (JSON lines, see cmd/benchreport)")
	flag.Parse()
	results = benchtable.NewRecorder(*resultsPath)
	sealing = *seal
	debug.SetGCPercent(400) // as cmd/server does
	profilePath = *cpuprofile
	stats = *pgStats
	bench := func() error { return run(*duration, *agents, *keep) }
	if *auditMode {
		bench = func() error { return runAudit(*duration, *agents, *events, *keep) }
	}
	defer writeAllocs(*memprofile)
	err := bench()
	// Figures measured before a failure are still written: the report shows
	// the rest as missing.
	if ferr := results.Flush(); ferr != nil && err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// result is one phase's measurements.
type result struct {
	name      string
	cpu       cpuSample // CPU used while the phase ran (bench process, cluster)
	n         int
	errors    int
	elapsed   time.Duration
	latencies []time.Duration
}

// merge adds o's measurements to r.
func (r result) merge(o result) result {
	r.name = o.name
	r.n += o.n
	r.errors += o.errors
	r.elapsed += o.elapsed
	r.latencies = append(r.latencies, o.latencies...)
	r.cpu.self += o.cpu.self
	r.cpu.pg += o.cpu.pg
	slices.Sort(r.latencies)
	return r
}

func (r result) throughput() float64 { return float64(r.n) / r.elapsed.Seconds() }

func (r result) pct(p float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[min(len(r.latencies)-1, int(float64(len(r.latencies))*p))]
}

// drive runs fn from workers goroutines for d and collects latencies.
func drive(name string, workers int, d time.Duration, fn func(ctx context.Context, worker, i int) error) result {
	ctx := context.Background()
	var mu sync.Mutex
	res := result{name: name}
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			errs := 0
			for i := 0; time.Now().Before(deadline); i++ {
				t0 := time.Now()
				if err := fn(ctx, w, i); err != nil {
					errs++
					if errs == 1 {
						fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
					}
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			res.latencies = append(res.latencies, lat...)
			res.errors += errs
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.n = len(res.latencies)
	slices.Sort(res.latencies)
	return res
}

func run(d time.Duration, workers int, keep bool) error {
	dir, err := os.MkdirTemp("", "airlock-bench-")
	if err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := app.Start(ctx, app.Config{Addr: "127.0.0.1:0", DataDir: dir, AdminPassword: "bench-admin-password", Worker: "off", PGSettings: pgSettings(), AuditSealEvery: sealEvery()}, log)
	if err != nil {
		return err
	}
	defer a.Shutdown(context.Background())

	var durable string
	if err := a.Pool().QueryRow(ctx, "SHOW synchronous_commit").Scan(&durable); err != nil {
		return err
	}
	var fsync string
	if err := a.Pool().QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil {
		return err
	}

	submit, err := agentSubmitter(ctx, a, workers)
	if err != nil {
		return err
	}
	// Warm up connections, caches and compiled policies.
	drive("warm-up", workers, time.Second, submit("fs.read", map[string]any{"path": "/srv/data/report.csv"}, "approved"))

	// The phases alternate in rounds so that drift on a shared machine (and
	// the tables growing) weighs on each of them alike.
	// The floor gets its own pool with one connection per worker: the same
	// concurrency as the agents, whatever the server's pool size.
	pcfg := a.Pool().Config().Copy()
	pcfg.MaxConns = int32(workers)
	pcfg.MinConns = int32(workers)
	floorPool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer floorPool.Close()
	bare, err := startBareFloor(ctx, workers, keep)
	if err != nil {
		return err
	}
	defer bare.close(keep)
	bareFsync, bareDurable, err := bare.settings(ctx)
	if err != nil {
		return err
	}
	drive("warm-up", workers, time.Second, decisionTx(bare.pool))
	const rounds = 3
	var allow, pending, floor, bareFl result
	meter := newCPUMeter(dir)
	for round := range rounds {
		floor = floor.merge(meter.phase(func() result { return drive("floor", workers, d/rounds, decisionTx(floorPool)) }))
		bareFl = bareFl.merge(drive("bare", workers, d/rounds, decisionTx(bare.pool)))
		stopProfile := func() {}
		if round == 0 { // -cpuprofile: the first allow phase, nothing else
			if stopProfile, err = startProfile(profilePath); err != nil {
				return err
			}
		}
		allow = allow.merge(meter.phase(func() result {
			return drive("allow", workers, d/rounds, submit("fs.read", map[string]any{"path": "/srv/data/report.csv"}, "approved"))
		}))
		stopProfile()
		pending = pending.merge(meter.phase(func() result {
			return drive("pending", workers, d/rounds, submit("payments.send", map[string]any{"amount": 250, "to": "acme", "memo": "invoice 42"}, "pending"))
		}))
	}
	if stats {
		dumpStats(a.Pool())
	}
	fmt.Printf("\nAirlock submit-path benchmark — %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Printf("machine: %d CPUs, %s; embedded PostgreSQL fsync=%s synchronous_commit=%s; %d concurrent agents; %s per phase\n",
		runtime.NumCPU(), runtime.GOARCH, fsync, durable, workers, d)
	fmt.Printf("bare floor: a fresh cluster with default settings (fsync=%s synchronous_commit=%s), two tables with primary keys only\n\n",
		bareFsync, bareDurable)
	fmt.Printf("%-34s %10s %9s %9s %7s %9s %s\n", "phase", "ops/s", "p50", "p99", "errors", "vs floor", "vs bare floor")
	for _, r := range []result{allow, pending, floor, bareFl} {
		label := map[string]string{
			"allow":   "(a) submit, allow (HTTP)",
			"pending": "(b) submit, pending (HTTP)",
			"floor":   "floor: action+audit tx (pgx)",
			"bare":    "bare floor: fresh cluster (pgx)",
		}[r.name]
		fmt.Printf("%-34s %10.0f %9s %9s %7d %8.0f%% %12.0f%%\n", label, r.throughput(), r.pct(0.50).Round(10*time.Microsecond),
			r.pct(0.99).Round(10*time.Microsecond), r.errors, 100*r.throughput()/floor.throughput(), 100*r.throughput()/bareFl.throughput())
	}
	fmt.Printf("\nCPU per operation (less disturbed by a busy machine than throughput):\n")
	for _, r := range []result{allow, pending, floor} {
		fmt.Printf("  %-8s Go (server+client) %6.1f µs   PostgreSQL %6.1f µs\n", r.name,
			float64(r.cpu.self.Microseconds())/float64(max(r.n, 1)), float64(r.cpu.pg.Microseconds())/float64(max(r.n, 1)))
	}
	if writes, commits := a.Store.SubmitBatches(); commits > 0 {
		merged := a.Store.MergedSubmitBatches()
		fmt.Printf("\nsubmits written: %d in %d commits (group commit: %.1f per commit; %d commits one merged statement)\n",
			writes, commits, float64(writes)/float64(commits), merged)
	}
	if allow.errors+pending.errors+floor.errors+bareFl.errors > 0 {
		return fmt.Errorf("errors during the run")
	}
	// Issue 14's rows: against the bare floor (a run with errors records
	// none, so the report shows them missing; nor does one without the
	// sealer, which is not the server's setup).
	if !sealing {
		fmt.Fprintln(os.Stderr, "bench: -seal=false: no figures recorded for the table")
		return nil
	}
	for _, r := range []result{allow, pending} {
		results.Add(r.name+".vs_floor", 100*r.throughput()/bareFl.throughput(), int64(workers),
			fmt.Sprintf("%.0f vs %.0f ops/s", r.throughput(), bareFl.throughput()))
		results.Add(r.name+".p99", ms(r.pct(0.99)), int64(workers), fmt.Sprintf("bare floor p99 %.2f ms", ms(bareFl.pct(0.99))))
	}
	return nil
}

// submitFunc returns a drive function: each worker's agent submits tool with
// args and expects the status want.
type submitFunc func(tool string, args map[string]any, want string) func(ctx context.Context, w, i int) error

// agentSubmitter registers one agent per worker (with the benchmark's
// policy) on a and returns their submit function.
func agentSubmitter(ctx context.Context, a *app.App, workers int) (submitFunc, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: workers * 2, MaxIdleConnsPerHost: workers * 2}}
	admin, _, err := client.New(a.URL(), "").WithHTTPClient(hc).Login(ctx, "admin", "bench-admin-password")
	if err != nil {
		return nil, err
	}
	policy := map[string]any{"rules": []map[string]any{
		{"id": "reads", "tool": "fs.read", "effect": "allow"},
		{"id": "spend", "tool": "payments.send", "effect": "approve", "when": "args.amount > 100", "timeout": "1h"},
		{"id": "small-spend", "tool": "payments.send", "effect": "allow"},
	},
		// Nobody decides the benchmark's pending actions: the per-agent
		// bound is lifted so that they pile up (its check still runs).
		"settings": map[string]any{"max_pending": 1_000_000}}
	clients := make([]*client.Client, workers)
	for i := range workers {
		id := fmt.Sprintf("bench-agent-%02d", i)
		if err := admin.CreateAgent(ctx, id, id); err != nil {
			return nil, err
		}
		if _, err := admin.PutAgentPolicy(ctx, id, policy); err != nil {
			return nil, err
		}
		tok, err := admin.IssueAgentToken(ctx, id, 0)
		if err != nil {
			return nil, err
		}
		clients[i] = client.New(a.URL(), tok.Token).WithHTTPClient(hc)
	}
	return func(tool string, args map[string]any, want string) func(ctx context.Context, w, i int) error {
		return func(ctx context.Context, w, i int) error {
			act, err := clients[w].Submit(ctx, client.SubmitRequest{Tool: tool, Args: args, ConversationID: "bench"})
			if err != nil {
				return err
			}
			if act.Status != want {
				return fmt.Errorf("status %s, want %s", act.Status, want)
			}
			return nil
		}
	}, nil
}

// pgSettings preloads pg_stat_statements when -pgstats asks for it.
func pgSettings() map[string]string {
	if !stats {
		return nil
	}
	return map[string]string{"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track_planning": "on"}
}

// sealEvery keeps the server's default sealing, or turns the sealer off.
func sealEvery() time.Duration {
	if sealing {
		return 0
	}
	return -1
}

var (
	sealing     bool
	profilePath string
	stats       bool
	results     *benchtable.Recorder
)

// writeAllocs writes the allocation profile when path is set.
func writeAllocs(path string) {
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// startProfile starts a CPU profile when path is set.
func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// connectSuperuser connects to pool's database as the embedded cluster's
// superuser: the server itself logs in as a plain member of airlock_app.
func connectSuperuser(ctx context.Context, pool *pgxpool.Pool) (*pgx.Conn, error) {
	cfg := pool.Config().ConnConfig.Copy()
	delete(cfg.RuntimeParams, "role")
	cfg.User = pgembed.SuperUser
	return pgx.ConnectConfig(ctx, cfg)
}

// resetStats empties pg_stat_statements (with -pgstats), so that what
// dumpStats prints next is of the phases after it only.
func resetStats(pool *pgxpool.Pool) {
	withStats(pool, func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "SELECT pg_stat_statements_reset()")
		return err
	})
}

// dumpStats prints the top statements by total time, planning included,
// with how often each was planned: a statement planned at every call is
// one whose cached generic plan PostgreSQL found worse than planning afresh
// (issue 14: the audit lookups, before they stated their partial indexes'
// predicates), and the time JIT compilation took per call: PostgreSQL
// compiles a statement whose estimated cost passes jit_above_cost at every
// execution (issue 14: 660 ms per call of a 3 ms read at 20 M events).
func dumpStats(pool *pgxpool.Pool) {
	withStats(pool, func(ctx context.Context, conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, `SELECT calls, plans, total_plan_time / greatest(plans, 1), total_exec_time / greatest(calls, 1),
			(jit_generation_time + jit_inlining_time + jit_optimization_time + jit_emission_time) / greatest(calls, 1),
			left(regexp_replace(query, '\s+', ' ', 'g'), 90)
			FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 25`)
		if err != nil {
			return err
		}
		fmt.Printf("%8s %8s %9s %9s %9s %s\n", "calls", "plans", "plan ms", "exec ms", "jit ms", "statement")
		for rows.Next() {
			var calls, plans int64
			var plan, exec, jit float64
			var q string
			if err := rows.Scan(&calls, &plans, &plan, &exec, &jit, &q); err != nil {
				return err
			}
			fmt.Printf("%8d %8d %9.3f %9.3f %9.3f %s\n", calls, plans, plan, exec, jit, q)
		}
		return rows.Err()
	})
}

// withStats runs fn on a superuser connection with pg_stat_statements
// installed, printing what fails (the statistics are a diagnostic: the
// benchmark goes on without them).
func withStats(pool *pgxpool.Pool, fn func(context.Context, *pgx.Conn) error) {
	ctx := context.Background()
	conn, err := connectSuperuser(ctx, pool)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close(ctx)
	conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
	if err := fn(ctx, conn); err != nil {
		fmt.Println(err)
	}
}
