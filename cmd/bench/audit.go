package main

import (
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/airlockhq/airlock/internal/app"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/benchtable"
	"github.com/airlockhq/airlock/internal/store"
)

// The audit benchmark (-audit): seed a durable embedded cluster with a year
// of sealed audit events, then measure what auditors and the submit path
// see: correlation-ID lookups, an agent's events in a time range (both
// through the store's query code), verification throughput, and submit
// throughput with the sealer running and not.

const (
	seedAgents = 200
	seedSpan   = 365 * 24 * time.Hour
)

// seedRow describes seeded event i. Events come in correlations of four
// (submitted, approved, running, result) whose events are spread over a
// window of 4096 events, as concurrent work interleaves in a real trail.
// Their JSON texts (seedSource) are spelled as jsonb prints them (keys by
// length, then bytes; ", " and ": " between tokens): what the server
// stores since migration 00032, which seed checks.
type seedRow struct{ corr, pos, agent int }

func seedShape(i int) seedRow {
	block, j := i/4096, (i%4096)*1103%4096 // 1103 is odd: a permutation of the block
	corr := block*1024 + j/4
	return seedRow{corr: corr, pos: j % 4, agent: corr * 7919 % seedAgents}
}

func corrID(corr int) string   { return fmt.Sprintf("corr-%08d", corr) }
func agentID(agent int) string { return fmt.Sprintf("agent-%03d", agent) }

var (
	seedKinds = []string{"action.submitted", "action.approved", "action.running", "action.result"}
	seedTools = []string{"fs.read", "payments.send", "email.send", "exec", "worktree.merge"}
	seedRisk  = [][]byte{
		[]byte(`{"level": "low", "score": 12, "reasons": ["read tool"], "injection": false}`),
		[]byte(`{"level": "high", "score": 70, "reasons": ["payment over the cap", "host outside the allowlist"], "injection": false}`),
	}
	seedDecision = []byte(`{"by": "policy", "effect": "approve", "reason": "rule big-spend", "source": "agent", "rule_id": "big-spend", "policy_version": 7}`)
)

// seedSource generates the seeded rows, sealed: it computes the hash chain
// as it goes, exactly as the sealer would.
type seedSource struct {
	n, i   int
	base   int64 // ids are base+1 … base+n
	seq0   int64 // seqs are seq0+1 … seq0+n
	start  time.Time
	step   time.Duration
	prev   []byte
	hasher audit.Hasher
	vals   []any
	err    error
	// seals receives each event's seal row (sealColumns), for the COPY
	// into audit_seals that runs alongside; closed at the end.
	seals chan []any
}

var seedColumns = []string{"id", "at", "kind", "actor", "agent_id", "agent_instance", "conversation_id", "step_id",
	"correlation_id", "action_id", "tool", "args", "risk", "decision", "data", "digest"}

var sealColumns = []string{"seq", "id", "at", "prev_hash", "hash", "format", "watermark"}

// sealSource feeds the seal rows a seedSource makes to a second COPY.
type sealSource struct {
	rows <-chan []any
	vals []any
}

func (s *sealSource) Next() bool {
	v, ok := <-s.rows
	s.vals = v
	return ok
}
func (s *sealSource) Values() ([]any, error) { return s.vals, nil }
func (s *sealSource) Err() error             { return nil }

