package hitl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/eventbus"
	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/risk"
)

// maxAttempts bounds compare-and-set retries of one request. Each retry
// means another request changed the action in between; only quorum
// approvals retry more than once in practice.
const maxAttempts = 32

// change is what a mutation decided to write.
type change struct {
	fx     Effects
	events []audit.Event
	// decided marks a human or timeout decision, for the latency metric.
	decided bool
}

// mutate reads the action, lets fn change it, and writes it back with a
// compare-and-set on its version, retrying when another writer got there
// first. A pending action past its expiry is expired before fn sees it, so
// a late approval can only ever find it expired.
func (s *Service) mutate(ctx context.Context, id string, fn func(a *Action, now time.Time) (*change, error)) (*Action, error) {
	lastVersion := -1
	for range maxAttempts {
		a, err := s.store.Action(ctx, id)
		if err != nil {
			return nil, err
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		// Unchanged and still pending after a lost compare-and-set: the
		// database clock says it has expired even if ours does not yet.
		if a.Expired(now) || (a.Version == lastVersion && a.Status == StatusPending) {
			if err := s.expire(ctx, a, now); err != nil && !errors.Is(err, ErrStale) {
				return nil, err
			}
			lastVersion = -1
			continue
		}
		lastVersion = a.Version
		prev, prevStatus := a.Version, a.Status
		ch, err := fn(a, now)
		if err != nil {
			return nil, err
		}
		if err := checkTransition(prevStatus, a.Status); err != nil {
			return nil, err
		}
		if prevStatus == StatusPending && a.Status == StatusApproved {
			// Every way into approved (a reviewer's quorum, an approved
			// command set) fits under the budgets whose effect is deny:
			// the store refuses it otherwise (hardBudgets).
			if ch.fx.Budgets, err = s.hardBudgets(ctx, a); err != nil {
				return nil, err
			}
		}
		ch.fx.Decided = prevStatus == StatusPending && a.Status != StatusPending
		a.Version++
		a.UpdatedAt = now
		err = s.store.UpdateAction(ctx, a, prev, ch.fx, ch.events...)
		if errors.Is(err, ErrStale) {
			continue
		}
		if over := (*BudgetExceededError)(nil); errors.As(err, &over) {
			return nil, overHardBudget(a.ID, ch.fx.Budgets, over.Spent)
		}
		if errors.Is(err, ErrPolicyMoved) {
			lastVersion = -1 // the action did not change: no sign of expiry
			continue
		}
		if err != nil {
			return nil, err
		}
		s.publish(eventbus.Updated, a.ID)
		if s.metrics != nil && (ch.decided || a.Status.Final()) {
			var latency time.Duration
			if ch.decided {
				latency = now.Sub(a.CreatedAt)
			}
			s.metrics.Finished(a, latency)
		}
		return a, nil
	}
	return nil, apperr.Conflict("action %s kept changing; try again", id)
}

// expire moves one pending action past its time to expired.
func (s *Service) expire(ctx context.Context, a *Action, now time.Time) error {
	prev := a.Version
	stop := previewStop(a, "expired") // impact.go
	a.Status = StatusExpired
	a.Version++
	a.UpdatedAt = now
	ev := a.AuditEvent(audit.KindActionExpired, "system", map[string]any{"expires_at": a.ExpiresAt})
	if err := s.store.UpdateAction(ctx, a, prev, Effects{Stop: stop, Decided: true}, ev); err != nil {
		return err
	}
	s.publish(eventbus.Updated, a.ID)
	if s.metrics != nil {
		s.metrics.Finished(a, now.Sub(a.CreatedAt))
	}
	return nil
}

func notPending(a *Action) error {
	return apperr.Conflict("action %s is already %s", a.ID, a.Status)
}

// ApproveRequest is a reviewer's approval.
type ApproveRequest struct {
	Confirmation string `json:"confirmation"`
	Scope        Scope  `json:"scope,omitempty"`
	Comment      string `json:"comment,omitempty"`

	// Shown, when set, names the preview (ShownPin, the action's
	// preview_sha256; "" for none) the reviewer was shown: the approval is
	// refused if the action's preview is now another, so that a page or a
	// terminal that showed the action while a merge's diff, an exec's
	// impact or a run's command set was being prepared (or prepared again)
	// cannot approve what it never showed. The console and the CLI set it;
	// an API client that leaves it out approves whatever the preview is.
	Shown *string `json:"preview_sha256,omitempty"`

	// batch is the batch the approval is part of ("" for none): its
	// audit events name it (ApproveBatch).
	batch string
}

// Approve records reviewer's approval of a pending action. The typed
// confirmation must be the action's phrase and the scope one ScopeProblem
// allows. Only the approval that completes the quorum makes the action
// approved, and only then does the scope take effect (a grant, a policy
// change), in the same transaction: the narrowest scope the reviewers
// chose. A partial approval that is then denied or expires leaves nothing.
func (s *Service) Approve(ctx context.Context, id, reviewer string, req ApproveRequest) (*Action, error) {
	if req.Scope == "" {
		req.Scope = ScopeOnce
	}
	if !req.Scope.Valid() {
		return nil, apperr.Invalid("scope must be once, conversation or always")
	}
	if len(req.Comment) > maxReasonLen {
		return nil, apperr.Invalid("comment is longer than %d bytes", maxReasonLen)
	}
	if err := s.phraseCoolingOff(ctx, id, reviewer); err != nil {
		return nil, err
	}
	a, err := s.mutate(ctx, id, func(a *Action, now time.Time) (*change, error) {
		if a.Status != StatusPending {
			return nil, notPending(a)
		}
		if !PhraseMatches(a.Phrase, req.Confirmation) {
			return nil, errWrongPhrase
		}
		if a.ApprovedBy(reviewer) {
			return nil, apperr.Conflict("%s has already approved action %s; another reviewer must approve", reviewer, a.ID)
		}
		if err := s.checkDuties(ctx, a, reviewer); err != nil {
			return nil, err
		}
		if why := ScopeProblem(a, req.Scope); why != "" {
			return nil, apperr.Validation("%s", why)
		}
		if req.batch != "" {
			if e := notBatchable(a); e != nil {
				return nil, e
			}
		}
		pin, err := mergePin(a)
		if err != nil {
			return nil, err
		}
		state, err := execPin(a) // impact.go: the worktree state the preview ran on
		if err != nil {
			return nil, err
		}
		files, err := fsPin(a)
		if err != nil {
			return nil, err
		}
		if req.Shown != nil && *req.Shown != ShownPin(a) {
			return nil, apperr.Conflict("the preview of action %s is not the one the reviewer was shown (it was being prepared, or was prepared again): review it again before approving", a.ID)
		}
		var commands *CommandSetApproval
		if a.Tool == ToolWorktreeRun {
			if pin, commands, err = runPin(a, reviewer, now); err != nil {
				return nil, err
			}
		}
		// While plan mode is on, nothing that is not a read is approved,
		// not even towards a quorum: the store refuses it (ErrPlanMode).
		ch := &change{fx: Effects{NotInPlanMode: !IsRead(a.Tool, a.Args)}}
		a.Approvals = append(a.Approvals, Approval{By: reviewer, At: now, Scope: req.Scope, Comment: req.Comment})
		data := map[string]any{"scope": req.Scope, "comment": req.Comment, "approvals": len(a.Approvals), "required_approvals": a.RequiredApprovals}
		if req.batch != "" {
			data["batch_id"] = req.batch
		}
		if len(a.Approvals) < a.RequiredApprovals {
			if req.Scope == ScopeAlways {
				// Checked now so the reviewer hears at once, not when the
				// quorum completes, that the policy cannot take it.
				if _, err := s.alwaysPolicy(ctx, a); err != nil {
					return nil, err
				}
			}
			ch.events = append(ch.events, a.AuditEvent(audit.KindActionApproval, reviewer, data))
			return ch, nil
		}
		scope := a.EffectiveScope()
		if err := s.applyScope(ctx, a, scope, reviewer, now, ch); err != nil {
			return nil, err
		}
		a.Status = StatusApproved
		a.Decision = Decision{Effect: string(policy.Allow), By: reviewer, RuleID: a.Decision.RuleID,
			PolicyVersion: a.Decision.PolicyVersion, Source: a.Decision.Source, Reason: req.Comment, Rules: a.Decision.Rules}
		by := make([]string, len(a.Approvals))
		for i, ap := range a.Approvals {
			by[i] = ap.By
		}
		data["approved_by"] = by
		data["effective_scope"] = scope
		ch.decided = true
		ch.fx.Job = JobFor(a)
		if commands != nil {
			// The reviewer saw every command: the command set is approved
			// for the repository, in this transaction.
			ch.fx.CommandSet = commands
			ch.events = append(ch.events, commandSetEvent(a, commands))
			data["commands_hash"] = commands.Hash
		}
		if pin != "" {
			ch.fx.Job.Pin = pin // the base branch gets exactly the commit the reviewer saw
			data["commit"] = pin
		}
		if state != "" {
			ch.fx.Job.Pin = state // the command runs only on the worktree the reviewer saw it change
			data["preview_state"] = state
		}
		if files != "" {
			ch.fx.Job.Pin = files // the write or patch runs only on the files the reviewer saw its diff against
			data["preview_state"] = files
		}
		ch.events = append([]audit.Event{a.AuditEvent(audit.KindActionApproved, reviewer, data)}, ch.events...)
		return ch, nil
	})
	if errors.Is(err, errWrongPhrase) {
		return nil, s.wrongPhrase(ctx, id, reviewer)
	}
	if errors.Is(err, ErrPlanMode) {
		return nil, planModeConflict(id)
	}
	return a, err
}

// Bounds on guessing a confirmation phrase: after MaxWrongPhrases wrong
// phrases for one action, a reviewer's approvals of it are refused until
// PhraseCoolOff has passed since the last one. Every wrong phrase is
// audited.
const (
	MaxWrongPhrases = 5
	PhraseCoolOff   = 15 * time.Minute
)

var errWrongPhrase = &apperr.Error{Code: apperr.CodeWrongPhrase, Message: "the confirmation does not match this action's phrase"}

// phraseCoolingOff refuses reviewer's approval while they are cooling off
// after too many wrong phrases for the action.
func (s *Service) phraseCoolingOff(ctx context.Context, id, reviewer string) error {
	n, last, err := s.store.PhraseFailures(ctx, id, reviewer)
	if err != nil {
		return err
	}
	if wait := last.Add(PhraseCoolOff).Sub(s.now()); n >= MaxWrongPhrases && wait > 0 {
		return apperr.RateLimited(wait, "%d wrong confirmations for action %s; %s may try again in %s",
			n, id, reviewer, wait.Round(time.Second))
	}
	return nil
}

// wrongPhrase records and audits a wrong phrase and answers it.
func (s *Service) wrongPhrase(ctx context.Context, id, reviewer string) error {
	a, err := s.store.Action(ctx, id)
	if err != nil {
		return err
	}
	now := s.now().UTC()
	n, err := s.store.RecordPhraseFailure(ctx, a.ID, reviewer, now, func(n int) audit.Event {
		return a.AuditEvent(audit.KindPhraseRefused, reviewer, map[string]any{"failures": n, "max": MaxWrongPhrases})
	})
	if err != nil {
		return err
	}
	if n >= MaxWrongPhrases {
		return &apperr.Error{Code: apperr.CodeWrongPhrase, Message: fmt.Sprintf(
			"the confirmation does not match this action's phrase; that was the last of %d tries: %s may approve it again in %s",
			MaxWrongPhrases, reviewer, PhraseCoolOff)}
	}
	return &apperr.Error{Code: apperr.CodeWrongPhrase,
		Message: fmt.Sprintf("the confirmation does not match this action's phrase (%d of %d tries)", n, MaxWrongPhrases)}
}

// ShownPin names the preview of a as a page showing a shows it (a merge's
// diff, an exec's impact, a worktree.run's command set, whatever the
// preview holds): a digest of the whole preview, "" for none
// (ApproveRequest.Shown). Any change to the preview changes it.
func ShownPin(a *Action) string {
	if len(a.Preview) == 0 {
		return ""
	}
	sum := sha256.Sum256(a.Preview)
	return hex.EncodeToString(sum[:])
}

// mergePin returns the commit a merge approval pins: the one in the
// preview the reviewer saw. Without a ready preview a merge cannot be
// approved.
func mergePin(a *Action) (string, error) {
	if a.Tool != ToolWorktreeMerge {
		return "", nil
	}
	var p Preview
	if len(a.Preview) == 0 || json.Unmarshal(a.Preview, &p) != nil {
		return "", apperr.Conflict("the merge preview is not ready yet; a reviewer must see the diff before approving")
	}
	if p.Error != "" || !isCommit(p.Commit) {
		return "", apperr.Conflict("the merge preview failed (%s); deny this merge", p.Error)
	}
	return p.Commit, nil
}

// fsPin returns the state of the files an fs.write or fs.patch approval
// pins: the digest (preview.commit, 64 hex) of the files it touches as
// the worker read them for the preview, whose diff the reviewer saw. The
// worker refuses the run when they are no longer in it. "" for any other
// tool. Without a ready preview an fs.write or fs.patch cannot be
// approved: while it is being prepared (409, approve once it is shown), and
// when it failed (the patch does not apply, a path is refused) or names
// no state (prepared by an older worker) it can only be denied.
func fsPin(a *Action) (string, error) {
	if a.Tool != ToolFSWrite && a.Tool != ToolFSPatch {
		return "", nil
	}
	var p Preview
	if len(a.Preview) == 0 || json.Unmarshal(a.Preview, &p) != nil {
		return "", apperr.Conflict("the preview of this %s is not ready yet; a reviewer must see the diff against the files as they are before approving", a.Tool)
	}
	if p.Error != "" {
		return "", apperr.Conflict("the preview of this %s failed (%s); it can only be denied: the agent may submit it again", a.Tool, p.Error)
	}
	if len(p.Commit) != 64 || !isCommit(p.Commit) {
		return "", apperr.Conflict("the preview of this %s names no state of the files it was made against (a worker older than this server prepared it); deny it: the agent may submit it again", a.Tool)
	}
	return p.Commit, nil
}

// applyScope prepares the side effect of the scope an action is approved
// with, for the transaction that approves it.
func (s *Service) applyScope(ctx context.Context, a *Action, scope Scope, reviewer string, now time.Time, ch *change) error {
	if why := ScopeProblem(a, scope); why != "" {
		return apperr.Validation("%s", why)
	}
	switch scope {
	case ScopeConversation:
		g := &Grant{ID: uuid.Must(uuid.NewV7()).String(), GrantKey: GrantKeyOf(a), ActionID: a.ID,
			GrantedBy: reviewer, CreatedAt: now, ExpiresAt: now.Add(ConversationGrantTTL)}
		ch.fx.Grant = g
		ch.events = append(ch.events, a.AuditEvent(audit.KindGrantCreated, reviewer, g.auditData()))
	case ScopeAlways:
		pc, err := s.alwaysPolicy(ctx, a)
		if err != nil {
			return err
		}
		ch.fx.Policy = pc
	}
	return nil
}

// DenyRequest is a reviewer's denial.
type DenyRequest struct {
	Reason string `json:"reason"`
}

// Deny denies a pending action.
func (s *Service) Deny(ctx context.Context, id, reviewer string, req DenyRequest) (*Action, error) {
	if len(req.Reason) > maxReasonLen {
		return nil, apperr.Invalid("reason is longer than %d bytes", maxReasonLen)
	}
	return s.mutate(ctx, id, func(a *Action, now time.Time) (*change, error) {
		if a.Status != StatusPending {
			return nil, notPending(a)
		}
		stop := previewStop(a, "denied by "+reviewer) // impact.go
		a.Status = StatusDenied
		a.Decision = Decision{Effect: string(policy.Deny), By: reviewer, RuleID: a.Decision.RuleID,
			PolicyVersion: a.Decision.PolicyVersion, Source: a.Decision.Source, Reason: req.Reason, Rules: a.Decision.Rules}
		return &change{decided: true, fx: Effects{Stop: stop},
			events: []audit.Event{a.AuditEvent(audit.KindActionDenied, reviewer, map[string]any{"reason": req.Reason})}}, nil
	})
}

// Cancel withdraws an agent's own pending action.
func (s *Service) Cancel(ctx context.Context, id, agentID string) (*Action, error) {
	return s.mutate(ctx, id, func(a *Action, now time.Time) (*change, error) {
		if a.AgentID != agentID {
			return nil, apperr.NotFound("no action %s", id)
		}
		if a.Status != StatusPending {
			return nil, notPending(a)
		}
		stop := previewStop(a, "cancelled by the agent") // impact.go
		a.Status = StatusCancelled
		return &change{fx: Effects{Stop: stop}, events: []audit.Event{a.AuditEvent(audit.KindActionCancelled, "agent:"+agentID, nil)}}, nil
	})
}

// ResultRequest is an executor's report of how an approved action went.
type ResultRequest struct {
	Outcome string          `json:"outcome"`
	Output  json.RawMessage `json:"output,omitempty"`
	Error   string          `json:"error,omitempty"`
	// Scanned, set only in process (never decoded), carries Findings:
	// what risk.ScanResult found in exactly Output and Error, for a caller
	// that already ran it (the MCP gateway), so it does not run twice.
	Scanned  bool     `json:"-"`
	Findings []string `json:"-"`
}

// Result records the outcome an agent reports for its own approved action.
// The strings of the output and the error (the first risk.MaxResultScanBytes)
// are scanned for prompt injection first; on a hit the stored result and
// its action.result audit event get "injection" (a ResultInjection), graded
// under the agent's effective result_injection_thresholds and
// result_injection_action (nothing below caution). At refuse the output
// and the error are not kept at all, so that reviewers do not read the
// injected text either; the findings say what it was. The MCP proxy and
// gateway read the verdict from the returned action (mcp.InjectionVerdict)
// to decide what the model gets.
func (s *Service) Result(ctx context.Context, id, agentID string, req ResultRequest) (*Action, error) {
	var to Status
	switch req.Outcome {
	case "succeeded":
		to = StatusSucceeded
	case "failed":
		to = StatusFailed
	default:
		return nil, apperr.Invalid(`outcome must be "succeeded" or "failed"`)
	}
	if len(req.Error) > 64<<10 {
		return nil, apperr.Invalid("error is longer than 64 KiB")
	}
	result := map[string]any{"error": audit.RedactString(req.Error)}
	var out any
	if len(req.Output) > 0 {
		// Numbers as sent (json.Number), as args are kept: through
		// float64 a transaction id 12345678901234567890 would be recorded
		// as …567000.
		dec := json.NewDecoder(bytes.NewReader(req.Output))
		dec.UseNumber()
		if err := dec.Decode(&out); err != nil {
			return nil, apperr.Invalid("output is not valid JSON")
		}
		result["output"] = audit.Redact(map[string]any{"v": out})["v"]
	}
	if req.Error == "" {
		delete(result, "error")
	}
	findings := req.Findings
	if !req.Scanned {
		findings = risk.ScanResult(out, req.Error)
	}
	inj, err := s.gradeInjection(ctx, agentID, findings)
	if err != nil {
		return nil, err
	}
	if inj != nil {
		if inj.Withheld() {
			delete(result, "output")
			delete(result, "error")
		}
		result["injection"] = inj
	}
	raw, err := json.Marshal(result)
	if err != nil {
		return nil, fmt.Errorf("hitl: encoding result: %w", err)
	}
	return s.mutate(ctx, id, func(a *Action, now time.Time) (*change, error) {
		if a.AgentID != agentID {
			return nil, apperr.NotFound("no action %s", id)
		}
		if IsBuiltin(a.Tool) {
			return nil, apperr.Conflict("action %s runs on a worker host; its result comes from the worker", a.ID)
		}
		if !CanTransition(a.Status, to) || a.Status == StatusRunning {
			return nil, apperr.Conflict("action %s is %s; a result can only be reported for an approved action", a.ID, a.Status)
		}
		a.Status = to
		a.Result = raw
		return &change{events: []audit.Event{a.AuditEvent(audit.KindActionResult, "agent:"+agentID, map[string]any{"outcome": req.Outcome, "result": result})}}, nil
	})
}

// Get returns an action.
func (s *Service) Get(ctx context.Context, id string) (*Action, error) {
	return s.store.Action(ctx, id)
}

// MaxWait bounds a long poll.
const MaxWait = 60 * time.Second

// Wait returns the action as soon as it is no longer pending, or as it is
// after d. check runs on the first read (access control) and its error is
// returned as is. Waiting costs no database reads: it is woken by the bus.
func (s *Service) Wait(ctx context.Context, id string, d time.Duration, check func(*Action) error) (*Action, error) {
	d = min(d, MaxWait)
	timer := time.NewTimer(d)
	defer timer.Stop()
	for first := true; ; first = false {
		woken, stop := s.bus.Wait(id)
		a, err := s.store.Action(ctx, id)
		if err == nil && first && check != nil {
			err = check(a)
		}
		if err != nil || a.Status != StatusPending || d <= 0 {
			stop()
			return a, err
		}
		select {
		case <-woken:
			continue
		case <-timer.C:
			stop()
			return a, nil
		case <-ctx.Done():
			stop()
			return a, nil
		case <-s.draining:
			stop()
			return a, nil
		}
	}
}

// List returns a page of actions.
func (s *Service) List(ctx context.Context, f ListFilter) ([]*Action, string, error) {
	if f.Status != "" {
		for _, st := range strings.Split(string(f.Status), ",") {
			if st := Status(strings.TrimSpace(st)); !slices.Contains(f.Statuses, st) {
				f.Statuses = append(f.Statuses, st)
			}
		}
		f.Status = ""
	}
	for _, st := range f.Statuses {
		if !st.Valid() {
			return nil, "", apperr.Invalid("unknown status %q", st)
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return nil, "", apperr.Invalid("since must be before until")
	}
	if f.Risk != "" {
		if _, ok := risk.ParseLevel(f.Risk); !ok {
			return nil, "", apperr.Invalid("unknown risk level %q", f.Risk)
		}
	}
	if f.Tool != "" {
		tool, err := CanonicalToolName(f.Tool)
		if err != nil {
			return nil, "", err
		}
		f.Tool = tool
	}
	if f.Limit <= 0 {
		f.Limit = 50
	}
	if f.Limit > 500 {
		return nil, "", apperr.Invalid("limit must be at most 500")
	}
	if f.CanApprove == "" {
		return s.store.ListActions(ctx, f)
	}
	// Actions the reviewer may approve: pending ones the store preselects
	// (inside the rule's groups, not yet approved by them), then the whole
	// rule (ApprovalProblem). A page may come out shorter than the limit;
	// its cursor still continues after it.
	if len(f.Statuses) > 1 || (len(f.Statuses) == 1 && f.Statuses[0] != StatusPending) {
		return nil, "", apperr.Invalid("can_approve lists pending actions only; leave status out or set it to pending")
	}
	f.Statuses = []Status{StatusPending}
	list, next, err := s.store.ListActions(ctx, f)
	if err != nil {
		return nil, "", err
	}
	sod := map[string]bool{}
	out := list[:0]
	for _, a := range list {
		why, err := s.approvalProblem(ctx, a, f.CanApprove, sod)
		if err != nil {
			return nil, "", err
		}
		if why == "" {
			out = append(out, a)
		}
	}
	return out, next, nil
}

// SweepExpired expires every pending action whose time is up and returns how
// many it expired.
func (s *Service) SweepExpired(ctx context.Context) (int, error) {
	total := 0
	for {
		expired, err := s.store.ExpireDue(ctx, 500)
		if err != nil {
			return total, err
		}
		now := s.now()
		for _, a := range expired {
			s.publish(eventbus.Updated, a.ID)
			if s.metrics != nil {
				s.metrics.Finished(a, now.Sub(a.CreatedAt))
			}
		}
		total += len(expired)
		if len(expired) < 500 {
			return total, nil
		}
	}
}

// RunExpirer sweeps every interval until ctx ends.
func (s *Service) RunExpirer(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := s.SweepExpired(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("expiring pending actions", "err", err)
		}
		if _, err := s.SweepEscalations(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("firing escalation steps", "err", err)
		}
		if _, err := s.SweepLeases(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("expiring worker leases", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
