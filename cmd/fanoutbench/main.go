// Command fanoutbench measures the console's live fan-out: two server
// instances on one embedded, durable PostgreSQL, 1,000 websocket reviewers
// split over both, and an agent submitting actions that need approval to
// instance one at a steady rate. For every action and every reviewer it
// measures the time from the agent's submit to the reviewer receiving the
// action.created message, and reports p50/p99 per instance and overall.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/app"
)

func main() {
	duration := flag.Duration("duration", 10*time.Second, "how long actions are submitted")
	reviewers := flag.Int("reviewers", 1000, "websocket reviewers, split over the two instances")
	rate := flag.Float64("rate", 20, "actions submitted per second")
	keep := flag.Bool("keep", false, "keep the data dir")
	flag.Parse()
	if err := run(*duration, *reviewers, *rate, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "fanoutbench:", err)
		os.Exit(1)
	}
}

const adminPassword = "bench-admin-password"

// reviewer is one websocket connection; it notes the receipt time of every
// action.created and hands it to the collector after the run.
type reviewer struct {
	inst int
	conn *websocket.Conn
	mu   sync.Mutex
	seen map[string]time.Time
	err  error
}

// createdPrefix starts every action.created message.
var createdPrefix = []byte(`{"type":"action.created","action":{"id":"`)

func (r *reviewer) read(ctx context.Context, count *atomic.Int64) {
	for {
		_, data, err := r.conn.Read(ctx)
		at := time.Now()
		if err != nil {
			r.mu.Lock()
			r.err = err
			r.mu.Unlock()
			return
		}
		count.Add(1)
		// The action's id is its first field: no need to decode the rest.
		if bytes.HasPrefix(data, createdPrefix) && len(data) >= len(createdPrefix)+36 {
			id := string(data[len(createdPrefix) : len(createdPrefix)+36])
			r.mu.Lock()
			r.seen[id] = at
			r.mu.Unlock()
		}
	}
}

func run(d time.Duration, n int, rate float64, keep bool) error {
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
	one, err := app.Start(ctx, app.Config{Addr: "127.0.0.1:0", DataDir: dir, AdminPassword: adminPassword, Worker: "off"}, log)
	if err != nil {
		return err
	}
	defer one.Shutdown(context.Background())
	// The second instance: same database, same signing key.
	two, err := app.Start(ctx, app.Config{Addr: "127.0.0.1:0", DataDir: dir, DatabaseURL: one.Pool().Config().ConnString(),
		AdminPassword: adminPassword, Worker: "off"}, log)
	if err != nil {
		return err
	}
	defer two.Shutdown(context.Background())
	urls := [2]string{one.URL(), two.URL()}

	admin, _, err := client.New(urls[0], "").Login(ctx, "admin", adminPassword)
	if err != nil {
		return err
	}
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
	if err := admin.CreateUser(ctx, "rita", "rita-bench-password", "reviewer"); err != nil {
		return err
	}
	rita, _, err := client.New(urls[0], "").Login(ctx, "rita", "rita-bench-password")
	if err != nil {
		return err
	}

	// Connect the reviewers, alternating instances.
	var messages atomic.Int64
	revs := make([]*reviewer, n)
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	var readers sync.WaitGroup
	for i := range revs {
		inst := i % 2
		conn, _, err := websocket.Dial(ctx, "ws"+urls[inst][len("http"):]+"/api/v1/stream",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + rita.Token()}}})
		if err != nil {
			return fmt.Errorf("reviewer %d: %w", i, err)
		}
		conn.SetReadLimit(1 << 20)
		revs[i] = &reviewer{inst: inst, conn: conn, seen: map[string]time.Time{}}
		readers.Add(1)
		go func() { defer readers.Done(); revs[i].read(readCtx, &messages) }()
	}
	defer func() {
		for _, r := range revs {
			r.conn.CloseNow()
		}
		stopReading()
		readers.Wait()
	}()

	// Warm up until every reviewer is subscribed (has seen a message).
	warmDeadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"warm-up": true}}); err != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
		ready := 0
		for _, r := range revs {
			r.mu.Lock()
			if len(r.seen) > 0 {
				ready++
			}
			r.mu.Unlock()
		}
		if ready == n {
			break
		}
		if time.Now().After(warmDeadline) {
			return fmt.Errorf("only %d of %d reviewers subscribed", ready, n)
		}
	}
	for _, r := range revs {
		r.mu.Lock()
		clear(r.seen)
		r.mu.Unlock()
	}

	// Submit at a steady rate; record when each submit started.
	submitted := map[string]time.Time{}
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	next := start
	for time.Since(start) < d {
		time.Sleep(time.Until(next))
		next = next.Add(interval)
		t0 := time.Now()
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send",
			Args: map[string]any{"to": "cfo@example.com", "subject": "Q3 numbers", "n": len(submitted)}})
		if err != nil {
			return err
		}
		submitted[a.ID] = t0
	}
	// Let the last messages arrive.
	settle := time.Now().Add(10 * time.Second)
	for time.Now().Before(settle) {
		done := true
		for _, r := range revs {
			r.mu.Lock()
			if len(r.seen) < len(submitted) {
				done = false
			}
			r.mu.Unlock()
			if !done {
				break
			}
		}
		if done {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	var all []time.Duration
	per := [2][]time.Duration{}
	missing, dropped := 0, 0
	for _, r := range revs {
		r.mu.Lock()
		for id, t0 := range submitted {
			at, ok := r.seen[id]
			if !ok {
				missing++
				continue
			}
			lat := at.Sub(t0)
			all = append(all, lat)
			per[r.inst] = append(per[r.inst], lat)
		}
		if r.err != nil {
			dropped++
		}
		r.mu.Unlock()
	}
	slices.Sort(all)
	slices.Sort(per[0])
	slices.Sort(per[1])

	fmt.Printf("\nAirlock console fan-out benchmark — %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Printf("machine: %d CPUs; two server instances on one embedded, durable PostgreSQL; %d websocket reviewers (%d per instance);\n",
		runtime.NumCPU(), n, n/2)
	fmt.Printf("%d actions submitted to instance 1 at %.0f/s for %s; %d messages received in all\n\n", len(submitted), rate, d, messages.Load())
	fmt.Printf("%-44s %9s %9s %9s %9s\n", "submit → action.created received", "samples", "p50", "p99", "max")
	row := func(name string, l []time.Duration) {
		if len(l) == 0 {
			fmt.Printf("%-44s %9d\n", name, 0)
			return
		}
		fmt.Printf("%-44s %9d %9s %9s %9s\n", name, len(l), pct(l, 0.50), pct(l, 0.99), l[len(l)-1].Round(100*time.Microsecond))
	}
	row("reviewers on instance 1 (same instance)", per[0])
	row("reviewers on instance 2 (LISTEN/NOTIFY)", per[1])
	row("all reviewers", all)
	fmt.Printf("\nmissing receipts: %d; reviewers disconnected: %d; target p99 ≤ 250ms\n", missing, dropped)
	if missing > 0 || dropped > 0 {
		return fmt.Errorf("%d receipts missing, %d reviewers disconnected", missing, dropped)
	}
	return nil
}

func pct(l []time.Duration, p float64) time.Duration {
	return l[min(len(l)-1, int(float64(len(l))*p))].Round(100 * time.Microsecond)
}
