package policy

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Input is the action a decision is about.
type Input struct {
	// Tool is the tool name the agent wants to call.
	Tool string
	// Args are the call's decoded JSON arguments (json.Number numbers as
	// sent, or float64; nested map[string]any and []any).
	Args map[string]any
	// Agent is the calling agent.
	Agent AgentInfo
	// Risk is the risk classifier's verdict on the action.
	Risk RiskInfo
}

// AgentInfo identifies the calling agent to conditions (agent.id,
// agent.name).
type AgentInfo struct {
	ID   string
	Name string
}

// RiskInfo is the risk classifier's verdict, as conditions and risk settings
// see it (risk.level, risk.score, risk.reasons, risk.injection).
type RiskInfo struct {
	// Level is low, medium, high or critical; empty counts as low and
	// anything else as critical.
	Level string
	// Score is 0–100.
	Score int
	// Reasons explain the level in words.
	Reasons []string
	// Injection reports a prompt-injection hit in a string argument.
	Injection bool
}

// Decision sources.
const (
	SourceFleet   = "fleet"   // a fleet policy rule decided
	SourceAgent   = "agent"   // an agent policy rule decided
	SourceDefault = "default" // no rule matched; a document default (or deny) decided
	SourceRisk    = "risk"    // a risk setting changed the rules' effect
)

// Decision is the outcome of Set.Decide.
type Decision struct {
	// Effect is the final effect.
	Effect Effect
	// RuleID is the id of the rule that decided; empty when Source is
	// "default" or "risk".
	RuleID string
	// Source is "fleet", "agent", "default" or "risk".
	Source string
	// PolicyVersion is the agent policy's version (0 without one).
	PolicyVersion int
	// FleetVersion is the fleet policy's version (0 without one).
	FleetVersion int
	// Approvals is how many distinct reviewers must approve; >= 1 when
	// Effect is Approve, else 0. The most any matching approve rule asks.
	Approvals int
	// Timeout is how long the action stays pending when Effect is Approve,
	// else 0: the shortest of the matching approve rules' (each one's own,
	// else the effective default_timeout).
	Timeout time.Duration
	// Reason explains the decision to humans.
	Reason string
	// Route is every matching approve rule with who it tells and who may
	// approve, when Effect is Approve (never encoded: internal/hitl stores
	// it apart).
	Route Route
}

type decisionJSON struct {
	Effect        Effect    `json:"effect"`
	RuleID        string    `json:"rule_id,omitempty"`
	Source        string    `json:"source"`
	PolicyVersion int       `json:"policy_version"`
	FleetVersion  int       `json:"fleet_version"`
	Approvals     int       `json:"approvals,omitempty"`
	Timeout       *Duration `json:"timeout,omitempty"`
	Reason        string    `json:"reason"`
}

