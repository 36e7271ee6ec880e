package hitl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/risk"
)

// Scopes in order of reach: an action approved by several reviewers gets
// the narrowest scope any of them chose.
var scopeOrder = []Scope{ScopeOnce, ScopeConversation, ScopeAlways}

// Valid reports whether s is a known scope.
func (s Scope) Valid() bool {
	for _, k := range scopeOrder {
		if s == k {
			return true
		}
	}
	return false
}

func (s Scope) rank() int {
	for i, k := range scopeOrder {
		if s == k {
			return i
		}
	}
	return -1
}

// EffectiveScope is the scope a's approvals agree on: the narrowest one
// chosen, so that no reviewer's approval reaches further than they chose.
func (a *Action) EffectiveScope() Scope {
	if len(a.Approvals) == 0 {
		return ScopeOnce
	}
	s := a.Approvals[0].Scope
	for _, ap := range a.Approvals[1:] {
		if ap.Scope.rank() < s.rank() {
			s = ap.Scope
		}
	}
	if !s.Valid() {
		return ScopeOnce
	}
	return s
}

// ScopeProblem says why an approval of a may not have scope, or "" when it
// may. It is the one rule for scopes: Approve enforces it, the grant
// lookup at submit applies the conversation part of it to the new call,
// and the console offers only the scopes it allows.
func ScopeProblem(a *Action, scope Scope) string {
	switch scope {
	case ScopeOnce:
		return ""
	case ScopeConversation:
		return conversationProblem(a)
	case ScopeAlways:
		return alwaysProblem(a)
	}
	return fmt.Sprintf("unknown scope %q (want once, conversation or always)", scope)
}

// conversationProblem: a conversation grant lets later calls through with
// no reviewer, so it is only for calls a single reviewer could approve, that
// are not high risk, not flagged, run nothing on a worker and nothing later.
func conversationProblem(a *Action) string {
	if why := conversationShapeProblem(a); why != "" {
		return why
	}
	if risk.RunsCodeLater(a.Tool, a.Args) {
		return "scope conversation is not allowed for actions that run code later (exec, shell startup files, git hooks, autostart, CI config)"
	}
	return ""
}

// conversationShapeProblem is conversationProblem without the scan of the
// arguments for targets that run code later: what the submit path can
// check for free before it knows whether a grant exists at all.
func conversationShapeProblem(a *Action) string {
	switch {
	case a.ConversationID == "":
		return "scope conversation needs an action with a conversation_id"
	case a.RequiredApprovals > 1:
		return fmt.Sprintf("scope conversation is only for actions that need one approval; this one needs %d", a.RequiredApprovals)
	case a.Risk.Level.Rank() < 0 || a.Risk.Level.Rank() >= risk.High.Rank():
		return fmt.Sprintf("scope conversation is not allowed for %s-risk actions", a.Risk.Level)
	case a.Risk.Injection:
		return "scope conversation is not allowed for an action flagged for prompt injection"
	case IsBuiltin(a.Tool):
		return "scope conversation is not allowed for exec and worktree actions"
	case !ruleDecided(a):
		return fmt.Sprintf("scope conversation needs an action sent for approval by a policy rule; this one was sent by the %s", a.Decision.Source)
	case reviewersHeld(a) != "":
		return fmt.Sprintf("scope conversation is not allowed for an action several approve rules hold when one of them names reviewers (rule %s): a grant is tied to one rule", reviewersHeld(a))
	}
	return ""
}

func alwaysProblem(a *Action) string {
	switch {
	case a.Risk.Level == risk.Critical:
		return "scope always is not allowed for critical-risk actions"
	case a.Risk.Injection:
		return "scope always is not allowed for an action flagged for prompt injection"
	case IsBuiltin(a.Tool):
		return "scope always is not allowed for exec and worktree actions"
	case risk.RunsCodeLater(a.Tool, a.Args):
		return "scope always is not allowed for actions that run code later (exec, shell startup files, git hooks, autostart, CI config)"
	case a.Decision.Source != policy.SourceAgent || a.Decision.RuleID == "":
		return fmt.Sprintf("scope always can only change the agent's own policy; this action was sent for approval by the %s", a.Decision.Source)
	case len(a.Decision.Rules) > 1:
		// The allow rule follows one approve rule and excepts the target
		// from it: the others would still hold the next identical call,
		// while the reviewer was told "always"; and one of them may name
		// reviewers the allow rule would pass.
		return fmt.Sprintf("scope always is not allowed for an action %d approve rules hold: the allow rule is tied to one rule; approve it once or for the conversation", len(a.Decision.Rules))
	}
	return ""
}

// heldRules returns Decision.Rules for d: every matching approve rule
// when there are several, else nil.
func heldRules(d policy.Decision) []HeldRule {
	if d.Effect != policy.Approve || len(d.Route.Rules) < 2 {
		return nil
	}
	out := make([]HeldRule, len(d.Route.Rules))
	for i, r := range d.Route.Rules {
		out[i] = HeldRule{Source: r.Source, RuleID: r.RuleID, Reviewers: r.Reviewers}
	}
	return out
}

// reviewersHeld names a rule that names reviewers when several approve
// rules hold a, or "". A grant or an always rule is tied to one rule (the
// first) and could not keep the others' reviewers.
func reviewersHeld(a *Action) string {
	if len(a.Decision.Rules) < 2 {
		return ""
	}
	for _, r := range a.Decision.Rules {
		if len(r.Reviewers) > 0 {
			return r.RuleID
		}
	}
	return ""
}

