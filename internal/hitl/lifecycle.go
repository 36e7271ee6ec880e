package hitl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
		a.Version++
		a.UpdatedAt = now
		err = s.store.UpdateAction(ctx, a, prev, ch.fx, ch.events...)
		if errors.Is(err, ErrStale) {
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
	a.Status = StatusExpired
	a.Version++
	a.UpdatedAt = now
	ev := a.AuditEvent(audit.KindActionExpired, "system", map[string]any{"expires_at": a.ExpiresAt})
	if err := s.store.UpdateAction(ctx, a, prev, Effects{}, ev); err != nil {
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
}

// Approve records reviewer's approval of a pending action. The typed
// confirmation must be the action's phrase. When the quorum is met the
// action becomes approved, with the scope's side effect in the same
// transaction.
func (s *Service) Approve(ctx context.Context, id, reviewer string, req ApproveRequest) (*Action, error) {
	if req.Scope == "" {
		req.Scope = ScopeOnce
	}
	switch req.Scope {
	case ScopeOnce, ScopeConversation, ScopeAlways:
	default:
		return nil, apperr.Invalid("scope must be once, conversation or always")
	}
	if len(req.Comment) > maxReasonLen {
		return nil, apperr.Invalid("comment is longer than %d bytes", maxReasonLen)
	}
	return s.mutate(ctx, id, func(a *Action, now time.Time) (*change, error) {
		if a.Status != StatusPending {
			return nil, notPending(a)
		}
		if !PhraseMatches(a.Phrase, req.Confirmation) {
			return nil, &apperr.Error{Code: apperr.CodeWrongPhrase, Message: "the confirmation does not match this action's phrase"}
		}
		if a.ApprovedBy(reviewer) {
			return nil, apperr.Conflict("%s has already approved action %s; another reviewer must approve", reviewer, a.ID)
		}
		pin, err := mergePin(a)
		if err != nil {
			return nil, err
		}
		ch := &change{}
		if err := s.applyScope(ctx, a, req.Scope, reviewer, now, ch); err != nil {
			return nil, err
		}
		a.Approvals = append(a.Approvals, Approval{By: reviewer, At: now, Scope: req.Scope, Comment: req.Comment})
		data := map[string]any{"scope": req.Scope, "comment": req.Comment, "approvals": len(a.Approvals), "required_approvals": a.RequiredApprovals}
		if len(a.Approvals) < a.RequiredApprovals {
			ch.events = append(ch.events, a.AuditEvent(audit.KindActionApproval, reviewer, data))
			return ch, nil
		}
		a.Status = StatusApproved
		a.Decision = Decision{Effect: string(policy.Allow), By: reviewer, RuleID: a.Decision.RuleID,
			PolicyVersion: a.Decision.PolicyVersion, Source: a.Decision.Source, Reason: req.Comment}
		by := make([]string, len(a.Approvals))
		for i, ap := range a.Approvals {
			by[i] = ap.By
		}
		data["approved_by"] = by
		ch.decided = true
		ch.fx.Job = JobFor(a)
		if pin != "" {
			ch.fx.Job.Pin = pin // the base branch gets exactly the commit the reviewer saw
			data["commit"] = pin
		}
		ch.events = append([]audit.Event{a.AuditEvent(audit.KindActionApproved, reviewer, data)}, ch.events...)
		return ch, nil
	})
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

// applyScope prepares the side effect of a conversation or always approval.
func (s *Service) applyScope(ctx context.Context, a *Action, scope Scope, reviewer string, now time.Time, ch *change) error {
	switch scope {
	case ScopeConversation:
		if a.ConversationID == "" {
			return apperr.Validation("scope conversation needs an action with a conversation_id")
		}
		if a.Risk.Level == risk.Critical {
			return apperr.Validation("scope conversation is not allowed for critical-risk actions")
		}
		g := &Grant{AgentID: a.AgentID, Tool: a.Tool, ConversationID: a.ConversationID, ActionID: a.ID,
			GrantedBy: reviewer, ExpiresAt: now.Add(ConversationGrantTTL)}
		ch.fx.Grant = g
		ch.events = append(ch.events, a.AuditEvent(audit.KindGrantCreated, reviewer, map[string]any{"expires_at": g.ExpiresAt}))
	case ScopeAlways:
		if a.Risk.Level == risk.Critical {
			return apperr.Validation("scope always is not allowed for critical-risk actions")
		}
		if a.Risk.Injection {
			return apperr.Validation("scope always is not allowed for an action flagged for prompt injection")
		}
		if risk.RunsCodeLater(a.Tool, a.Args) {
			return apperr.Validation("scope always is not allowed for actions that run code later (exec, shell startup files, git hooks, autostart, CI config)")
		}
		if a.Decision.Source != "agent" {
			return apperr.Validation("scope always can only change the agent's own policy; this action was sent for approval by the %s", a.Decision.Source)
		}
		_, set, err := s.store.AgentPolicy(ctx, a.AgentID)
		if err != nil {
			return err
		}
		if set.Agent == nil {
			return apperr.Validation("agent %s has no policy of its own", a.AgentID)
		}
		doc, err := AllowAlways(set.Agent.Document(), a.Decision.RuleID, a.Tool)
		if err != nil {
			return err
		}
		if _, err := policy.Compile(doc, set.Agent.Version()+1); err != nil {
			return fmt.Errorf("hitl: always-allow produced an invalid policy: %w", err)
		}
		ch.fx.Policy = &PolicyChange{AgentID: a.AgentID, BaseVersion: set.Agent.Version(), Document: doc}
	}
	return nil
}

// AllowAlways returns doc with the unconditional approve rule ruleID for
// exactly tool turned into an allow rule. Rules with conditions, risk floors
// or globs are refused: allowing them always would allow more than the
// reviewer saw.
func AllowAlways(doc policy.Document, ruleID, tool string) (policy.Document, error) {
	rules := make([]policy.Rule, len(doc.Rules))
	copy(rules, doc.Rules)
	for i, r := range rules {
		if r.ID != ruleID {
			continue
		}
		if r.Tool != tool || r.When != "" || r.Risk != "" {
			return doc, apperr.Validation("scope always cannot widen rule %q (it has a glob, a condition or a risk floor); approve once or edit the policy", ruleID)
		}
		rules[i] = policy.Rule{ID: r.ID, Tool: r.Tool, Effect: policy.Allow}
		doc.Rules = rules
		return doc, nil
	}
	return doc, apperr.Validation("rule %q is not in the agent's current policy", ruleID)
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
		a.Status = StatusDenied
		a.Decision = Decision{Effect: string(policy.Deny), By: reviewer, RuleID: a.Decision.RuleID,
			PolicyVersion: a.Decision.PolicyVersion, Source: a.Decision.Source, Reason: req.Reason}
		return &change{decided: true, events: []audit.Event{a.AuditEvent(audit.KindActionDenied, reviewer, map[string]any{"reason": req.Reason})}}, nil
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
		a.Status = StatusCancelled
		return &change{events: []audit.Event{a.AuditEvent(audit.KindActionCancelled, "agent:"+agentID, nil)}}, nil
	})
}

// ResultRequest is an executor's report of how an approved action went.
type ResultRequest struct {
	Outcome string          `json:"outcome"`
	Output  json.RawMessage `json:"output,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// Result records the outcome an agent reports for its own approved action.
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
	if len(req.Output) > 0 {
		var out any
		if err := json.Unmarshal(req.Output, &out); err != nil {
			return nil, apperr.Invalid("output is not valid JSON")
		}
		result["output"] = audit.Redact(map[string]any{"v": out})["v"]
	}
	if req.Error == "" {
		delete(result, "error")
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
	if f.Status != "" && !f.Status.Valid() {
		return nil, "", apperr.Invalid("unknown status %q", f.Status)
	}
	if f.Risk != "" {
		if _, ok := risk.ParseLevel(f.Risk); !ok {
			return nil, "", apperr.Invalid("unknown risk level %q", f.Risk)
		}
	}
	if f.Limit <= 0 {
		f.Limit = 50
	}
	if f.Limit > 500 {
		return nil, "", apperr.Invalid("limit must be at most 500")
	}
	return s.store.ListActions(ctx, f)
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
