// Command fanoutbench measures what reaches people and agents after a
// decision, on two server instances on one embedded, durable PostgreSQL:
//
//   - the wake-up (-waiters, 200): agents long-poll their pending action on
//     instance 2 while a reviewer approves over HTTP on instance 1; from the
//     start of the approve request to the agent's poll returning;
//   - the console's live fan-out (-reviewers, 1,000): websocket reviewers
//     split over both instances (in a child process), an agent submitting
//     actions that need approval to instance 1 at a steady rate (20,000
//     messages a second in all by default, see deliveries); for every
//     action and every reviewer the time from the agent's submit to the
//     reviewer receiving the action.created message, p50/p99 per instance
//     and overall, and the instances' memory per connection.
//
// With -results FILE it appends the figures of issue 14's table that it
// measured (see cmd/benchreport).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/app"
	"github.com/airlockhq/airlock/internal/benchtable"
)

func main() {
	duration := flag.Duration("duration", 10*time.Second, "how long actions are submitted (and, with -waiters, approved)")
	reviewers := flag.Int("reviewers", 1000, "websocket reviewers, split over the two instances (0: no fan-out run)")
	waiters := flag.Int("waiters", 200, "agents long-polling on instance 2 for the wake-up run (0: none)")
	rate := flag.Float64("rate", 0, "actions submitted per second (0: deliveries/s ÷ reviewers, 20/s at 1,000 reviewers and 4/s at 5,000)")
	keep := flag.Bool("keep", false, "keep the data dir")
	resultsPath := flag.String("results", "", "append the performance table's figures to this file (JSON lines, see cmd/benchreport)")
	childMode := flag.Bool("reviewer-child", false, "internal: run the reviewers of a parent fanoutbench")
	flag.Parse()
	if *childMode {
		if err := runChild(*reviewers); err != nil {
			fmt.Fprintln(os.Stderr, "fanoutbench reviewers:", err)
			os.Exit(1)
		}
		return
	}
	if *rate <= 0 && *reviewers > 0 {
		*rate = deliveries / float64(*reviewers)
	}
	results := benchtable.NewRecorder(*resultsPath)
	err := run(*duration, *reviewers, *waiters, *rate, *keep, results)
	if ferr := results.Flush(); ferr != nil && err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fanoutbench:", err)
		os.Exit(1)
	}
}

const adminPassword = "bench-admin-password"

// deliveries is the messages per second the fan-out run makes by default
// (actions per second × reviewers): the same load of writes, reads and
// wake-ups at every number of reviewers, so that the latency measured is
// the fan-out's, not a queue's. At 5,000 reviewers and 20 actions/s (100,000
// deliveries/s) this machine is saturated by the reviewers' own reading
// alone (a third of its CPU), and the figure is one of a queue that grows;
// -rate 20 measures that.
const deliveries = 20_000

