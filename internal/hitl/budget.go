package hitl

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/policy"
)

// BudgetCharge is one budget a call is charged to, as the submit statement
// checks it (Guard.Budgets).
type BudgetCharge struct {
	// ID names the budget ("fleet:<id>" or "agent:<id>").
	ID string
	// Amount is the call's amount, exact.
	Amount *big.Rat
	// Limit is the budget's limit.
	Limit *big.Rat
	// Window is the sliding window summed over.
	Window time.Duration
}

// BudgetExceededError: the call does not fit under a budget's remainder
// (Guard.EnforceBudgets); nothing was written. Spent holds what each of
// Guard.Budgets has spent in its window, read under the agent's lock.
type BudgetExceededError struct {
	Spent []*big.Rat
}

func (e *BudgetExceededError) Error() string { return "hitl: budget exceeded" }

// RateExceededError: the agent submitted settings.rate.per_minute calls in
// the last minute; nothing was written. RetryAfter is when the window has
// room again.
type RateExceededError struct {
	RetryAfter time.Duration
}

func (e *RateExceededError) Error() string { return "hitl: rate exceeded" }

// BudgetStore reads what budgets have spent; the Store implements it.
type BudgetStore interface {
	// BudgetSpent returns what each budget spent for agentID in the
	// window before now (approved, running and succeeded actions).
	BudgetSpent(ctx context.Context, agentID string, budgets []BudgetCharge, now time.Time) ([]*big.Rat, error)
}

// BudgetStatus is what one budget that matches an action has left, for
// reviewers.
type BudgetStatus struct {
	// ID names the budget ("fleet:<id>" or "agent:<id>").
	ID string `json:"id"`
	// Window is the budget's sliding window ("24h").
	Window string `json:"per"`
	// Limit, Spent and Left are exact decimals; Left is never negative.
	Limit string `json:"limit"`
	Spent string `json:"spent"`
	Left  string `json:"left"`
	// Amount is the action's own amount under the budget.
	Amount string `json:"amount"`
	// Fits says whether approving the action now keeps the budget within
	// its limit.
	Fits bool `json:"fits"`
	// Hard says the budget's effect is deny: an approval that does not fit
	// is refused (hardBudgets), rather than spending beyond it.
	Hard bool `json:"hard"`
}

// charges evaluates the budgets of set matching the call. A budget whose
// amount cannot be computed is returned as an error (fail closed).
func charges(set policy.Set, in policy.Input) ([]BudgetCharge, []policy.Effect, error) {
	cs := set.Charges(in)
	if len(cs) == 0 {
		return nil, nil, nil
	}
	out := make([]BudgetCharge, len(cs))
	effects := make([]policy.Effect, len(cs))
	for i, c := range cs {
		if c.Err != nil {
			return nil, nil, fmt.Errorf("budget %q: amount: %v", c.BudgetID, c.Err)
		}
		out[i] = BudgetCharge{ID: c.BudgetID, Amount: c.Amount, Limit: c.Limit, Window: c.Window}
		effects[i] = c.Effect
	}
	return out, effects, nil
}

// exceeded describes the budgets the call does not fit under and returns
// the strictest of their effects ("" when it fits under every one).
func exceeded(bs []BudgetCharge, effects []policy.Effect, spent []*big.Rat) (policy.Effect, string) {
	var effect policy.Effect
	var why []string
	for i, b := range bs {
		if i >= len(spent) {
			break
		}
		total := new(big.Rat).Add(spent[i], b.Amount)
		if total.Cmp(b.Limit) <= 0 {
			continue
		}
		if effect == "" || effects[i].Rank() > effect.Rank() {
			effect = effects[i]
		}
		why = append(why, fmt.Sprintf("budget %q exceeded: spent %s of %s in %s, %s left, this call %s",
			b.ID, policy.FormatAmount(spent[i]), policy.FormatAmount(b.Limit), policy.Duration(b.Window),
			policy.FormatAmount(left(b.Limit, spent[i])), policy.FormatAmount(b.Amount)))
	}
	return effect, strings.Join(why, "; ")
}

// left is limit - spent, never negative.
func left(limit, spent *big.Rat) *big.Rat {
	l := new(big.Rat).Sub(limit, spent)
	if l.Sign() < 0 {
		l.SetInt64(0)
	}
	return l
}

// Budgets returns what every budget matching a has left now, for the
// reviewer deciding on it; nil when none matches.
func (s *Service) Budgets(ctx context.Context, a *Action) ([]BudgetStatus, error) {
	bstore, ok := s.store.(BudgetStore)
	if !ok {
		return nil, nil
	}
	agent, set, err := s.store.CachedAgentPolicy(ctx, a.AgentID)
	if err != nil {
		return nil, err
	}
	bs, effects, err := matchingBudgets(agent, set, a)
	if err != nil || len(bs) == 0 {
		return nil, nil //nolint:nilerr // an amount that cannot be computed shows no budget
	}
	spent, err := bstore.BudgetSpent(ctx, a.AgentID, bs, s.now().UTC())
	if err != nil {
		return nil, err
	}
	out := make([]BudgetStatus, len(bs))
	for i, b := range bs {
		l := left(b.Limit, spent[i])
		out[i] = BudgetStatus{ID: b.ID, Window: policy.Duration(b.Window).String(), Limit: policy.FormatAmount(b.Limit),
			Spent: policy.FormatAmount(spent[i]), Left: policy.FormatAmount(l), Amount: policy.FormatAmount(b.Amount),
			Fits: b.Amount.Cmp(l) <= 0, Hard: effects[i] == policy.Deny}
	}
	return out, nil
}

