package store

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/policy"
)

// budgetVariant turns an insert statement into the one for a call under a
// budget or a rate: airlock_admit (migration 00023) locks the agent's
// agent_pending row and reads, with fresh snapshots, the agent's submits of
// the last minute and what each budget spent; the guard then refuses the
// insert beyond the rate ($37) or, with $42, beyond a budget's remainder;
// the call's amounts ($38 ids, $40 amounts) are recorded with the action.
// The decision stored says what each budget has left ($43: the windows
// as written). Parameters $37-$43 exist only in these variants: a call no
// budget or rate applies to runs the statement without any of it. (In the
// others $37 is the submit event's digest; these store none, since the
// decision they audit is composed here, and the sealer works it out.)
func budgetVariant(q string) string {
	for _, r := range [...][2]string{
		{"\n), g AS (\n", "\n), adm AS (\n\tSELECT airlock_admit($2, $20, $37, $38::text[], $39::bigint[]) AS r\n), g AS (\n"},
		{" AS plan_ok\n), a AS (", ` AS plan_ok,
		$37 <= 0 OR (SELECT r[1]::bigint FROM adm) < $37 AS rate_ok,
		$10 = 'denied' OR NOT $42 OR NOT EXISTS (SELECT FROM unnest((SELECT r[3:] FROM adm)::numeric[], $40::text[]::numeric[], $41::text[]::numeric[]) u(spent, amount, lim)
			WHERE spent + amount > lim) AS budget_ok
), a AS (`},
		{"AND g.agent_ok AND g.room_ok AND g.plan_ok\n", "AND g.agent_ok AND g.room_ok AND g.plan_ok AND g.rate_ok AND g.budget_ok\n"},
		{"), j AS (", `), s AS (
	INSERT INTO budget_spends (action_id, agent_id, budget_id, amount, created_at)
	SELECT a.id, $2, u.id, u.amount, $20 FROM a, unnest($38::text[], $40::text[]::numeric[]) u(id, amount) WHERE $10 <> 'denied'
), j AS (`},
		// The decision stored (and audited) says, for a call checked
		// against its budgets, what each has left, read under the lock.
		{"), a AS (", `), d AS (
	SELECT CASE WHEN $10 = 'denied' OR NOT $42 THEN $12::jsonb
		ELSE coalesce(jsonb_set($12::jsonb, '{reason}', to_jsonb(($12::jsonb->>'reason') || '; ' || (
			SELECT string_agg(format('budget %s: spent %s of %s in %s, this call %s, %s left', to_jsonb(u.id),
				trim_scale(u.spent), trim_scale(u.lim), u.per, trim_scale(u.amount),
				trim_scale(greatest(u.lim - u.spent - CASE WHEN $10 = 'pending' THEN 0 ELSE u.amount END, 0)))
				|| CASE WHEN $10 = 'pending' THEN ' (it spends once approved)' ELSE ' after it' END, '; ' ORDER BY u.n)
			FROM unnest($38::text[], (SELECT r[3:] FROM adm)::numeric[], $40::text[]::numeric[], $41::text[]::numeric[], $43::text[])
				WITH ORDINALITY u(id, spent, amount, lim, per, n)))), $12::jsonb)
	END AS decision
), a AS (`},
		{"$11, $12, $13,", "$11, (SELECT decision FROM d), $13,"},
		{"$8, $11, $12, $23::jsonb, $37 FROM a", "$8, $11, (SELECT decision FROM d), $23::jsonb, NULL FROM a"},
		{"g.plan_ok, EXISTS (SELECT FROM a) FROM g", "g.plan_ok, EXISTS (SELECT FROM a), g.rate_ok, g.budget_ok, (SELECT r FROM adm), (SELECT decision->>'reason' FROM d) FROM g"},
	} {
		q = patchStatement("budgetVariant", q, r[0], r[1])
	}
	return q
}

// budgetArgs are the parameters $37-$43 of the budget variants.
func budgetArgs(g hitl.Guard) []any {
	ids := make([]string, len(g.Budgets))
	windows := make([]int64, len(g.Budgets))
	amounts := make([]string, len(g.Budgets))
	limits := make([]string, len(g.Budgets))
	for i, b := range g.Budgets {
		ids[i], windows[i] = b.ID, b.Window.Microseconds()
		amounts[i], limits[i] = ratText(b.Amount), ratText(b.Limit)
	}
	pers := make([]string, len(g.Budgets))
	for i, b := range g.Budgets {
		pers[i] = policy.Duration(b.Window).String()
	}
	return []any{g.RatePerMinute, ids, windows, amounts, limits, g.EnforceBudgets, pers}
}

// ratText writes r for a numeric parameter, exactly: Postgres numerics are
// decimals, and every amount and limit is one (read from a decimal).
func ratText(r *big.Rat) string {
	if n, exact := r.FloatPrec(); exact {
		return r.FloatString(n)
	}
	return r.FloatString(30) // not reached: amounts come from decimals
}

