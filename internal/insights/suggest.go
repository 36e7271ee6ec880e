package insights

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/risk"
)

// Suggestion is a policy rule the recorded approvals suggest: reviewers
// approved the same call of an agent again and again and never denied it.
// Its JSON form is part of the API.
type Suggestion struct {
	Agent string `json:"agent"`
	// Rule is the allow rule to add to the agent's policy; applying the
	// suggestion (SuggestedPolicy) also lists the call as an exception of
	// the approve rule that sent it to review, as an "always" approval
	// does: the strictest matching rule decides.
	Rule     policy.Rule `json:"rule"`
	Evidence Evidence    `json:"evidence"`
}

// Evidence is what a suggestion rests on.
type Evidence struct {
	// Count is how many times reviewers approved the call.
	Count     int      `json:"count"`
	Reviewers []string `json:"reviewers"`
	// ApproveRule is the agent policy's rule that sent the call to review.
	ApproveRule string    `json:"approve_rule"`
	Tool        string    `json:"tool"`
	Args        any       `json:"args"`
	FirstAt     time.Time `json:"first_at"`
	LastAt      time.Time `json:"last_at"`
	// MedianDecideMs is the median time from submission to approval.
	MedianDecideMs int64 `json:"median_decide_ms"`
	// ActionID is the latest approved action of the call: the editor
	// applies the suggestion from it (SuggestedPolicy).
	ActionID string `json:"action_id"`
}

// Suggestions lists the rules reviewers' approvals since q.Since suggest:
// an agent's identical call (tool and target, as an "always" approval
// allows it) approved by reviewers at least SuggestAfter times, never
// denied, sent to review by a rule of the agent's own policy that still
// asks about it. Calls an "always" approval may not allow (exec and
// worktree actions, code that runs later, critical risk, injection) are
// never suggested. Most approved first.
func (s *Service) Suggestions(ctx context.Context, since time.Time) ([]Suggestion, error) {
	since, err := s.window(since)
	if err != nil {
		return nil, err
	}
	ds, err := s.store.Decisions(ctx, since, MaxDecisions)
	if err != nil {
		return nil, err
	}
	type acc struct {
		ev     Evidence
		denied bool
		ms     []int64
		last   *Decision
	}
	groups := map[string]*acc{}
	var order []string
	for i := range ds {
		d := &ds[i]
		if d.Kind == KindExpired || !human(d) {
			continue
		}
		key := callKey(d)
		g := groups[key]
		if g == nil {
			g = &acc{}
			groups[key] = g
			order = append(order, key)
		}
		if d.Kind == KindDenied {
			g.denied = true
			continue
		}
		if g.ev.Count == 0 {
			g.ev.FirstAt = d.DecidedAt
		}
		g.ev.Count++
		g.ev.LastAt = d.DecidedAt
		if !slices.Contains(g.ev.Reviewers, d.Actor) {
			g.ev.Reviewers = append(g.ev.Reviewers, d.Actor)
		}
		g.ms = append(g.ms, d.DecidedAt.Sub(d.CreatedAt).Milliseconds())
		g.last = d
	}
	out := []Suggestion{}
	for _, key := range order {
		g := groups[key]
		if g.denied || g.ev.Count < SuggestAfter {
			continue
		}
		sug, ok, err := s.suggest(ctx, g.last)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		g.ev.MedianDecideMs = percentile(g.ms, 50)
		g.ev.ApproveRule, g.ev.Tool, g.ev.ActionID = g.last.RuleID, g.last.Tool, g.last.ActionID
		t := policy.TargetOf(g.last.Tool, g.last.Args)
		g.ev.Args = t.Args
		if t.Path != "" {
			g.ev.Args = map[string]any{policy.PathArg: t.Path}
		}
		slices.Sort(g.ev.Reviewers)
		sug.Evidence = g.ev
		out = append(out, sug)
	}
	slices.SortStableFunc(out, func(a, b Suggestion) int { return b.Evidence.Count - a.Evidence.Count })
	return out, nil
}