// matchingBudgets evaluates the budgets of set that match the stored
// action a (none when set has no budget).
func matchingBudgets(agent Agent, set policy.Set, a *Action) ([]BudgetCharge, []policy.Effect, error) {
	if !set.HasBudgets() {
		return nil, nil, nil
	}
	return charges(set, policy.Input{Tool: a.Tool, Args: a.Args, Agent: policy.AgentInfo{ID: agent.ID, Name: agent.Name},
		Risk: policy.RiskInfo{Level: string(a.Risk.Level), Score: a.Risk.Score, Reasons: a.Risk.Reasons, Injection: a.Risk.Injection}})
}

// hardBudgets are the budgets with effect deny that match a under its
// agent's policy as it is now (read, not cached): the update that makes a
// approved (mutate: whoever or whatever approves it) must fit under each
// (Effects.Budgets), as a submit must. A
// budget whose effect is approve is the reviewer's to spend beyond; one
// whose effect is deny is not, whoever approves. An amount that cannot be
// computed refuses the approval (fail closed).
func (s *Service) hardBudgets(ctx context.Context, a *Action) ([]BudgetCharge, error) {
	agent, set, err := s.store.AgentPolicy(ctx, a.AgentID)
	if err != nil {
		return nil, err
	}
	bs, effects, err := matchingBudgets(agent, set, a)
	if err != nil {
		return nil, apperr.Conflict("action %s cannot be approved: %v (fail closed)", a.ID, err)
	}
	var hard []BudgetCharge
	for i, b := range bs {
		if effects[i] == policy.Deny {
			hard = append(hard, b)
		}
	}
	return hard, nil
}

// overHardBudget is the refusal of an approval that does not fit under
// budgets (hardBudgets), given what each spent without the action.
func overHardBudget(id string, budgets []BudgetCharge, spent []*big.Rat) error {
	effects := make([]policy.Effect, len(budgets))
	for i := range effects {
		effects[i] = policy.Deny
	}
	_, why := exceeded(budgets, effects, spent)
	return apperr.Conflict("approving action %s would pass a budget whose effect is deny: %s; deny the action, or raise the budget", id, why)
}

// applyBudgets readies guard for the budgets and rate of set. It denies a
// (returning true) when a budget's amount cannot be computed: fail closed.
// A denial is never charged; with no budget and no rate it does nothing.
func applyBudgets(a *Action, set policy.Set, in policy.Input, guard *Guard) ([]policy.Effect, bool) {
	guard.RatePerMinute = set.RatePerMinute()
	if !set.HasBudgets() || a.Decision.Effect == string(policy.Deny) {
		return nil, false
	}
	bs, effects, err := charges(set, in)
	if err != nil {
		a.Decision = Decision{Effect: string(policy.Deny), By: "policy", PolicyVersion: a.Decision.PolicyVersion,
			Source: policy.SourceBudget, Reason: err.Error() + " (fail closed)"}
		return nil, true
	}
	guard.Budgets, guard.EnforceBudgets = bs, len(bs) > 0
	return effects, false
}

// overBudget turns a, which did not fit under a budget, into what the
// budget's effect makes of it (a denial, or a pending action whose reason
// says the budget is exceeded and what is left) and returns its submit
// event. The insert that follows records the amounts but checks no
// budget: a reviewer approving the action decides to spend beyond it.
func overBudget(a *Action, guard *Guard, effects []policy.Effect, spent []*big.Rat, timeout time.Duration, now time.Time) audit.Event {
	effect, why := exceeded(guard.Budgets, effects, spent)
	guard.EnforceBudgets = false
	prev := a.Decision
	a.Decision = Decision{Effect: string(effect), By: "policy", PolicyVersion: prev.PolicyVersion, Source: policy.SourceBudget, Reason: why}
	switch {
	case effect == policy.Deny || effect == "":
		a.Decision.Effect = string(policy.Deny)
		a.Status = StatusDenied
		a.Phrase, a.ExpiresAt, a.RequiredApprovals = "", nil, 1
	case a.Status == StatusPending:
		a.Decision.Reason += " (" + prev.Reason + ")" // the rule's approvals and timeout stay
	default:
		a.Status = StatusPending
		a.RequiredApprovals = 1
		exp := now.Add(timeout)
		a.ExpiresAt = &exp
	}
	return a.AuditEvent(audit.KindActionSubmitted, "agent:"+a.AgentID, map[string]any{
		"status": a.Status, "required_approvals": a.RequiredApprovals, "expires_at": a.ExpiresAt, "reason": a.Reason, "budget": true,
	})
}
