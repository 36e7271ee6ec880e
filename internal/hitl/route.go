package hitl

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock/internal/eventbus"
	"github.com/airlockhq/airlock/internal/policy"
)

// Route is who a pending action tells and who may approve it, as its
// submit stores it (in the insert's transaction, only when a rule or the
// fleet configured any of it): the notification targets told now, and its
// steps.
type Route struct {
	// Notify are the targets told that the action is pending (every
	// matching rule's notify and settings.notify).
	Notify []string
	// Steps are, for each matching rule that names anything (its
	// clause), step 0 (the rule's reviewers and notify, fired at once)
	// and its escalation steps; and the reminder that fires later.
	Steps []RouteStep
}

// RouteStep is one step of a Route.
type RouteStep struct {
	// Clause numbers the rule the step belongs to among the action's
	// rules that name anything (0 first): a step's reviewers widen only
	// its own rule's. Every step of a route stored before the action's
	// rules were each recorded is clause 0.
	Clause int `json:"-"`
	// RuleID is the id of the rule the step belongs to ("" for the
	// fleet's targets alone, and for a route stored before it was
	// recorded: the action's rule_id).
	RuleID string `json:"rule_id"`
	// Step is 0 for the rule's own reviewers, 1.. for later steps.
	Step int `json:"step"`
	// After is how long after the submit the step fires.
	After time.Duration `json:"-"`
	// Due is when it fires.
	Due time.Time `json:"due_at"`
	// Notify are the targets told when it fires.
	Notify []string `json:"notify"`
	// Reviewers are the groups that may approve once it fired.
	Reviewers []string `json:"reviewers"`
	// Reminder marks the fleet's "remind at half the timeout" step.
	Reminder bool `json:"reminder"`
	// FiredAt is when it fired (nil: not yet).
	FiredAt *time.Time `json:"fired_at"`
}

// routeFor returns the route of an action d makes pending at now, or nil
// when nothing is configured (the common case costs nothing more). Every
// matching rule that names anything gets its own clause: its step 0 holds
// its reviewers, and its escalation steps widen only those.
func routeFor(d policy.Decision, s policy.EffectiveSettings, now time.Time) *Route {
	r := d.Route
	if r.Empty() && len(s.Notify) == 0 {
		return nil
	}
	targets := r.Notify()
	for _, n := range s.Notify {
		if !slices.Contains(targets, n) {
			targets = append(targets, n)
		}
	}
	out := &Route{Notify: targets}
	escalates := false
	for _, rule := range r.Rules {
		if rule.Empty() {
			continue
		}
		clause := 0
		if len(out.Steps) > 0 {
			clause = out.Steps[len(out.Steps)-1].Clause + 1
		}
		notify := rule.Notify
		if clause == 0 && len(s.Notify) > 0 {
			notify = slices.Clone(notify) // the fleet's targets are told with the first rule's
			for _, n := range s.Notify {
				if !slices.Contains(notify, n) {
					notify = append(notify, n)
				}
			}
		}
		out.Steps = append(out.Steps, RouteStep{Clause: clause, RuleID: rule.RuleID, Step: 0, Due: now,
			Notify: nonNil(notify), Reviewers: nonNil(rule.Reviewers)})
		for i, st := range rule.Escalate {
			out.Steps = append(out.Steps, RouteStep{Clause: clause, RuleID: rule.RuleID, Step: i + 1, After: st.After.Std(),
				Due: now.Add(st.After.Std()), Notify: nonNil(st.Notify), Reviewers: nonNil(st.Reviewers)})
			escalates = true
		}
	}
	if len(out.Steps) == 0 { // the fleet's targets alone
		out.Steps = append(out.Steps, RouteStep{Step: 0, Due: now, Notify: targets, Reviewers: []string{}})
	}
	remind := len(targets) > 0
	if s.Remind != nil && !*s.Remind {
		remind = false
	}
	if remind && !escalates && d.Timeout > 0 {
		after := policy.RemindAfter(d.Timeout)
		out.Steps = append(out.Steps, RouteStep{RuleID: out.Steps[0].RuleID, Step: 1, After: after, Due: now.Add(after),
			Notify: targets, Reminder: true, Reviewers: []string{}})
	}
	return out
}