// MarshalJSON writes the decision with snake_case names and the timeout as a
// duration string ("15m"); rule_id, approvals and timeout are omitted when
// zero.
func (d Decision) MarshalJSON() ([]byte, error) {
	v := decisionJSON{d.Effect, d.RuleID, d.Source, d.PolicyVersion, d.FleetVersion, d.Approvals, nil, d.Reason}
	if d.Timeout != 0 {
		t := Duration(d.Timeout)
		v.Timeout = &t
	}
	return json.Marshal(v)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (d *Decision) UnmarshalJSON(b []byte) error {
	var v decisionJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*d = Decision{Effect: v.Effect, RuleID: v.RuleID, Source: v.Source, PolicyVersion: v.PolicyVersion,
		FleetVersion: v.FleetVersion, Approvals: v.Approvals, Reason: v.Reason}
	if v.Timeout != nil {
		d.Timeout = v.Timeout.Std()
	}
	return nil
}

// Set is what the server evaluates: the fleet policy and the agent's policy,
// either of which may be nil.
type Set struct {
	Fleet *Compiled
	Agent *Compiled
}

// match is the winning rule while Decide scans.
type match struct {
	rule    *compiledRule
	role    int
	version int
	effect  Effect
	err     error // condition error that made the rule deny
}

// heldRule is a matching approve rule while Decide scans.
type heldRule struct {
	rule *compiledRule
	role int
}

// Decide makes the decision for in; see the package documentation for the
// semantics. It never fails: problems evaluating a condition deny.
func (s Set) Decide(in Input) Decision {
	d := Decision{PolicyVersion: s.Agent.Version(), FleetVersion: s.Fleet.Version()}
	settings := s.resolve()
	act := activation{in: &in}
	level := inputLevelRank(in.Risk.Level)

	var win match
	approvals := 0
	var held []heldRule // every matching approve rule, in order
scan:
	for role, c := range [...]*Compiled{roleFleet: s.Fleet, roleAgent: s.Agent} {
		if c == nil {
			continue
		}
		for i := range c.rules {
			r := &c.rules[i]
			if !r.match.matches(in.Tool) || level < r.riskFloor || !r.matchesTarget(in.Tool, in.Args) {
				continue
			}
			effect := r.Effect
			var condErr error
			if r.prg != nil {
				ok, err := act.eval(r.prg)
				switch {
				case err != nil:
					effect, condErr = Deny, err
				case !ok:
					continue
				}
			}
			if effect == Approve {
				approvals = max(approvals, r.approvals)
				held = append(held, heldRule{r, role})
			}
			if win.rule == nil || effect.Rank() > win.effect.Rank() {
				win = match{rule: r, role: role, version: c.version, effect: effect, err: condErr}
			}
			if effect == Deny {
				break scan // nothing outranks deny, and the first deny names it
			}
		}
	}

	if win.rule != nil {
		d.Effect, d.RuleID, d.Source = win.effect, win.rule.ID, roleNames[win.role]
		d.Reason = win.rule.reasons[win.role]
		if win.err != nil {
			d.Reason = fmt.Sprintf("%s: condition error: %v (fail closed)", ruleLabel(win.rule, roleNames[win.role], win.version), win.err)
		}
		if d.Effect == Approve {
			// Every matching approve rule holds the action, not only the
			// first: the most approvals, the shortest timeout, and each
			// one's route (its reviewers too).
			d.Approvals = approvals
			d.Route.Rules = make([]RuleRoute, len(held))
			for i, h := range held {
				r := h.rule
				d.Route.Rules[i] = RuleRoute{Source: roleNames[h.role], RuleID: r.ID, Notify: r.Notify, Reviewers: r.Reviewers, Escalate: r.Escalate}
				t := r.timeout
				if t == 0 {
					t = settings.timeout
				}
				if i == 0 || t < d.Timeout {
					d.Timeout = t
				}
				if i > 0 {
					d.Reason += "; " + r.reasons[h.role]
				}
			}
		}
	} else {
		d.Effect, d.Source, d.Reason = s.defaultEffect()
		if d.Effect == Approve {
			d.Approvals = 1
		}
	}
	if d.Effect == Approve && d.Timeout == 0 {
		d.Timeout = settings.timeout
	}

	applyRisk(&d, in.Risk, level, settings)
	return d
}

// matchesTarget applies the rule's target and exceptions to the call.
func (r *compiledRule) matchesTarget(tool string, args map[string]any) bool {
	if r.Target != nil && !r.Target.matches(tool, args) {
		return false
	}
	for _, t := range r.Except {
		if t.matches(tool, args) {
			return false
		}
	}
	return true
}

// ruleLabel names a rule in reasons: `rule "big-spend" (agent policy v3)`.
func ruleLabel(r *compiledRule, source string, version int) string {
	return fmt.Sprintf("rule %q (%s policy v%d)", r.ID, source, version)
}

// ruleReason explains a match of r, e.g.
// `rule "big-spend" (agent policy v3): args.amount > 100`.
func ruleReason(r *compiledRule, source string, version int) string {
	var conds []string
	if r.Risk != "" {
		conds = append(conds, "risk at least "+r.Risk)
	}
	if r.When != "" {
		conds = append(conds, r.When)
	}
	if len(conds) == 0 {
		conds = append(conds, fmt.Sprintf("tool %q", r.Tool))
	}
	return ruleLabel(r, source, version) + ": " + strings.Join(conds, "; ")
}

// defaultEffect applies the documents' defaults when no rule matched.
func (s Set) defaultEffect() (Effect, string, string) {
	if c := s.Agent; c != nil && c.doc.Default != "" {
		return c.doc.Default, SourceDefault, c.defaultReasons[roleAgent]
	}
	if c := s.Fleet; c != nil && c.doc.Default != "" {
		return c.doc.Default, SourceDefault, c.defaultReasons[roleFleet]
	}
	return Deny, SourceDefault, "no rule matched: deny by default"
}

// applyRisk applies the injection action and risk escalation; it only ever
// tightens d.
func applyRisk(d *Decision, risk RiskInfo, level int, s resolved) {
	tighten := func(to Effect, why string) {
		d.Reason = fmt.Sprintf("%s (rules: %s)", why, d.Reason)
		d.Effect, d.RuleID, d.Source = to, "", SourceRisk
		d.Route = Route{}
		if to == Approve {
			d.Approvals, d.Timeout = 1, s.timeout
		} else {
			d.Approvals, d.Timeout = 0, 0
		}
	}
	if risk.Injection {
		why := fmt.Sprintf("prompt injection detected: %s injection_action=%s", s.injectionFrom, s.injection)
		switch {
		case s.injection.Rank() > d.Effect.Rank():
			tighten(s.injection, why)
		default:
			d.Reason += "; " + why
		}
	}
	if s.escalateRank >= 0 && level >= s.escalateRank && d.Effect == Allow {
		tighten(Approve, fmt.Sprintf("risk %s >= escalate_at %s: allow escalated to approve", levelName(risk.Level), s.escalateAt))
	}
}
