package policy

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
)

// SourceBudget is the decision source of a call a budget turned into its
// effect.
const SourceBudget = "budget"

// Budget limits limits.
const (
	// MaxBudgets is the most budgets one document may hold.
	MaxBudgets = 100
	// MaxBudgetWindow is the longest sliding window a budget may sum over.
	MaxBudgetWindow = 366 * 24 * time.Hour
	// MaxRatePerMinute bounds settings.rate.per_minute.
	MaxRatePerMinute = 1_000_000
)

// Budget is a spending cap (VIMS "agent wallets"): the amounts of the
// agent's approved, running and succeeded actions matching Tool in the
// sliding window Per, plus this call's, over Limit turn the call into
// Effect. The JSON field names are part of the API.
type Budget struct {
	// ID names the budget in decisions and in what is counted; rules' id
	// syntax, unique among the document's budgets.
	ID string `json:"id"`
	// Tool is a tool name or glob, as in rules.
	Tool string `json:"tool"`
	// Amount is a CEL expression over args, agent, risk and tool giving
	// the call's amount, a number >= 0 (e.g. "args.amount").
	Amount string `json:"amount"`
	// Per is the sliding window.
	Per Duration `json:"per"`
	// Limit is the most the window may hold, exactly as written.
	Limit json.Number `json:"limit"`
	// Effect is approve (a reviewer decides) or deny.
	Effect Effect `json:"effect"`
}

// Rate bounds an agent's submits (settings.rate).
type Rate struct {
	// PerMinute is the most submits in any sliding minute.
	PerMinute int `json:"per_minute"`
}

// compiledBudget is a Budget ready for evaluation.
type compiledBudget struct {
	Budget
	match toolMatcher
	prg   cel.Program
	limit *big.Rat
}

// Charge is what one call costs under one budget.
type Charge struct {
	// BudgetID names the budget (unique across the fleet and agent
	// policy: the agent's is prefixed "agent:", the fleet's "fleet:").
	BudgetID string
	// Amount is the call's amount, exact.
	Amount *big.Rat
	// Limit is the budget's limit.
	Limit *big.Rat
	// Window is the budget's sliding window.
	Window time.Duration
	// Effect is what exceeding the budget does.
	Effect Effect
	// Err is set when the amount could not be computed: the call must be
	// denied (fail closed).
	Err error
}

func compileBudgets(bs []Budget) ([]compiledBudget, error) {
	if len(bs) > MaxBudgets {
		return nil, docError("budgets", "%d budgets; at most %d are allowed", len(bs), MaxBudgets)
	}
	out := make([]compiledBudget, len(bs))
	seen := make(map[string]bool, len(bs))
	for i, b := range bs {
		fail := func(field, format string, args ...any) ([]compiledBudget, error) {
			return nil, docError(fmt.Sprintf("budgets[%d].%s", i, field), format, args...)
		}
		switch {
		case !validID(b.ID):
			return fail("id", "id must be 1-%d characters from A-Z a-z 0-9 . _ -", maxIDLength)
		case seen[b.ID]:
			return fail("id", "duplicate budget id %q", b.ID)
		}
		seen[b.ID] = true
		m, err := newToolMatcher(b.Tool)
		if err != nil {
			return fail("tool", "%v", err)
		}
		if b.Effect != Approve && b.Effect != Deny {
			return fail("effect", "effect must be approve or deny, got %q", b.Effect)
		}
		if w := b.Per.Std(); w < time.Second || w > MaxBudgetWindow {
			return fail("per", "per must be between 1s and %s, got %s", Duration(MaxBudgetWindow), b.Per)
		}
		limit, ok := exactDecimal(string(b.Limit))
		if !ok || limit.Sign() < 0 {
			return fail("limit", "limit must be a number >= 0, got %q", b.Limit)
		}
		if b.Amount == "" {
			return fail("amount", "amount is required (a CEL expression such as args.amount)")
		}
		prg, err := compileExpression(b.Amount, func(t *cel.Type) bool {
			return t.IsExactType(cel.IntType) || t.IsExactType(cel.UintType) || t.IsExactType(cel.DoubleType) || t.IsExactType(cel.DynType)
		}, "an amount must be a number")
		if err != nil {
			return fail("amount", "%v", err)
		}
		out[i] = compiledBudget{Budget: b, match: m, prg: prg, limit: limit}
	}
	return out, nil
}

// exactDecimal parses a decimal number exactly.
func exactDecimal(s string) (*big.Rat, bool) {
	if s == "" || len(s) > maxNumberLen {
		return nil, false
	}
	return new(big.Rat).SetString(s)
}

// HasBudgets reports whether any budget or rate applies to the set; the
// submit path skips all budget work when it is false.
func (s Set) HasBudgets() bool {
	return (s.Fleet != nil && len(s.Fleet.budgets) > 0) || (s.Agent != nil && len(s.Agent.budgets) > 0)
}

// Charges evaluates every budget matching in.Tool, fleet budgets first.
// It returns nil when none matches.
func (s Set) Charges(in Input) []Charge {
	var out []Charge
	act := activation{in: &in}
	for role, c := range [...]*Compiled{roleFleet: s.Fleet, roleAgent: s.Agent} {
		if c == nil {
			continue
		}
		for i := range c.budgets {
			b := &c.budgets[i]
			if !b.match.matches(in.Tool) {
				continue
			}
			ch := Charge{BudgetID: roleNames[role] + ":" + b.ID, Limit: b.limit, Window: b.Per.Std(), Effect: b.Effect}
			ch.Amount, ch.Err = act.amount(b.prg)
			out = append(out, ch)
		}
	}
	return out
}

// amount evaluates a budget's amount expression exactly.
func (a *activation) amount(prg cel.Program) (*big.Rat, error) {
	out, _, err := prg.Eval(a)
	if err != nil {
		return nil, err
	}
	var r *big.Rat
	switch t := out.(type) {
	case types.Int:
		r = new(big.Rat).SetInt64(int64(t))
	case types.Uint:
		r = new(big.Rat).SetUint64(uint64(t))
	case types.Double:
		f := float64(t)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("amount is %v", f)
		}
		// The shortest decimal of the double: what the agent wrote
		// (numberValue makes a double only of such a decimal), so 0.1
		// is one tenth exactly, not the binary double nearest it.
		r, _ = new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	case decimal:
		r = t.r
	default:
		return nil, fmt.Errorf("amount is %s, not a number", out.Type().TypeName())
	}
	if r.Sign() < 0 {
		return nil, fmt.Errorf("amount %s is negative", r.FloatString(6))
	}
	return r, nil
}

// RatePerMinute is the agent's submit rate bound (settings.rate; the
// agent's replaces the fleet's), 0 for none.
func (s Set) RatePerMinute() int {
	n := 0
	for _, p := range [...]*Settings{settingsOf(s.Fleet), settingsOf(s.Agent)} {
		if p.Rate != nil {
			n = p.Rate.PerMinute
		}
	}
	return n
}

// FormatAmount writes an exact amount as a short decimal ("0.3", "10",
// or a fraction's decimal to 12 places when it has no finite one).
func FormatAmount(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	if n, exact := r.FloatPrec(); exact {
		return r.FloatString(n)
	}
	return r.FloatString(12)
}
