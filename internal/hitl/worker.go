package hitl

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/eventbus"
)

// DefaultLeaseTTL is how long a lease lasts without a heartbeat. Workers
// heartbeat at a third of it and stop their run when they cannot renew it.
const DefaultLeaseTTL = 15 * time.Second

// Worker describes a worker host asking for work.
type Worker struct {
	Name    string   `json:"name"`
	Kinds   []string `json:"kinds"`   // built-in tools it runs
	Targets []string `json:"targets"` // "workspace:<name>" and "repo:<name>" it serves
	// TokenID is the worker token the host calls with: it leases only jobs
	// of the targets that token was issued for (whatever Targets claims),
	// and only it may heartbeat or complete the jobs it leased.
	TokenID string `json:"-"`
}

// HeartbeatAnswer is the server's answer to a heartbeat: the lease's new
// end, or Stop when the job's action was stopped (cancelled by a reviewer
// or admin, its agent suspended, its token revoked): the worker must kill
// the run and report nothing.
type HeartbeatAnswer struct {
	Until  time.Time `json:"lease_expires_at,omitzero"`
	Stop   bool      `json:"stop,omitempty"`
	Reason string    `json:"reason,omitempty"`
}

// MaxWorkerTargets bounds the targets of one worker token.
const MaxWorkerTargets = 256

// ValidateTargets checks the targets a worker token is issued for
// ("workspace:NAME" or "repo:NAME", at least one) and returns them sorted
// without duplicates.
func ValidateTargets(targets []string) ([]string, error) {
	if len(targets) == 0 {
		return nil, apperr.Invalid(`targets is required: the workspaces and repositories the worker serves, as "workspace:NAME" or "repo:NAME"`)
	}
	if len(targets) > MaxWorkerTargets {
		return nil, apperr.Invalid("at most %d targets", MaxWorkerTargets)
	}
	seen := map[string]bool{}
	out := make([]string, 0, len(targets))
	for _, t := range targets {
		kind, name, _ := strings.Cut(t, ":")
		if (kind != "workspace" && kind != "repo") || !validName(name) {
			return nil, apperr.Invalid(`target %q must be "workspace:NAME" or "repo:NAME" (NAME: 1-64 letters, digits, . _ -)`, t)
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out, nil
}

// JobResult is what a worker reports for a finished job; it becomes the
// action's result object.
type JobResult struct {
	ExitCode   int    `json:"exit_code"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Truncated  bool   `json:"truncated"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`
	Worktree   string `json:"worktree,omitempty"`
	Branch     string `json:"branch,omitempty"`
	Diff       string `json:"diff,omitempty"`
	Commit     string `json:"commit,omitempty"`
	Base       string `json:"base,omitempty"`
	// Tree is the tree id of the worktree's files an exec's impact
	// preview ran on (its HEAD is Commit): set only by exec.preview jobs.
	Tree string `json:"tree,omitempty"`
}

// Output bounds (the worker keeps the last 50 KiB of each stream).
const (
	maxStreamBytes = 50 << 10
	maxDiffBytes   = 512 << 10
)

// Validate checks a worker's name, kinds and targets.
func (w Worker) Validate() error {
	if !validName(w.Name) {
		return apperr.Invalid("worker name must be 1-64 letters, digits, . _ -")
	}
	if len(w.Kinds) == 0 || len(w.Targets) == 0 {
		return apperr.Invalid("a worker must name the kinds and targets it serves")
	}
	for _, k := range w.Kinds {
		if !IsJobKind(k) {
			return apperr.Invalid("unknown job kind %q", k)
		}
	}
	return nil
}

func (s *Service) leaseTTL() time.Duration {
	if s.leaseFor > 0 {
		return s.leaseFor
	}
	return DefaultLeaseTTL
}

// Lease gives w the oldest job it can run, waiting up to wait for one.
// It returns nil when none came.
func (s *Service) Lease(ctx context.Context, w Worker, wait time.Duration) (*Lease, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	timer := time.NewTimer(min(wait, MaxWait))
	defer timer.Stop()
	for {
		woken, stop := s.bus.WaitAny()
		l, err := s.store.LeaseJob(ctx, w, s.leaseTTL())
		if err != nil || l != nil {
			stop()
			if l != nil {
				if err := s.leasePaths(ctx, l); err != nil {
					return nil, err // the lease expires and the job is leased again
				}
				l.TTLMillis = s.leaseTTL().Milliseconds()
				s.publish(eventbus.Updated, l.ActionID)
			}
			return l, err
		}
		select {
		case <-woken:
		case <-timer.C:
			stop()
			return nil, nil
		case <-ctx.Done():
			stop()
			return nil, nil
		case <-s.draining:
			stop()
			return nil, nil
		}
	}
}

// Heartbeat extends w's lease on job id, or tells w to stop the run.
func (s *Service) Heartbeat(ctx context.Context, w Worker, id string, fence int64) (HeartbeatAnswer, error) {
	return s.store.HeartbeatJob(ctx, id, fence, w, s.leaseTTL())
}

// Complete records the result of job id under w's current lease. For a
// preview job the result becomes the pending action's preview. Only the
// token that leased the job may complete it. Output is scanned for prompt
// injection and a failed run's for permission errors first (jobResultView).
func (s *Service) Complete(ctx context.Context, w Worker, id string, fence int64, r JobResult) (*Action, error) {
	if len(r.Stdout) > maxStreamBytes || len(r.Stderr) > maxStreamBytes || len(r.Diff) > maxDiffBytes {
		return nil, apperr.Invalid("result over its bounds (50 KiB per stream, 512 KiB of diff)")
	}
	if r.Commit != "" && !isCommit(r.Commit) {
		return nil, apperr.Invalid("commit must be a full commit id")
	}
	if r.Tree != "" && (!isCommit(r.Tree) || !isCommit(r.Commit)) {
		return nil, apperr.Invalid("tree must be a full tree id, with the commit it was taken at")
	}
	r.Stdout, r.Stderr, r.Error = audit.RedactString(r.Stdout), audit.RedactString(r.Stderr), audit.RedactString(r.Error)
	view, err := s.jobResultView(ctx, id, r)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(view)
	if err != nil {
		return nil, fmt.Errorf("hitl: encoding result: %w", err)
	}
	to := StatusSucceeded
	if r.Error != "" || r.ExitCode != 0 {
		to = StatusFailed
	}
	preview, err := json.Marshal(previewOf(r))
	if err != nil {
		return nil, fmt.Errorf("hitl: encoding preview: %w", err)
	}
	m, _ := CompleteMove(to)
	a, err := s.store.CompleteJob(ctx, id, fence, w, m, raw, preview)
	if err != nil {
		return nil, err
	}
	s.publish(eventbus.Updated, a.ID)
	if a.Tool == ToolWorktreeRun && a.Status == StatusPending {
		// The command set is read: a set already approved for the
		// repository lets the run go without asking again.
		if a, err = s.approveByCommandSet(ctx, a); err != nil {
			return nil, err
		}
	}
	if s.metrics != nil {
		s.metrics.Finished(a, 0)
	}
	return a, nil
}

// SweepLeases requeues or fails the jobs whose lease ran out.
func (s *Service) SweepLeases(ctx context.Context) (int, error) {
	expired, err := s.store.ExpireLeases(ctx, 100)
	for _, a := range expired {
		s.publish(eventbus.Updated, a.ID)
		if s.metrics != nil && a.Status.Final() {
			s.metrics.Finished(a, 0)
		}
	}
	return len(expired), err
}

func isCommit(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