func (s *seedSource) Next() bool {
	if s.i >= s.n || s.err != nil {
		if s.seals != nil {
			close(s.seals)
			s.seals = nil
		}
		return false
	}
	i := s.i
	s.i++
	sh := seedShape(i)
	var uuid [16]byte
	binary.BigEndian.PutUint64(uuid[:8], 0x01940000_00007000)
	binary.BigEndian.PutUint64(uuid[8:], 0x8000000000000000|uint64(sh.corr))
	r := audit.Record{
		ID: s.base + int64(i) + 1, At: s.start.Add(time.Duration(i) * s.step).Truncate(time.Microsecond),
		Kind: seedKinds[sh.pos], Actor: "agent:" + agentID(sh.agent), AgentID: agentID(sh.agent),
		AgentInstance:  "pod-" + strconv.Itoa(sh.corr%5),
		ConversationID: fmt.Sprintf("conv-%03d-%d", sh.agent, sh.corr/20000),
		StepID:         "step-" + strconv.Itoa(sh.pos), CorrelationID: corrID(sh.corr),
		ActionID: fmt.Sprintf("%x-%x-%x-%x-%x", uuid[0:4], uuid[4:6], uuid[6:8], uuid[8:10], uuid[10:]),
		Tool:     seedTools[sh.corr%len(seedTools)],
		Args: fmt.Appendf(nil, `{"to": "acct-%d", "memo": "invoice %d", "path": "/srv/data/file-%d.csv", "amount": %d.%02d}`,
			sh.corr%97, sh.corr, sh.corr, sh.corr%1000, sh.corr%100),
		Risk: seedRisk[sh.corr%2], Decision: seedDecision,
	}
	if sh.pos == 1 {
		r.Actor = "reviewer-" + strconv.Itoa(sh.corr%7)
	}
	if sh.pos == 3 {
		r.Data = fmt.Appendf(nil, `{"result": {"exit_code": 0, "duration_ms": %d}, "outcome": "succeeded"}`, sh.corr%5000)
	}
	prev := s.prev
	if prev == nil {
		prev = audit.Genesis
	}
	// Sealed as the sealer seals now (format 2), with the digest its writer
	// would have stored.
	r.SealFormat = audit.FormatV2
	digest, err := s.hasher.Digest(&r)
	if err != nil {
		s.err = err
		return false
	}
	h := s.hasher.Link(prev, r.ID, r.At, digest)
	s.prev = h
	var data any
	if r.Data != nil {
		data = []byte(r.Data)
	}
	s.vals = []any{r.ID, r.At, r.Kind, r.Actor, r.AgentID, r.AgentInstance, r.ConversationID, r.StepID, r.CorrelationID,
		pgtype.UUID{Bytes: uuid, Valid: true}, r.Tool, []byte(r.Args), []byte(r.Risk), []byte(r.Decision), data, digest}
	var watermark any // on the last seal: every seeded event is sealed
	if s.i == s.n {
		watermark = r.ID
	}
	s.seals <- []any{s.seq0 + int64(i+1), r.ID, r.At, prev, h, int16(audit.FormatV2), watermark}
	return true
}

func (s *seedSource) Values() ([]any, error) { return s.vals, nil }
func (s *seedSource) Err() error             { return s.err }

