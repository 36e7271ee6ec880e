package hitl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/risk"
)

// PlanModeReason is the reason every call plan mode denies carries.
const PlanModeReason = "plan mode is on"

// ErrPlanMode: plan mode is on for the agent or the fleet and the call or
// approval is not a read; nothing was written.
var ErrPlanMode = errors.New("hitl: " + PlanModeReason)

// Audit event kinds of the hard stops humans flip.
const (
	KindPlanModeOn     audit.Kind = "plan_mode.on"    // a human turned plan mode on (data: scope, reason)
	KindPlanModeOff    audit.Kind = "plan_mode.off"   // a human turned plan mode off
	KindFleetSuspended audit.Kind = "fleet.suspended" // an admin stopped the whole fleet (data: reason, agents)
	KindFleetResumed   audit.Kind = "fleet.resumed"   // an admin lifted the fleet stop (data: agents)
)

// FleetScope is the scope of the fleet-wide plan mode switch.
const FleetScope = "fleet"

// AgentPlanScope is the scope of an agent's plan mode switch.
func AgentPlanScope(agentID string) string { return "agent:" + agentID }

// PlanMode is one plan mode switch: whether it is on and, while it is,
// who turned it on, when and why.
type PlanMode struct {
	// Scope is FleetScope or "agent:<id>".
	Scope  string     `json:"scope"`
	On     bool       `json:"on"`
	SetBy  string     `json:"set_by,omitempty"`
	SetAt  *time.Time `json:"set_at,omitempty"`
	Reason string     `json:"reason,omitempty"`
}

// AgentPlanMode is what holds for one agent: its own switch, the fleet's,
// and whether either is on.
type AgentPlanMode struct {
	AgentID string   `json:"agent_id"`
	Agent   PlanMode `json:"agent"`
	Fleet   PlanMode `json:"fleet"`
	// On: the agent's or the fleet's switch is on; its calls that are not
	// reads are denied.
	On bool `json:"on"`
}

// PlanModeRequest flips a plan mode switch.
type PlanModeRequest struct {
	// On is required: true turns plan mode on, false off.
	On     *bool  `json:"on"`
	Reason string `json:"reason,omitempty"`
}

func (r PlanModeRequest) validate() error {
	if r.On == nil {
		return apperr.Invalid("on is required (true or false)")
	}
	if len(r.Reason) > maxReasonLen {
		return apperr.Invalid("reason is longer than %d bytes", maxReasonLen)
	}
	return nil
}

// IsRead reports whether a call of tool only looks, judged on its args as
// stored (audit.Redact), so that the submit and the approval judge alike:
// then plan mode lets it be decided by policy as usual. A read is a tool
// whose name the risk package files under its read category, with no SQL
// in its args that does more than read (risk.IsReadCall), and of the
// built-ins only worktree.diff; exec and every other worktree.* tool are
// never reads, whatever their arguments. Args holding a redaction are not
// a read: what the redaction took (a secret-named field, a token-shaped
// part of a query) may have been the write.
func IsRead(tool string, stored map[string]any) bool {
	if IsBuiltin(tool) {
		return tool == ToolWorktreeDiff
	}
	return risk.IsReadCall(tool, stored) && !audit.HasRedaction(stored)
}

// PlanModeStore persists plan mode and the fleet stop.
type PlanModeStore interface {
	// SetPlanMode turns the switch of scope on (actor, reason) or off,
	// with ev's audit event, in one transaction; not_found for the scope
	// of an unknown agent. A submit or approval that starts after it
	// returns sees the new state.
	SetPlanMode(ctx context.Context, scope string, on bool, actor, reason string, ev func(was PlanMode) audit.Event) (PlanMode, error)
	// PlanModes returns the agent's switch and the fleet's; not_found for
	// an unknown agent. agentID "" returns the fleet's twice.
	PlanModes(ctx context.Context, agentID string) (agent, fleet PlanMode, err error)
	// PlanModesOn lists every switch that is on, the fleet's first.
	PlanModesOn(ctx context.Context) ([]PlanMode, error)
	// SuspendFleet records the fleet stop (keeping the first one's who,
	// when and why while it lasts) and suspends every agent that is not
	// suspended yet as SuspendAgent does, marking them as suspended by the
	// fleet, in one transaction. It returns the stop, the agents it
	// suspended and the actions it cancelled.
	SuspendFleet(ctx context.Context, actor, reason string) (FleetStop, []*Action, error)
	// ResumeFleet lifts the fleet stop and resumes exactly the agents it
	// suspended (as ResumeAgent does, why saying why leftovers are
	// cancelled), in one transaction; agents suspended on their own stay
	// suspended.
	ResumeFleet(ctx context.Context, actor string, why func(agentID string) string) (FleetStop, []*Action, error)
	// FleetStop returns the fleet stop's state.
	FleetStop(ctx context.Context) (FleetStop, error)
}

