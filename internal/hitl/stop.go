package hitl

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/eventbus"
	"github.com/airlockhq/airlock/internal/policy"
)

// StopRequest is a reviewer's or admin's cancel of an action.
type StopRequest struct {
	Reason string `json:"reason,omitempty"`
}

// StopResult is the result a stopped approved or running action carries:
// it never ran, or its run was killed (exit_code -1), and why.
func StopResult(from Status, why string) json.RawMessage {
	return stopResult(from, why, nil)
}

// stopResult is StopResult, with what the stop left of a policy change
// (kept: none when nil).
func stopResult(from Status, why string, kept *PolicyKept) json.RawMessage {
	r := map[string]any{"error": why}
	if from == StatusRunning {
		r["exit_code"] = -1
	}
	if kept != nil {
		r["policy_kept"] = kept
	}
	raw, _ := json.Marshal(r)
	return raw
}

// Stop cancels an action on behalf of a reviewer or admin: a pending one
// is withdrawn, an approved one never runs, a running one's worker is told
// to stop on its next heartbeat and kills the run's process group. The
// action ends cancelled at once (the run's output is not recorded), with
// its result saying who stopped it; conflict when it is already final.
//
// What its approval's scope did is undone as far as it can be: the
// conversation grant the approval made, or the grant that approved it,
// is revoked in the same transaction (each grant.revoked by the
// stopper), so the agent's next calls go to a reviewer again. The agent policy version an "always"
// approval wrote is not reverted (later versions may build on it, and
// only an admin edits policies): the result and the action.cancelled
// event name it (PolicyKept) for an admin to revert.
func (s *Service) Stop(ctx context.Context, id, actor string, req StopRequest) (*Action, error) {
	if len(req.Reason) > maxReasonLen {
		return nil, apperr.Invalid("reason is longer than %d bytes", maxReasonLen)
	}
	return s.mutate(ctx, id, func(a *Action, now time.Time) (*change, error) {
		if !slices.Contains(MoveStop.From, a.Status) {
			return nil, apperr.Conflict("action %s is already %s", a.ID, a.Status)
		}
		from := a.Status
		why := "cancelled by " + actor
		if req.Reason != "" {
			why += ": " + req.Reason
		}
		data := map[string]any{"from": from, "reason": req.Reason}
		ch := &change{fx: Effects{Stop: why}}
		a.Status = StatusCancelled
		if from != StatusPending {
			// Only an approval makes a grant or a policy version, and only
			// the one that completed the quorum (approved, or running now).
			ch.fx.RevokeGrants = &GrantRevocation{Actor: actor, Event: func(g Grant) audit.Event {
				return GrantRevoked(g, actor, map[string]any{"action_stopped": true, "reason": req.Reason})
			}}
			if a.Decision.Source == SourceGrant {
				// A grant approved it: the stopper does not want what the
				// grant lets through, so it ends too.
				k := GrantKeyOf(a)
				ch.fx.RevokeGrants.Covering = &k
			}
			kept, err := s.policyKept(ctx, a)
			if err != nil {
				return nil, err
			}
			if kept != nil {
				data["policy_kept"] = kept
			}
			a.Result = stopResult(from, why, kept)
		}
		ch.events = []audit.Event{a.AuditEvent(audit.KindActionCancelled, actor, data)}
		return ch, nil
	})
}

// PolicyKept is what stopping an action approved with scope always leaves
// in force: the agent policy version its approval wrote, with the allow
// rule it added (and the except it added to the approving rule).
type PolicyKept struct {
	AgentID string `json:"agent_id"`
	// Version is the version the approval wrote (0: not found).
	Version int    `json:"version"`
	RuleID  string `json:"rule_id"`
	Note    string `json:"note"`
}

// policyKept returns what a's "always" approval left in the agent's policy,
// or nil when a was not approved with scope always.
func (s *Service) policyKept(ctx context.Context, a *Action) (*PolicyKept, error) {
	if a.EffectiveScope() != ScopeAlways {
		return nil, nil
	}
	v, err := s.store.PolicyWrittenBy(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	k := &PolicyKept{AgentID: a.AgentID, Version: v, RuleID: alwaysRuleID(a.Decision.RuleID, policy.TargetOf(a.Tool, a.Args))}
	version := "the version"
	if v > 0 {
		version = fmt.Sprintf("version %d", v)
	}
	k.Note = fmt.Sprintf("stopping the action does not revert what its approval (scope always) wrote: %s of agent %s's policy "+
		"(allow rule %s, and the target as an except of rule %s) stays in force; an admin reverts it with PUT /api/v1/agents/%s/policy",
		version, a.AgentID, k.RuleID, a.Decision.RuleID, a.AgentID)
	return k, nil
}

// SuspendAgent suspends an agent: from now on its submits are denied with
// the reason, and every action of it that is not final is cancelled in the
// same transaction (pending ones are withdrawn, approved ones never run,
// running ones are stopped on their worker's next heartbeat). It returns
// the actions it cancelled.
func (s *Service) SuspendAgent(ctx context.Context, agentID, actor string) ([]*Action, error) {
	stopped, err := s.store.SuspendAgent(ctx, agentID, actor, fmt.Sprintf("agent %s was suspended by %s", agentID, actor))
	if err != nil {
		return nil, err
	}
	s.Stopped(stopped)
	return stopped, nil
}

// ResumeAgent lifts an agent's suspension: its new submits are decided by
// policy again. What the suspension cancelled stays cancelled, and so does
// anything a submit racing the suspension stored (a statement that read
// the agent as active just before the suspension committed): it was never
// leased while the agent was suspended, and is cancelled now rather than
// run.
func (s *Service) ResumeAgent(ctx context.Context, agentID, actor string) error {
	stopped, err := s.store.ResumeAgent(ctx, agentID, actor,
		fmt.Sprintf("submitted while agent %s was being suspended; cancelled when %s resumed it", agentID, actor))
	if err != nil {
		return err
	}
	s.Stopped(stopped)
	return nil
}

// Stopped announces actions the store stopped in bulk (a suspension, a
// revoked token): waiters, consoles and other instances see them change.
func (s *Service) Stopped(actions []*Action) {
	for _, a := range actions {
		s.publish(eventbus.Updated, a.ID)
		if s.metrics != nil {
			s.metrics.Finished(a, 0)
		}
	}
}