// seed bulk-loads n sealed events spread over the last year (COPY, as the
// cluster's superuser with triggers off: a migration of old data would do
// the same), their chain after head (the events the server wrote at
// start, sealed), and stores a checkpoint of the chain's head signed with
// key.
func seed(ctx context.Context, pool *pgxpool.Pool, key *audit.SigningKey, head audit.Link, n int) (start time.Time, _ []byte, err error) {
	conn, err := connectSuperuser(ctx, pool)
	if err != nil {
		return start, nil, err
	}
	defer conn.Close(context.Background())
	end := time.Now().Add(-time.Hour).UTC()
	start = end.Add(-seedSpan)
	var base int64
	for _, q := range []string{`SET session_replication_role = replica`, `SET maintenance_work_mem = '256MB'`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return start, nil, err
		}
	}
	if _, err := conn.Exec(ctx, `SELECT audit_ensure_partitions($1, $2)`, start, end); err != nil {
		return start, nil, err
	}
	if err := conn.QueryRow(ctx, `SELECT nextval('audit_events_id_seq')`).Scan(&base); err != nil {
		return start, nil, err
	}
	if _, err := conn.Exec(ctx, `SELECT setval('audit_events_id_seq', $1)`, base+int64(n)); err != nil {
		return start, nil, err
	}
	// Loading first and indexing after is several times faster than
	// maintaining the lookup indexes row by row: drop them (as the
	// migrations defined them), copy, build them again.
	rows, err := conn.Query(ctx, `SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index
		WHERE indrelid = 'audit_events'::regclass AND NOT indisprimary`)
	if err != nil {
		return start, nil, err
	}
	indexes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var ix [2]string
		return ix, r.Scan(&ix[0], &ix[1])
	})
	if err != nil {
		return start, nil, err
	}
	for _, ix := range indexes {
		if _, err := conn.Exec(ctx, `DROP INDEX `+ix[0]); err != nil {
			return start, nil, err
		}
	}
	// The seals go into audit_seals by a second COPY on another
	// connection, fed as the events are made.
	sealConn, err := connectSuperuser(ctx, pool)
	if err != nil {
		return start, nil, err
	}
	defer sealConn.Close(context.Background())
	seals := make(chan []any, 4096)
	src := &seedSource{n: n, base: base, seq0: head.Seq, start: start, step: seedSpan / time.Duration(n), seals: seals}
	if head.Seq > 0 {
		src.prev = head.Hash
	}
	t0 := time.Now()
	var sealed int64
	var sealErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		sealed, sealErr = sealConn.CopyFrom(ctx, pgx.Identifier{"audit_seals"}, sealColumns, &sealSource{rows: seals})
		for range seals { // on an error, let the events' COPY finish
		}
	})
	copied, err := conn.CopyFrom(ctx, pgx.Identifier{"audit_events"}, seedColumns, src)
	if src.seals != nil {
		close(src.seals)
	}
	wg.Wait()
	if err != nil {
		return start, nil, fmt.Errorf("seeding: %w", err)
	}
	if sealErr != nil {
		return start, nil, fmt.Errorf("seeding seals: %w", sealErr)
	}
	if copied != int64(n) || sealed != int64(n) {
		return start, nil, fmt.Errorf("seeded %d of %d events, %d seals", copied, n, sealed)
	}
	fmt.Fprintf(os.Stderr, "copied %d events in %s\n", n, time.Since(t0).Round(time.Millisecond))
	// COPY stores the seeded JSON texts as they are: they must be what the
	// writers store, jsonb's spelling of the value (migration 00032), or
	// verification would be measured on another path than the server's.
	var respelled int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT args, risk, decision, data FROM audit_events LIMIT 10000) e
		WHERE args::text IS DISTINCT FROM args::jsonb::text OR risk::text IS DISTINCT FROM risk::jsonb::text
			OR decision::text IS DISTINCT FROM decision::jsonb::text OR data::text IS DISTINCT FROM data::jsonb::text`).Scan(&respelled); err != nil {
		return start, nil, err
	}
	if respelled > 0 {
		return start, nil, fmt.Errorf("seeding: %d of the first 10,000 events are not stored as jsonb spells them", respelled)
	}
	t0 = time.Now()
	for _, ix := range indexes {
		// The parent's definition says ON ONLY (the parent alone); built
		// without it, the index is made on every partition too.
		if _, err := conn.Exec(ctx, strings.Replace(ix[1], " ON ONLY ", " ON ", 1)); err != nil {
			return start, nil, err
		}
	}
	var invalid int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_index WHERE NOT indisvalid`).Scan(&invalid); err != nil || invalid > 0 {
		return start, nil, fmt.Errorf("seeding: %d invalid indexes (%v)", invalid, err)
	}
	fmt.Fprintf(os.Stderr, "indexed in %s\n", time.Since(t0).Round(time.Millisecond))
	cp := key.Sign(head.Seq+int64(n), src.prev, time.Now())
	if _, err := conn.Exec(ctx, `INSERT INTO audit_checkpoints (seq, hash, at, public_key, signature) VALUES ($1, $2, $3, $4, $5)`,
		cp.Seq, []byte(cp.Hash), cp.At, []byte(cp.PublicKey), cp.Signature); err != nil {
		return start, nil, err
	}
	for _, table := range []string{"audit_events", "audit_seals"} {
		if _, err := conn.Exec(ctx, `VACUUM (ANALYZE) `+table); err != nil {
			return start, nil, err
		}
	}
	return start, src.prev, nil
}