// FleetStop is the state of the fleet emergency stop.
type FleetStop struct {
	Stopped   bool       `json:"stopped"`
	StoppedBy string     `json:"stopped_by,omitempty"`
	StoppedAt *time.Time `json:"stopped_at,omitempty"`
	Reason    string     `json:"reason,omitempty"`
	// Agents are the agents this call suspended (a stop) or resumed (a
	// resume).
	Agents []string `json:"agents,omitempty"`
	// Cancelled are the actions this call stopped.
	Cancelled []string `json:"cancelled,omitempty"`
}

// SetPlanMode flips the plan mode switch of an agent (agentID) or of the
// fleet (agentID ""), for a human actor; the handlers let only admins
// and reviewers call it. Turning it on when it is on already updates who,
// when and why; both are audited.
func (s *Service) SetPlanMode(ctx context.Context, agentID, actor string, req PlanModeRequest) (AgentPlanMode, error) {
	if err := req.validate(); err != nil {
		return AgentPlanMode{}, err
	}
	scope := FleetScope
	if agentID != "" {
		scope = AgentPlanScope(agentID)
	}
	on := *req.On
	_, err := s.store.SetPlanMode(ctx, scope, on, actor, req.Reason, func(was PlanMode) audit.Event {
		kind := KindPlanModeOff
		if on {
			kind = KindPlanModeOn
		}
		return audit.Event{Kind: kind, Actor: actor, AgentID: agentID,
			Data: map[string]any{"scope": scope, "reason": req.Reason, "was_on": was.On}}
	})
	if err != nil {
		return AgentPlanMode{}, err
	}
	return s.PlanMode(ctx, agentID)
}

// PlanMode returns the plan mode that holds for an agent (agentID "": for
// the fleet alone).
func (s *Service) PlanMode(ctx context.Context, agentID string) (AgentPlanMode, error) {
	ag, fl, err := s.store.PlanModes(ctx, agentID)
	if err != nil {
		return AgentPlanMode{}, err
	}
	return AgentPlanMode{AgentID: agentID, Agent: ag, Fleet: fl, On: ag.On || fl.On}, nil
}

// PlanModesOn lists every plan mode switch that is on (the fleet's first,
// then agents' by id): what the queue's banner shows.
func (s *Service) PlanModesOn(ctx context.Context) ([]PlanMode, error) {
	return s.store.PlanModesOn(ctx)
}

// SuspendFleet is the fleet emergency stop: every agent is suspended at
// once, as SuspendAgent suspends one (their submits denied, their
// unfinished actions cancelled, running jobs stopped on the next
// heartbeat), with who and why audited.
func (s *Service) SuspendFleet(ctx context.Context, actor string, req StopRequest) (FleetStop, error) {
	if len(req.Reason) > maxReasonLen {
		return FleetStop{}, apperr.Invalid("reason is longer than %d bytes", maxReasonLen)
	}
	st, stopped, err := s.store.SuspendFleet(ctx, actor, req.Reason)
	if err != nil {
		return FleetStop{}, err
	}
	s.Stopped(stopped)
	return st, nil
}

// ResumeFleet lifts the fleet stop: the agents it suspended are resumed;
// an agent an admin suspended on its own (before or during the stop)
// stays suspended.
func (s *Service) ResumeFleet(ctx context.Context, actor string) (FleetStop, error) {
	st, stopped, err := s.store.ResumeFleet(ctx, actor, func(agentID string) string {
		return fmt.Sprintf("submitted while agent %s was being suspended by the fleet stop; cancelled when %s resumed the fleet", agentID, actor)
	})
	if err != nil {
		return FleetStop{}, err
	}
	s.Stopped(stopped)
	return st, nil
}

// FleetStopState returns whether the fleet is stopped, by whom, when, why.
func (s *Service) FleetStopState(ctx context.Context) (FleetStop, error) {
	return s.store.FleetStop(ctx)
}

// denyPlanMode turns a into the denial plan mode makes of a call that is
// not a read, and returns its submit event.
func denyPlanMode(a *Action) audit.Event {
	a.Status = StatusDenied
	a.Phrase, a.ExpiresAt, a.RequiredApprovals = "", nil, 1
	a.Decision = Decision{Effect: string(policy.Deny), By: "policy", RuleID: "", PolicyVersion: a.Decision.PolicyVersion,
		Source: "plan_mode", Reason: PlanModeReason}
	return a.AuditEvent(audit.KindActionSubmitted, "agent:"+a.AgentID, map[string]any{
		"status": a.Status, "required_approvals": a.RequiredApprovals, "reason": a.Reason, "plan_mode": true,
	})
}

// planModeConflict is what an approval refused by plan mode answers.
func planModeConflict(id string) error {
	return apperr.Conflict("%s: action %s is not a read and cannot be approved until plan mode is off; it stays pending", PlanModeReason, id)
}
