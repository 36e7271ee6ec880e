package policy

import (
	"fmt"
	"slices"
	"time"
)

// Bounds on who a rule tells and who may approve what it holds.
const (
	// MaxRouteNames bounds a notify or reviewers list.
	MaxRouteNames = 32
	// MaxEscalationSteps bounds a rule's escalate list.
	MaxEscalationSteps = 10
	maxRouteNameLength = 64
)

// EscalationStep is one step of a rule's escalate list: After the action
// has been pending that long, the targets in Notify are told and the groups
// in Reviewers may approve it too. A step fires once; expiry still happens
// at the action's expires_at.
type EscalationStep struct {
	// After is how long after the submit the step fires; positive, and
	// shorter than the rule's timeout to ever fire.
	After Duration `json:"after"`
	// Notify names notification targets told that the action escalated.
	Notify []string `json:"notify,omitempty"`
	// Reviewers names reviewer groups whose members may approve from then
	// on, beside the rule's reviewers.
	Reviewers []string `json:"reviewers,omitempty"`
}

// References are the names a document uses that live outside it: the
// notification targets and reviewer groups its rules and settings name,
// each sorted and without duplicates. The store refuses a document naming
// one that does not exist (422).
type References struct {
	Targets []string
	Groups  []string
}

// References returns the targets and groups d names.
func (d Document) References() References {
	var r References
	r.Targets = append(r.Targets, d.Settings.Notify...)
	for _, rule := range d.Rules {
		r.Targets = append(r.Targets, rule.Notify...)
		r.Groups = append(r.Groups, rule.Reviewers...)
		for _, st := range rule.Escalate {
			r.Targets = append(r.Targets, st.Notify...)
			r.Groups = append(r.Groups, st.Reviewers...)
		}
	}
	slices.Sort(r.Targets)
	slices.Sort(r.Groups)
	r.Targets, r.Groups = slices.Compact(r.Targets), slices.Compact(r.Groups)
	return r
}

// ValidRouteName reports whether name can name a notification target or a
// reviewer group: 1–64 characters from [a-z0-9._-], starting with a letter
// or digit.
func ValidRouteName(name string) bool {
	if len(name) == 0 || len(name) > maxRouteNameLength {
		return false
	}
	for i, c := range []byte(name) {
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// routeNamesProblem says what is wrong with a notify or reviewers list, or "".
func routeNamesProblem(names []string) string {
	if len(names) > MaxRouteNames {
		return fmt.Sprintf("%d names; at most %d are allowed", len(names), MaxRouteNames)
	}
	for _, n := range names {
		if !ValidRouteName(n) {
			return fmt.Sprintf("%q is not a name (1-%d characters from a-z 0-9 . _ -)", n, maxRouteNameLength)
		}
	}
	return ""
}

// validateRoute checks a rule's notify, reviewers and escalate fields.
func validateRoute(i int, r Rule) error {
	fail := func(field, format string, args ...any) error { return ruleError(i, r.ID, field, format, args...) }
	routed := len(r.Notify) > 0 || len(r.Reviewers) > 0 || len(r.Escalate) > 0
	if routed && r.Effect != Approve {
		return fail("notify", "notify, reviewers and escalate are only allowed on approve rules")
	}
	if msg := routeNamesProblem(r.Notify); msg != "" {
		return fail("notify", "%s", msg)
	}
	if msg := routeNamesProblem(r.Reviewers); msg != "" {
		return fail("reviewers", "%s", msg)
	}
	if len(r.Escalate) > MaxEscalationSteps {
		return fail("escalate", "%d steps; at most %d are allowed", len(r.Escalate), MaxEscalationSteps)
	}
	for j, st := range r.Escalate {
		field := fmt.Sprintf("escalate[%d]", j)
		switch {
		case st.After.Std() <= 0:
			return fail(field+".after", "after must be a positive duration such as \"5m\"")
		case st.After.Std() > MaxTimeout:
			return fail(field+".after", "after must be at most %s", Duration(MaxTimeout))
		case len(st.Notify) == 0 && len(st.Reviewers) == 0:
			return fail(field, "a step needs notify, reviewers or both")
		}
		if msg := routeNamesProblem(st.Notify); msg != "" {
			return fail(field+".notify", "%s", msg)
		}
		if msg := routeNamesProblem(st.Reviewers); msg != "" {
			return fail(field+".reviewers", "%s", msg)
		}
	}
	return nil
}

// Route is who a pending decision tells and who may approve it: what every
// approve rule that matched names (no rules when none did: a default, a
// risk setting). Every one of those rules holds the action, so each one's
// reviewers apply (an approver must be in one of the groups of each rule
// that names reviewers), and its notify targets and escalation steps too.
// Its slices are shared with the compiled policy: read them, never write
// to them.
type Route struct {
	// Rules are the matching approve rules, in the order Decide considers
	// them (fleet before agent, then document order): the first is
	// Decision.RuleID's.
	Rules []RuleRoute
}

// RuleRoute is what one matching approve rule names.
type RuleRoute struct {
	// Source is the policy the rule belongs to: fleet or agent.
	Source string
	// RuleID is the rule's id.
	RuleID string
	// Notify are the rule's notification targets.
	Notify []string
	// Reviewers are the groups whose members alone may approve what the
	// rule holds (empty: every reviewer).
	Reviewers []string
	// Escalate are the rule's escalation steps.
	Escalate []EscalationStep
}

// Empty reports whether r names nothing.
func (r RuleRoute) Empty() bool {
	return len(r.Notify) == 0 && len(r.Reviewers) == 0 && len(r.Escalate) == 0
}

// Empty reports whether no rule of r names anything.
func (r Route) Empty() bool {
	for _, rr := range r.Rules {
		if !rr.Empty() {
			return false
		}
	}
	return true
}

// Notify returns the notification targets of every rule, each once, in
// order (nil when none names any).
func (r Route) Notify() []string {
	var out []string
	for _, rr := range r.Rules {
		for _, n := range rr.Notify {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// Reviewers returns the reviewers of every rule that names some, in
// order: an approver must be a member of a group of each list (nil: every
// reviewer may approve).
func (r Route) Reviewers() [][]string {
	var out [][]string
	for _, rr := range r.Rules {
		if len(rr.Reviewers) > 0 {
			out = append(out, rr.Reviewers)
		}
	}
	return out
}

// remindAfter is when the fleet's reminder fires for a timeout.
func remindAfter(timeout time.Duration) time.Duration { return timeout / 2 }

// RemindAfter returns when the "remind at half the timeout" step fires for
// an action pending for timeout.
func RemindAfter(timeout time.Duration) time.Duration { return remindAfter(timeout) }