func run(d time.Duration, n, waiters int, rate float64, keep bool, results *benchtable.Recorder) error {
	dir, err := os.MkdirTemp("", "airlock-fanout-")
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
	// Every reviewer is one user (rita) holding n streams: the per-caller
	// cap (AIRLOCK_MAX_STREAMS) is raised to let it.
	one, err := app.Start(ctx, app.Config{Addr: "127.0.0.1:0", DataDir: dir, AdminPassword: adminPassword, Worker: "off", MaxStreams: n}, log)
	if err != nil {
		return err
	}
	defer one.Shutdown(context.Background())
	// The second instance: same database, same signing key.
	two, err := app.Start(ctx, app.Config{Addr: "127.0.0.1:0", DataDir: dir, DatabaseURL: one.Pool().Config().ConnString(),
		AdminPassword: adminPassword, Worker: "off", MaxStreams: n}, log)
	if err != nil {
		return err
	}
	defer two.Shutdown(context.Background())
	urls := [2]string{one.URL(), two.URL()}

	admin, _, err := client.New(urls[0], "").Login(ctx, "admin", adminPassword)
	if err != nil {
		return err
	}
	if err := admin.CreateUser(ctx, "rita", "rita-bench-password", "reviewer"); err != nil {
		return err
	}
	rita, _, err := client.New(urls[0], "").Login(ctx, "rita", "rita-bench-password")
	if err != nil {
		return err
	}
	fmt.Printf("\nAirlock decision fan-out benchmark — %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Printf("machine: %d CPUs; two server instances on one embedded, durable PostgreSQL\n", runtime.NumCPU())

	if waiters > 0 {
		fmt.Fprintf(os.Stderr, "wake-up: %d agents waiting on instance 2...\n", waiters)
		w, err := runWake(ctx, admin, rita, urls[1], waiters, d)
		if err != nil {
			return fmt.Errorf("wake-up: %w", err)
		}
		l := w.latencies
		fmt.Printf("\n%d agents long-polling on instance 2, a reviewer approving on instance 1 for %s (%d approvals", waiters, d, len(l))
		if w.raced > 0 {
			fmt.Printf("; %d approved before the poll arrived, not counted", w.raced)
		}
		fmt.Printf(")\n%-44s %9s %9s %9s %9s\n", "approve → agent's poll returns", "samples", "p50", "p99", "max")
		fmt.Printf("%-44s %9d %9s %9s %9s\n", "agents on instance 2 (LISTEN/NOTIFY)", len(l), round(pct(l, 0.5)), round(pct(l, 0.99)), round(l[len(l)-1]))
		results.Add("wake.p99", ms(pct(l, 0.99)), int64(waiters), fmt.Sprintf("p50 %.2f ms, %d approvals", ms(pct(l, 0.5)), len(l)))
	}
	if n > 0 {
		if err := runFanout(ctx, admin, rita, urls, d, n, rate, results); err != nil {
			return fmt.Errorf("fan-out: %w", err)
		}
	}
	return nil
}

// runFanout is the console fan-out run with n reviewers.
func runFanout(ctx context.Context, admin, rita *client.Client, urls [2]string, d time.Duration, n int, rate float64, results *benchtable.Recorder) error {
	if err := admin.CreateAgent(ctx, "mailer", "Mailer"); err != nil {
		return err
	}
	if _, err := admin.PutAgentPolicy(ctx, "mailer", map[string]any{"rules": []map[string]any{
		{"id": "ask", "tool": "email.send", "effect": "approve", "timeout": "1h"}}}); err != nil {
		return err
	}
	tok, err := admin.IssueAgentToken(ctx, "mailer", 0)
	if err != nil {
		return err
	}
	agent := client.New(urls[0], tok.Token)

	before, err := measureMemory()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "fan-out: connecting %d reviewers...\n", n)
	revs, err := startChild(n, urls, rita.Token())
	if err != nil {
		return err
	}
	defer revs.kill()
	if err := revs.expect("connected", 5*time.Minute); err != nil {
		return err
	}
	// Warm up until every reviewer is subscribed (has seen a message).
	warmDeadline := time.Now().Add(2 * time.Minute)
	for ready := false; !ready; {
		if _, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"warm-up": true}}); err != nil {
			return err
		}
		select {
		case line := <-revs.lines:
			if line != "ready" {
				return fmt.Errorf("reviewers: said %q, want \"ready\"", line)
			}
			ready = true
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(warmDeadline) {
			return fmt.Errorf("not every reviewer subscribed within 2 minutes")
		}
	}
	// Every reviewer connected, subscribed, and sent a message: what the
	// instances hold for them now.
	after, err := measureMemory()
	if err != nil {
		return err
	}
	if err := revs.send("reset"); err != nil {
		return err
	}
	if err := revs.expect("reset", time.Minute); err != nil {
		return err
	}

	// Submit at a steady rate; the child is told when each submit started.
	submitted := 0
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	next := start
	for time.Since(start) < d {
		time.Sleep(time.Until(next))
		next = next.Add(interval)
		t0 := time.Now()
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send",
			Args: map[string]any{"to": "cfo@example.com", "subject": "Q3 numbers", "n": submitted}})
		if err != nil {
			return err
		}
		if err := revs.send("sub %s %d", a.ID, t0.UnixNano()); err != nil {
			return err
		}
		submitted++
	}
	s, err := revs.finish()
	if err != nil {
		return err
	}

	rss := float64(after.rss-before.rss) / float64(n) / 1024
	gom := float64(after.gom-before.gom) / float64(n) / 1024
	fmt.Printf("\n%d websocket reviewers (%d per instance, in a child process); %d actions submitted to instance 1 at %.0f/s for %s;\n",
		n, n/2, submitted, rate, d)
	fmt.Printf("%d messages received in all\n\n", s.Messages)
	fmt.Printf("%-44s %9s %9s %9s %9s\n", "submit → action.created received", "samples", "p50", "p99", "max")
	for i, name := range []string{"reviewers on instance 1 (same instance)", "reviewers on instance 2 (LISTEN/NOTIFY)", "all reviewers"} {
		fmt.Printf("%-44s %9d %9s %9s %9s\n", name, s.Samples[i], round(s.P50[i]), round(s.P99[i]), round(s.Max[i]))
	}
	fmt.Printf("\nmissing receipts: %d; reviewers disconnected: %d; target p99 ≤ 50ms at 1,000 reviewers, ≤ 200ms at 5,000\n", s.Missing, s.Dropped)
	fmt.Printf("server memory per connection (both instances, before connecting → all connected, after a GC): RSS %+.1f KiB, Go heap + stacks %+.1f KiB\n",
		rss, gom)

	row := "reviewers-1000"
	if n >= 5000 {
		row = "reviewers-5000"
	}
	if s.Samples[2] > 0 {
		results.Add(row+".p99", ms(s.P99[2]), int64(n), fmt.Sprintf("p50 %.2f ms, %s receipts, %g actions/s", ms(s.P50[2]), benchtable.Thousands(int64(s.Samples[2])), rate))
	}
	results.Add(row+".lost", float64(s.Missing+s.Dropped), int64(n), fmt.Sprintf("%d receipts missing, %d reviewers disconnected", s.Missing, s.Dropped))
	results.Add(row+".memory", max(rss, gom), int64(n), fmt.Sprintf("RSS %.1f, Go heap + stacks %.1f KiB", rss, gom))
	if s.Missing > 0 || s.Dropped > 0 {
		return fmt.Errorf("%d receipts missing, %d reviewers disconnected", s.Missing, s.Dropped)
	}
	return nil
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