// pendingRoute is the route stored with a when it is pending (nil
// otherwise), whatever made it pending: its rules (d.Route, with the
// fleet's targets), or a budget over what a grant or an allow rule
// approved. The reminder comes at half the time a waits.
func pendingRoute(a *Action, d policy.Decision, s policy.EffectiveSettings, now time.Time) *Route {
	if a.Status != StatusPending {
		return nil
	}
	if a.ExpiresAt != nil {
		d.Timeout = a.ExpiresAt.Sub(now)
	}
	return routeFor(d, s, now) // nil unless notifications, reviewers or escalation are configured
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ReviewerAccess is what the store knows of who may approve an action.
type ReviewerAccess struct {
	// Rules are the action's rules that name reviewers, in order: a
	// reviewer may approve only as a member of a group of every one (none:
	// every reviewer may).
	Rules []RuleAccess
}

// RuleAccess is who may approve an action as far as one of its rules
// that names reviewers says.
type RuleAccess struct {
	// RuleID is the rule's id ("" for a route stored before it was
	// recorded: the action's rule_id).
	RuleID string
	// Groups are the groups that may approve now: the rule's and those of
	// its escalation steps that fired.
	Groups []string
	// Member: the reviewer asked about is in one of Groups.
	Member bool
}

// reviewerProblem says why reviewer is outside the groups that may approve
// a, or "": they must be in a group of every rule of a that names
// reviewers.
func (s *Service) reviewerProblem(ctx context.Context, a *Action, reviewer string) (string, error) {
	acc, err := s.store.ReviewerAccess(ctx, a.ID, reviewer)
	if err != nil {
		return "", err
	}
	var why []string
	for _, r := range acc.Rules {
		if r.Member {
			continue
		}
		id := r.RuleID
		if id == "" {
			id = a.Decision.RuleID
		}
		why = append(why, "only members of the reviewer group(s) "+strings.Join(r.Groups, ", ")+" may approve this action (rule "+
			id+" names its reviewers); "+reviewer+" is in none of them")
	}
	return strings.Join(why, "; "), nil
}

// ActionRouting is what the action page shows of an action's
// notifications and escalations.
type ActionRouting struct {
	// Steps are its route's steps (none when nothing is configured).
	Steps []RouteStep `json:"escalations"`
	// Deliveries are its notifications, oldest first, with every attempt.
	Deliveries []Delivery `json:"deliveries"`
}

// Delivery is one notification of an action to one target.
type Delivery struct {
	ID          int64      `json:"id"`
	Target      string     `json:"target"`
	Event       string     `json:"event"`
	Step        int        `json:"step"`
	Status      string     `json:"status"` // queued | delivered | failed
	Attempts    []Attempt  `json:"attempts"`
	LastError   string     `json:"last_error,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	DeliveredAt *time.Time `json:"delivered_at"`
	NextAt      *time.Time `json:"next_attempt_at"`
}

// Attempt is one delivery attempt.
type Attempt struct {
	N          int       `json:"n"`
	At         time.Time `json:"at"`
	OK         bool      `json:"ok"`
	StatusCode int       `json:"status_code,omitempty"`
	Error      string    `json:"error,omitempty"`
}

// Routing returns the escalation steps and notification deliveries of an
// action.
func (s *Service) Routing(ctx context.Context, id string) (ActionRouting, error) {
	steps, err := s.store.RouteSteps(ctx, id)
	if err != nil {
		return ActionRouting{}, err
	}
	ds, err := s.store.Deliveries(ctx, id)
	if err != nil {
		return ActionRouting{}, err
	}
	return ActionRouting{Steps: steps, Deliveries: ds}, nil
}

// SweepEscalations fires every escalation step that is due on an action
// still pending, each once (audited, its targets told), and returns how
// many fired. Safe to run from several instances at once.
func (s *Service) SweepEscalations(ctx context.Context) (int, error) {
	total := 0
	for {
		ids, err := s.store.FireEscalations(ctx, 500)
		if err != nil {
			return total, err
		}
		for _, id := range ids {
			s.publish(eventbus.Updated, id)
		}
		total += len(ids)
		if len(ids) < 500 {
			return total, nil
		}
	}
}
