// Package worker is the worker host: it leases approved built-in actions
// (exec, worktree.*) from an Airlock server over HTTP, runs each in a
// sandbox while heartbeating its lease, and reports the result. A run whose
// lease cannot be renewed is stopped before the lease runs out, so a job
// retried elsewhere never runs twice at once.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock/client"
)

// Executor runs one job and returns its result. It must stop when ctx ends
// (the lease is lost) and must fail closed: no sandbox, no run.
type Executor interface {
	Kinds() []string
	Run(ctx context.Context, job *client.Job) client.JobResult
}

// Config configures a worker host.
type Config struct {
	Client     *client.Client // authenticated with a worker token
	Workspaces map[string]string
	Repos      map[string]string
	Executor   Executor
	Logger     *slog.Logger
	// LeaseWait is how long one lease request long-polls (default 30s).
	LeaseWait time.Duration
	// Concurrency is how many jobs run at once (default
	// DefaultConcurrency): one long job does not hold up the others.
	Concurrency int
}

// DefaultConcurrency is how many jobs a worker host runs at once unless
// told otherwise (AIRLOCK_WORKER_CONCURRENCY).
const DefaultConcurrency = 2

// Worker is a running worker host.
type Worker struct {
	cfg     Config
	log     *slog.Logger
	targets []string
}

// New returns a worker for cfg.
func New(cfg Config) (*Worker, error) {
	if cfg.Client == nil || cfg.Executor == nil {
		return nil, errors.New("worker: client and executor are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LeaseWait <= 0 {
		cfg.LeaseWait = 30 * time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	targets := TargetsOf(cfg.Workspaces, cfg.Repos)
	if len(targets) == 0 {
		return nil, errors.New("worker: no workspaces or repositories configured (AIRLOCK_WORKSPACES, AIRLOCK_REPOS)")
	}
	return &Worker{cfg: cfg, log: cfg.Logger, targets: targets}, nil
}

// TargetsOf returns the targets a worker with these workspaces and
// repositories serves, sorted.
func TargetsOf(workspaces, repos map[string]string) []string {
	var targets []string
	for name := range workspaces {
		targets = append(targets, "workspace:"+name)
	}
	for name := range repos {
		targets = append(targets, "repo:"+name)
	}
	sort.Strings(targets)
	return targets
}

// ParseDirs parses "name=/path,name2=/path2" (AIRLOCK_WORKSPACES,
// AIRLOCK_REPOS).
func ParseDirs(s string) (map[string]string, error) {
	out := map[string]string{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, path, ok := strings.Cut(item, "=")
		if !ok || name == "" || !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("worker: %q is not name=/absolute/path", item)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("worker: %q named twice", name)
		}
		out[name] = path
	}
	return out, nil
}

// Run leases and runs jobs, up to Config.Concurrency at once, until ctx
// ends; it returns once every job it started has ended. It leases only
// while a slot is free, so no job waits on this host behind another.
func (w *Worker) Run(ctx context.Context) {
	slots := make(chan struct{}, w.cfg.Concurrency)
	var running sync.WaitGroup
	defer running.Wait()
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		job, err := w.cfg.Client.Lease(ctx, w.cfg.Executor.Kinds(), w.targets, w.cfg.LeaseWait)
		if err != nil || job == nil {
			<-slots
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.log.Warn("lease failed", "err", err, "retry_in", backoff)
			sleep(ctx, backoff)
			backoff = min(backoff*2, 10*time.Second)
			continue
		}
		backoff = 200 * time.Millisecond
		if job != nil {
			running.Add(1)
			go func() {
				defer func() { <-slots; running.Done() }()
				w.runJob(ctx, job)
			}()
		}
	}
}

