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
)

// StopRequest is a reviewer's or admin's cancel of an action.
type StopRequest struct {
	Reason string `json:"reason,omitempty"`
}

// StopResult is the result a stopped approved or running action carries:
// it never ran, or its run was killed (exit_code -1), and why.
func StopResult(from Status, why string) json.RawMessage {
	r := map[string]any{"error": why}
	if from == StatusRunning {
		r["exit_code"] = -1
	}
	raw, _ := json.Marshal(r)
	return raw
}

// Stop cancels an action on behalf of a reviewer or admin: a pending one
// is withdrawn, an approved one never runs, a running one's worker is told
// to stop on its next heartbeat and kills the run's process group. The
// action ends cancelled at once (the run's output is not recorded), with
// its result saying who stopped it; conflict when it is already final.
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
		a.Status = StatusCancelled
		if from != StatusPending {
			a.Result = StopResult(from, why)
		}
		return &change{
			fx:     Effects{Stop: why},
			events: []audit.Event{a.AuditEvent(audit.KindActionCancelled, actor, map[string]any{"from": from, "reason": req.Reason})},
		}, nil
	})
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