// ruleDecided reports whether a policy rule (not a default or a risk
// setting) sent a to review: grants are tied to that rule.
func ruleDecided(a *Action) bool {
	return a.Decision.RuleID != "" && (a.Decision.Source == policy.SourceAgent || a.Decision.Source == policy.SourceFleet)
}

// ScopeOption is one scope a reviewer may or may not choose for an action.
type ScopeOption struct {
	Scope   Scope
	Allowed bool
	// Why says why not, when not allowed.
	Why string
}

// ScopeOptions lists every scope with whether an approval of a may choose
// it now (for the console; Approve applies the same rules).
func (s *Service) ScopeOptions(ctx context.Context, a *Action) []ScopeOption {
	out := make([]ScopeOption, 0, len(scopeOrder))
	for _, sc := range scopeOrder {
		why := ScopeProblem(a, sc)
		if why == "" && sc == ScopeAlways {
			if _, err := s.alwaysPolicy(ctx, a); err != nil {
				why = err.Error()
				if e, ok := apperr.As(err); ok {
					why = e.Message
				}
			}
		}
		out = append(out, ScopeOption{Scope: sc, Allowed: why == "", Why: why})
	}
	return out
}

// alwaysPolicy returns the agent policy change an "always" approval of a
// makes: the exact target approved is allowed, and the rule it was
// approved under stops asking about that target.
func (s *Service) alwaysPolicy(ctx context.Context, a *Action) (*PolicyChange, error) {
	_, set, err := s.store.AgentPolicy(ctx, a.AgentID)
	if err != nil {
		return nil, err
	}
	if set.Agent == nil {
		return nil, apperr.Validation("agent %s has no policy of its own", a.AgentID)
	}
	if err := s.ruleUnchanged(ctx, a, set.Agent); err != nil {
		return nil, err
	}
	doc, err := AllowAlways(set.Agent.Document(), a.Decision.RuleID, a.Tool, a.Args)
	if err != nil {
		return nil, err
	}
	if _, err := policy.Compile(doc, set.Agent.Version()+1); err != nil {
		return nil, fmt.Errorf("hitl: always-allow produced an invalid policy: %w", err)
	}
	return &PolicyChange{AgentID: a.AgentID, BaseVersion: set.Agent.Version(), Document: doc}, nil
}

// ruleUnchanged refuses an "always" approval of a when the rule that held
// it is no longer the rule it was held under: the change writes the rule as
// it is now (its except, an allow rule after it), so a reviewer who could
// approve under the old rule would otherwise loosen a rule an admin has
// since tightened (more approvals, other reviewers, another tool). Only
// the excepts that earlier "always" approvals added may differ.
func (s *Service) ruleUnchanged(ctx context.Context, a *Action, now *policy.Compiled) error {
	if a.Decision.PolicyVersion == now.Version() {
		return nil
	}
	held, err := s.store.AgentPolicyAt(ctx, a.AgentID, a.Decision.PolicyVersion)
	if err != nil {
		return err
	}
	if held == nil || !sameRule(held.Document(), now.Document(), a.Decision.RuleID) {
		return apperr.Conflict("rule %q changed since action %s was held (agent policy v%d, now v%d): approve it once, or for the conversation",
			a.Decision.RuleID, a.ID, a.Decision.PolicyVersion, now.Version())
	}
	return nil
}

// sameRule reports whether rule id reads the same in a and b but for its
// excepts.
func sameRule(a, b policy.Document, id string) bool {
	find := func(doc policy.Document) ([]byte, bool) {
		for _, r := range doc.Rules {
			if r.ID == id {
				r.Except = nil
				out, err := json.Marshal(r)
				return out, err == nil
			}
		}
		return nil, false
	}
	ra, okA := find(a)
	rb, okB := find(b)
	return okA && okB && bytes.Equal(ra, rb)
}

// AllowAlways returns doc changed so that exactly the call (tool, args) is
// allowed from now on without review by rule ruleID: the rule gets the
// call's target as an exception and a new allow rule for that target
// follows it. The target is the canonical path for a path tool, else the
// whole arguments: never the whole tool. Every other rule still applies.
func AllowAlways(doc policy.Document, ruleID, tool string, args map[string]any) (policy.Document, error) {
	target := policy.TargetOf(tool, args)
	for i, r := range doc.Rules {
		if r.ID != ruleID {
			continue
		}
		if r.Effect != policy.Approve {
			return doc, apperr.Validation("rule %q is not an approve rule in the agent's current policy", ruleID)
		}
		id := alwaysRuleID(ruleID, target)
		for _, other := range doc.Rules {
			if other.ID == id {
				return doc, nil // approved always before: nothing to add
			}
		}
		rules := make([]policy.Rule, 0, len(doc.Rules)+1)
		rules = append(rules, doc.Rules[:i]...)
		r.Except = append(append([]policy.Target(nil), r.Except...), target)
		allowed := target
		allowed.Tool = ""
		rules = append(rules, r, policy.Rule{ID: id, Tool: tool, Effect: policy.Allow, Target: &allowed})
		rules = append(rules, doc.Rules[i+1:]...)
		doc.Rules = rules
		return doc, nil
	}
	return doc, apperr.Validation("rule %q is not in the agent's current policy", ruleID)
}

// alwaysRuleID names the allow rule an "always" approval adds: the same
// target under the same rule always gets the same id.
func alwaysRuleID(ruleID string, t policy.Target) string {
	b, _ := json.Marshal(t)
	h := sha256.Sum256(append([]byte(ruleID+"\x00"), b...))
	return "always-" + hex.EncodeToString(h[:6])
}