// timed runs fn n times, one after another, and returns the latencies.
func timed(n int, fn func(i int) error) (result, error) {
	res := result{latencies: make([]time.Duration, 0, n)}
	start := time.Now()
	for i := range n {
		t0 := time.Now()
		if err := fn(i); err != nil {
			return res, err
		}
		res.latencies = append(res.latencies, time.Since(t0))
	}
	res.elapsed = time.Since(start)
	res.n = n
	slices.Sort(res.latencies)
	return res, nil
}

func runAudit(d time.Duration, workers, events int, keep bool) error {
	dir, err := os.MkdirTemp("", "airlock-auditbench-")
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
	// A bulk load of a few GB: fewer forced checkpoints while seeding.
	settings := map[string]string{"max_wal_size": "8GB"}
	for k, v := range pgSettings() {
		settings[k] = v
	}
	// The server's own sealer is off: the benchmark runs one it can stop.
	a, err := app.Start(ctx, app.Config{Addr: "127.0.0.1:0", DataDir: dir, AdminPassword: "bench-admin-password",
		Worker: "off", PGSettings: settings, AuditSealEvery: -1}, log)
	if err != nil {
		return err
	}
	defer a.Shutdown(context.Background())
	seedKey := make([]byte, 32)
	_, _ = crand.Read(seedKey)
	key, err := audit.NewSigningKey(seedKey)
	if err != nil {
		return err
	}
	st := store.New(a.Pool(), log)

	fmt.Fprintf(os.Stderr, "seeding %d audit events...\n", events)
	t0 := time.Now()
	// What the server wrote at start (its admin, say) is sealed first, as
	// its sealer would have: verification reports an event left unsealed.
	if err := audit.NewSealer(st, key, audit.SealerConfig{Logger: log}).Checkpoint(ctx); err != nil {
		return err
	}
	head, err := st.Head(ctx)
	if err != nil {
		return err
	}
	start, _, err := seed(ctx, a.Pool(), key, head, events)
	if err != nil {
		return err
	}
	seedTime := time.Since(t0)
	var tableBytes int64
	if err := a.Pool().QueryRow(ctx, `SELECT sum(pg_total_relation_size(inhrelid)) + pg_total_relation_size('audit_seals')
		FROM pg_inherits WHERE inhparent = 'audit_events'::regclass`).Scan(&tableBytes); err != nil {
		return err
	}

	// Queries, through the store as the API makes them.
	const queries = 2000
	corrQuery := func(rng *rand.Rand) func(int) error {
		return func(int) error {
			c := seedShape(rng.IntN(events)).corr
			evs, _, err := st.QueryEvents(ctx, audit.Filter{CorrelationID: corrID(c), Limit: audit.DefaultLimit})
			if err == nil && len(evs) == 0 {
				err = fmt.Errorf("correlation %s: no events", corrID(c))
			}
			return err
		}
	}
	// Warm (issue 14): as many untimed lookups of other random IDs first,
	// so that the plans are cached and the indexes' upper levels are in
	// memory, as on a server in use.
	if _, err := timed(queries, corrQuery(rand.New(rand.NewPCG(3, 5)))); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(7, 11))
	corrQ, err := timed(queries, corrQuery(rng))
	if err != nil {
		return err
	}
	results.Add("correlation.p99", ms(corrQ.pct(0.99)), int64(events), fmt.Sprintf("p50 %.2f ms", ms(corrQ.pct(0.5))))
	rows := 0
	agentQ, err := timed(queries, func(int) error {
		since := start.Add(time.Duration(rng.Int64N(int64(seedSpan - 24*time.Hour))))
		evs, _, err := st.QueryEvents(ctx, audit.Filter{AgentID: agentID(rng.IntN(seedAgents)), Since: since,
			Until: since.Add(24 * time.Hour), Limit: audit.DefaultLimit})
		rows += len(evs)
		return err
	})
	if err != nil {
		return err
	}

	fmt.Fprintln(os.Stderr, "verifying...")
	stopProfile, err := startProfile(profilePath) // -cpuprofile: of the verification
	if err != nil {
		return err
	}
	meter := newCPUMeter(dir)
	cpu0 := meter.now()
	t0 = time.Now()
	report, err := audit.Verify(ctx, st, audit.VerifyOptions{Keys: []ed25519.PublicKey{key.Public()}})
	if err != nil {
		return err
	}
	verifyTime := time.Since(t0)
	verifyCPU := meter.now().sub(cpu0)
	stopProfile()
	if !report.OK || report.Checked != head.Seq+int64(events) {
		return fmt.Errorf("verification: %+v", report)
	}
	results.Add("verification.rate", float64(report.Checked)/verifyTime.Seconds(), report.Checked,
		fmt.Sprintf("%s events in %s", benchtable.Thousands(report.Checked), verifyTime.Round(time.Millisecond)))

	// Submit throughput, sealer off and on (see the loop below).
	fmt.Fprintln(os.Stderr, "submitting...")
	if stats { // -pgstats: the submit phases' statements, the sealer's among them
		resetStats(a.Pool())
	}
	submit, err := agentSubmitter(ctx, a, workers)
	if err != nil {
		return err
	}
	allow := submit("fs.read", map[string]any{"path": "/srv/data/report.csv"}, "approved")
	sealer := audit.NewSealer(st, key, audit.SealerConfig{Logger: log})
	drive("warm-up", workers, time.Second, allow)
	if _, err := sealer.Seal(ctx); err != nil {
		return err
	}
	// Stopped and running alternate in short phases: this machine's
	// throughput wanders by ~10 % from one second to the next and drifts
	// over minutes, so many short pairs measure the ratio more closely
	// than a few long ones. Each pair runs in the order opposite to the
	// one before (ABBA), so that a steady drift cancels out. Every phase
	// starts with the chain sealed to its end: a stopped phase's backlog is
	// sealed (and timed) after it, a running phase's remainder too.
	pairs := max(4, 2*int(d/sealPhase))
	var off, on result
	var backlog int
	var backlogTime time.Duration
	stopped := func() (result, error) {
		r := drive("off", workers, sealPhase, allow)
		t0 := time.Now()
		n, err := sealer.Seal(ctx)
		backlog += n
		backlogTime += time.Since(t0)
		return r, err
	}
	running := func() (result, error) {
		runCtx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { sealer.Run(runCtx) })
		r := drive("on", workers, sealPhase, allow)
		stop()
		wg.Wait()
		_, err := sealer.Seal(ctx)
		return r, err
	}
	gaps := make([]float64, 0, pairs)
	for p := range pairs {
		var pOff, pOn result
		for i := range 2 {
			var err error
			if (i+p)%2 == 0 { // stopped first in even pairs, second in odd ones
				pOff, err = stopped()
			} else {
				pOn, err = running()
			}
			if err != nil {
				return err
			}
		}
		off, on = off.merge(pOff), on.merge(pOn)
		gaps = append(gaps, 100*(1-pOn.throughput()/pOff.throughput()))
	}
	if off.errors+on.errors > 0 {
		return fmt.Errorf("errors during the submit phases")
	}
	if stats {
		dumpStats(a.Pool())
	}
	// The chain after all that: still whole.
	t0 = time.Now()
	final, err := audit.Verify(ctx, st, audit.VerifyOptions{Keys: []ed25519.PublicKey{key.Public()}})
	if err != nil {
		return err
	}
	finalTime := time.Since(t0)
	if !final.OK {
		return fmt.Errorf("final verification: %+v", final)
	}

	fmt.Printf("\nAirlock audit benchmark — %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Printf("machine: %d CPUs, %s; embedded PostgreSQL, durable (fsync, synchronous_commit on)\n", runtime.NumCPU(), runtime.GOARCH)
	fmt.Printf("seeded %d sealed events over 12 monthly partitions (%d agents, 4 events per correlation ID) in %s; %.1f GB with indexes\n\n",
		events, seedAgents, seedTime.Round(time.Second), float64(tableBytes)/(1<<30))
	fmt.Printf("%-44s %10s %10s %10s\n", "query (store code, one at a time)", "p50", "p99", "target")
	fmt.Printf("%-44s %10s %10s %10s\n", "correlation ID (a page of its events)", corrQ.pct(0.5).Round(time.Microsecond),
		corrQ.pct(0.99).Round(time.Microsecond), "p99 ≤ 2ms")
	fmt.Printf("%-44s %10s %10s %10s\n", fmt.Sprintf("agent + 1-day range (page ≤ 100; avg %d rows)", rows/queries),
		agentQ.pct(0.5).Round(time.Microsecond), agentQ.pct(0.99).Round(time.Microsecond), "")
	fmt.Printf("\nverification: %d events in %s = %.0f events/s (target ≥ 500,000/s); after the submit phases %d events in %s = %.0f/s\n",
		report.Checked, verifyTime.Round(time.Millisecond), float64(report.Checked)/verifyTime.Seconds(),
		final.Checked, finalTime.Round(time.Millisecond), float64(final.Checked)/finalTime.Seconds())
	fmt.Printf("verification's CPU per event (the first): Go %.2f µs, PostgreSQL %.2f µs (%.0f%% of the %d CPUs busy)\n",
		float64(verifyCPU.self.Nanoseconds())/1000/float64(max(report.Checked, 1)), float64(verifyCPU.pg.Nanoseconds())/1000/float64(max(report.Checked, 1)),
		100*float64(verifyCPU.self+verifyCPU.pg)/float64(verifyTime)/float64(runtime.NumCPU()), runtime.NumCPU())
	fmt.Printf("sealing a backlog: %d events in %s = %.0f events/s\n\n", backlog, backlogTime.Round(time.Millisecond),
		float64(backlog)/backlogTime.Seconds())
	fmt.Printf("%-34s %10s %9s %9s\n", "submit, allow (HTTP, 32 agents)", "ops/s", "p50", "p99")
	for _, r := range []result{off, on} {
		fmt.Printf("%-34s %10.0f %9s %9s\n", "sealer "+r.name, r.throughput(), r.pct(0.5).Round(10*time.Microsecond), r.pct(0.99).Round(10*time.Microsecond))
	}
	gap := 100 * (1 - on.throughput()/off.throughput())
	mean, se := meanAndError(gaps)
	fmt.Printf("sealing costs %.1f%% of submit throughput (target ≤ 10%%; issue 14: ≤ 3%% apart)\n", gap)
	fmt.Printf("  %d pairs of %s phases: the pairs' gaps %.1f%% on average, the standard error of that mean %.1f%%\n", pairs, sealPhase, mean, se)
	results.Add("sealing.gap", gap, 0, fmt.Sprintf("%.0f running vs %.0f stopped ops/s; %d pairs of %s, standard error of the pairs' mean gap %.1f %%",
		on.throughput(), off.throughput(), pairs, sealPhase, se))
	return nil
}

// sealPhase is the length of one phase of the sealing comparison.
const sealPhase = time.Second

// meanAndError returns the mean of xs and its standard error.
func meanAndError(xs []float64) (mean, se float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1) / float64(len(xs)))
}