// suggest returns the suggestion of d's call, false when there is none:
// the call may not be allowed always, or the agent's current policy no
// longer asks about it.
func (s *Service) suggest(ctx context.Context, d *Decision) (Suggestion, bool, error) {
	a, err := s.store.Action(ctx, d.ActionID)
	if err != nil {
		return Suggestion{}, false, err
	}
	_, rule, _, ok, err := s.apply(ctx, a)
	if err != nil || !ok {
		return Suggestion{}, false, err
	}
	return Suggestion{Agent: a.AgentID, Rule: rule}, true, nil
}

// apply returns the agent's current policy with a's call allowed, the
// allow rule added and the version it changes, false when a suggestion
// does not apply to a.
func (s *Service) apply(ctx context.Context, a *hitl.Action) (policy.Document, policy.Rule, int, bool, error) {
	if a.Decision.Source != policy.SourceAgent || a.Decision.RuleID == "" || hitl.IsBuiltin(a.Tool) ||
		risk.RunsCodeLater(a.Tool, a.Args) || a.Risk.Level == risk.Critical || a.Risk.Injection {
		return policy.Document{}, policy.Rule{}, 0, false, nil
	}
	_, set, err := s.store.AgentPolicy(ctx, a.AgentID)
	if err != nil {
		return policy.Document{}, policy.Rule{}, 0, false, err
	}
	if set.Agent == nil {
		return policy.Document{}, policy.Rule{}, 0, false, nil
	}
	before := set.Agent.Document()
	n := len(before.Rules)
	doc, err := hitl.AllowAlways(before, a.Decision.RuleID, a.Tool, a.Args)
	if apperr.CodeOf(err) == apperr.CodeValidation {
		return policy.Document{}, policy.Rule{}, 0, false, nil // the rule is gone or no longer asks
	}
	if err != nil {
		return policy.Document{}, policy.Rule{}, 0, false, err
	}
	if len(doc.Rules) == n {
		return policy.Document{}, policy.Rule{}, 0, false, nil // allowed already
	}
	for _, r := range doc.Rules {
		if strings.HasPrefix(r.ID, "always-") && !slices.ContainsFunc(before.Rules, func(o policy.Rule) bool { return o.ID == r.ID }) {
			return doc, r, set.Agent.Version(), true, nil
		}
	}
	return policy.Document{}, policy.Rule{}, 0, false, nil
}

// SuggestedPolicy returns agentID's current policy with the suggestion
// made from action actionID applied (for the policy editor, which saves
// it as any edit): not_found when the action is not the agent's,
// validation when no suggestion applies to it. version is the policy
// version the document changes (the editor's If-Match).
func (s *Service) SuggestedPolicy(ctx context.Context, agentID, actionID string) (doc policy.Document, rule policy.Rule, version int, err error) {
	a, err := s.store.Action(ctx, actionID)
	if err != nil {
		return policy.Document{}, policy.Rule{}, 0, err
	}
	if a.AgentID != agentID {
		return policy.Document{}, policy.Rule{}, 0, apperr.NotFound("agent %s has no action %s", agentID, actionID)
	}
	if by := (Decision{Kind: KindApproved, Actor: a.Decision.By}); a.Decision.Effect != string(policy.Allow) || a.Decision.By == "" || !human(&by) {
		return policy.Document{}, policy.Rule{}, 0, apperr.Validation("action %s was not approved by a reviewer", actionID)
	}
	doc, rule, version, ok, err := s.apply(ctx, a)
	if err != nil {
		return policy.Document{}, policy.Rule{}, 0, err
	}
	if !ok {
		return policy.Document{}, policy.Rule{}, 0, apperr.Validation("no rule to suggest from action %s: its call is allowed already, or an always-allow may not cover it", actionID)
	}
	return doc, rule, version, nil
}