// runJob runs one job under its lease and reports the result.
func (w *Worker) runJob(ctx context.Context, job *client.Job) {
	log := w.log.With("job", job.ID, "kind", job.Kind, "attempt", job.Attempt)
	log.Info("job leased")
	if job.TTLMillis <= 0 {
		log.Error("lease without a length; not running it")
		return
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	lost := make(chan string, 1)
	go w.heartbeat(runCtx, job, cancel, lost)

	result := w.cfg.Executor.Run(runCtx, job)
	select {
	case why := <-lost:
		// The run was killed (its process group with it) when the lease
		// was lost or the server said stop.
		log.Warn("run stopped; the result is not reported", "why", why)
		return
	default:
	}
	// Report until it lands or the lease is gone. The command is never run
	// again by this worker, whatever happens here.
	replaced := false
	for attempt := 0; ; attempt++ {
		_, err := w.cfg.Client.Complete(context.WithoutCancel(ctx), job.ID, job.Fence, result)
		if err == nil {
			log.Info("job completed", "exit_code", result.ExitCode, "error", result.Error)
			return
		}
		s := client.StatusOf(err)
		if resultRefused(s) && !replaced {
			// The server will never take this result. Left unreported,
			// the job would wait out its lease and fail as "interrupted",
			// or run again if retryable: report the failure instead.
			log.Warn("result refused; reporting the run as failed", "err", err)
			result, replaced = refusalReport(result, err), true
			continue
		}
		if s == http.StatusConflict || s == http.StatusNotFound || resultRefused(s) {
			log.Warn("result refused", "err", err)
			return
		}
		if attempt > 120 || ctx.Err() != nil {
			log.Error("could not report the result", "err", err)
			return
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// resultRefused reports whether a completion answered with status was
// refused for the result it carried (malformed, over the server's bounds,
// a body too large), so sending it again cannot help.
func resultRefused(status int) bool {
	return status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge
}

// maxRefusal bounds the error of a refusal report.
const maxRefusal = 1 << 10

// refusalReport is what a worker reports in place of result once the
// server refused it (err): the run's exit code and duration, no output,
// and an error saying why the output is missing, so the action ends
// failed with that reason.
func refusalReport(result client.JobResult, err error) client.JobResult {
	why := err.Error()
	var ce *client.Error
	if errors.As(err, &ce) {
		why = ce.Message
	}
	msg := "the server refused the result (" + why + "): the output is not recorded"
	if result.Error != "" {
		msg = result.Error + "; " + msg
	}
	if len(msg) > maxRefusal {
		n := maxRefusal
		for n > 0 && !utf8.RuneStart(msg[n]) {
			n--
		}
		msg = msg[:n] + "…"
	}
	return client.JobResult{
		ExitCode: result.ExitCode, DurationMS: result.DurationMS, Error: visibleText(msg),
		Truncated: result.Truncated || result.Stdout != "" || result.Stderr != "" || result.Diff != "",
	}
}

// heartbeat renews the lease at a third of its length. If it cannot renew
// before the lease would run out, or the server answers that the job's
// action was stopped, it cancels the run (which kills its process group)
// and says why on lost.
func (w *Worker) heartbeat(ctx context.Context, job *client.Job, cancel context.CancelFunc, lost chan<- string) {
	// Deadlines on this host's clock: the server's may differ.
	ttl := time.Duration(job.TTLMillis) * time.Millisecond
	until := time.Now().Add(ttl)
	interval := max(ttl/3, 50*time.Millisecond)
	t := time.NewTicker(interval)
	defer t.Stop()
	stop := func(why string) {
		lost <- why
		cancel()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		// A heartbeat the server never answers (a hung proxy, dropped
		// packets) gives up while there is still time to stop the run
		// before the lease runs out: the check below then stops it.
		hbCtx, hbDone := context.WithDeadline(ctx, until.Add(-interval/2))
		ans, err := w.cfg.Client.Heartbeat(hbCtx, job.ID, job.Fence)
		hbDone()
		switch {
		case err == nil && ans.Stop:
			stop("stopped by the server: " + ans.Reason)
			return
		case err == nil:
			until = sent.Add(ttl)
		case client.StatusOf(err) == http.StatusConflict || client.StatusOf(err) == http.StatusNotFound:
			stop("lease lost: " + err.Error())
			return
		case time.Until(until) < interval:
			// Cannot reach the server and the lease is about to run out:
			// stop now, before another worker may take the job over.
			stop("lease about to run out unrenewed")
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