// admitResult turns what the guard found about the rate and the budgets
// into the guard's errors; r is what airlock_admit returned.
func admitResult(rateOK, budgetOK bool, r []string) error {
	if !rateOK {
		retry := time.Second
		if len(r) > 1 && r[1] != "" {
			if sec, err := strconv.ParseFloat(r[1], 64); err == nil {
				oldest := time.UnixMicro(int64(math.Round(sec * 1e6)))
				retry = max(time.Duration(math.Ceil(time.Until(oldest.Add(time.Minute)).Seconds()))*time.Second, time.Second)
			}
		}
		return &hitl.RateExceededError{RetryAfter: retry}
	}
	if !budgetOK {
		spent, err := parseRats(r[min(2, len(r)):])
		if err != nil {
			return err
		}
		return &hitl.BudgetExceededError{Spent: spent}
	}
	return nil
}

func parseRats(ss []string) ([]*big.Rat, error) {
	out := make([]*big.Rat, len(ss))
	for i, s := range ss {
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			return nil, fmt.Errorf("store: reading budget spend %q", s)
		}
		out[i] = r
	}
	return out, nil
}

// budgetSpentSQL is what each budget ($3 ids, $4 windows in µs) spent for
// agent $1 in its window ending at $2: the approved, running, succeeded
// and failed actions' amounts (as airlock_admit, migration 00033), leaving
// out action $5 (when not null).
const budgetSpentSQL = `
SELECT coalesce(array_agg(x.spent::text ORDER BY u.n), '{}')
FROM unnest($3::text[], $4::bigint[]) WITH ORDINALITY u(id, w, n)
CROSS JOIN LATERAL (SELECT coalesce(sum(s.amount), 0) AS spent FROM budget_spends s JOIN actions a ON a.id = s.action_id
	WHERE s.agent_id = $1 AND s.budget_id = u.id AND s.created_at > $2::timestamptz - u.w * interval '1 microsecond'
		AND s.action_id IS DISTINCT FROM $5::uuid AND a.status IN ('approved', 'running', 'succeeded', 'failed')) x`

// budgetSpent runs budgetSpentSQL on q.
func budgetSpent(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, agentID string, budgets []hitl.BudgetCharge, now time.Time, except *string) ([]*big.Rat, error) {
	ids := make([]string, len(budgets))
	windows := make([]int64, len(budgets))
	for i, b := range budgets {
		ids[i], windows[i] = b.ID, b.Window.Microseconds()
	}
	var out []string
	if err := q.QueryRow(ctx, budgetSpentSQL, agentID, now, ids, windows, except).Scan(&out); err != nil {
		return nil, fmt.Errorf("store: reading budgets: %w", err)
	}
	return parseRats(out)
}

// BudgetSpent implements hitl.BudgetStore.
func (s *Store) BudgetSpent(ctx context.Context, agentID string, budgets []hitl.BudgetCharge, now time.Time) ([]*big.Rat, error) {
	return budgetSpent(ctx, s.pool, agentID, budgets, now, nil)
}

// approvalFits is UpdateAction's check of hitl.Effects.Budgets for a's
// approval, in its transaction, after a's row is locked: the agent's
// agent_pending row is locked (as airlock_admit locks it for a budgeted
// submit, so the two are decided one after the other; the lock order,
// store.go), then what each budget spent without a is read with a
// snapshot taken after the lock, and a's amount must fit under what is
// left (else *hitl.BudgetExceededError). a's amounts, as checked, are
// then recorded under each budget (a budget added since the submit
// charged nothing; one whose amount changed since is charged what was
// checked), dated at the approval (UpdateAction dates every approved
// call's spends so).
func approvalFits(ctx context.Context, tx pgx.Tx, a *hitl.Action, budgets []hitl.BudgetCharge) error {
	if _, err := tx.Exec(ctx, `SELECT FROM agent_pending WHERE agent_id = $1 FOR UPDATE`, a.AgentID); err != nil {
		return fmt.Errorf("store: locking the agent's budgets: %w", err)
	}
	spent, err := budgetSpent(ctx, tx, a.AgentID, budgets, a.UpdatedAt, &a.ID)
	if err != nil {
		return err
	}
	for i, b := range budgets {
		if new(big.Rat).Add(spent[i], b.Amount).Cmp(b.Limit) > 0 {
			return &hitl.BudgetExceededError{Spent: spent}
		}
	}
	ids := make([]string, len(budgets))
	amounts := make([]string, len(budgets))
	for i, b := range budgets {
		ids[i], amounts[i] = b.ID, ratText(b.Amount)
	}
	_, err = tx.Exec(ctx, `INSERT INTO budget_spends (action_id, agent_id, budget_id, amount, created_at)
		SELECT $1, $2, u.id, u.amount, $3 FROM unnest($4::text[], $5::text[]::numeric[]) u(id, amount)
		ON CONFLICT (action_id, budget_id) DO UPDATE SET amount = excluded.amount`, a.ID, a.AgentID, a.UpdatedAt, ids, amounts)
	if err != nil {
		return fmt.Errorf("store: recording the approval's spend: %w", err)
	}
	return nil
}
