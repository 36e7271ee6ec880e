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
	// Notify are the targets told that the action is pending (the rule's
	// notify and settings.notify).
	Notify []string
	// Steps are step 0 (the rule's reviewers and Notify, fired at once)
	// and the escalation steps (and the reminder) that fire later.
	Steps []RouteStep
}

// RouteStep is one step of a Route.
type RouteStep struct {
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
// when nothing is configured (the common case costs nothing more).
func routeFor(d policy.Decision, s policy.EffectiveSettings, now time.Time) *Route {
	r := d.Route
	if r.Empty() && len(s.Notify) == 0 {
		return nil
	}
	targets := r.Notify
	if len(s.Notify) > 0 {
		targets = slices.Clone(r.Notify)
		for _, n := range s.Notify {
			if !slices.Contains(targets, n) {
				targets = append(targets, n)
			}
		}
	}
	out := &Route{Notify: targets, Steps: make([]RouteStep, 0, 1+len(r.Escalate))}
	out.Steps = append(out.Steps, RouteStep{Step: 0, Due: now, Notify: nonNil(targets), Reviewers: nonNil(r.Reviewers)})
	for i, st := range r.Escalate {
		out.Steps = append(out.Steps, RouteStep{Step: i + 1, After: st.After.Std(), Due: now.Add(st.After.Std()),
			Notify: nonNil(st.Notify), Reviewers: nonNil(st.Reviewers)})
	}
	remind := len(targets) > 0
	if s.Remind != nil && !*s.Remind {
		remind = false
	}
	if remind && len(r.Escalate) == 0 && d.Timeout > 0 {
		after := policy.RemindAfter(d.Timeout)
		out.Steps = append(out.Steps, RouteStep{Step: 1, After: after, Due: now.Add(after), Notify: targets, Reminder: true})
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ReviewerAccess is what the store knows of who may approve an action.
type ReviewerAccess struct {
	// Restricted: the rule named reviewers, so only members of Groups may
	// approve.
	Restricted bool
	// Groups are the groups that may approve now: the rule's and those of
	// the escalation steps that fired.
	Groups []string
	// Member: the reviewer asked about is in one of Groups.
	Member bool
}

// reviewerProblem says why reviewer is outside the groups that may approve
// a, or "".
func (s *Service) reviewerProblem(ctx context.Context, a *Action, reviewer string) (string, error) {
	acc, err := s.store.ReviewerAccess(ctx, a.ID, reviewer)
	if err != nil {
		return "", err
	}
	if !acc.Restricted || acc.Member {
		return "", nil
	}
	return "only members of the reviewer group(s) " + strings.Join(acc.Groups, ", ") + " may approve this action (rule " +
		a.Decision.RuleID + " names its reviewers); " + reviewer + " is in none of them", nil
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
