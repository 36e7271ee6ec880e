package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// budgetDoc is a policy allowing payments.send (or making it wait, with
// rule "approve") under one budget.
func budgetDoc(rule, limit, per, effect string) map[string]any {
	return map[string]any{
		"rules":   []map[string]any{{"id": "pay", "tool": "payments.send", "effect": rule}},
		"budgets": []map[string]any{{"id": "wallet", "tool": "payments.*", "amount": "args.amount", "per": per, "limit": json.Number(limit), "effect": effect}},
	}
}

func pay(t *testing.T, c *client.Client, amount string) *client.Action {
	t.Helper()
	a, err := c.Submit(t.Context(), client.SubmitRequest{Tool: "payments.send", Args: map[string]any{"amount": json.Number(amount), "to": "acme"}})
	require.NoError(t, err)
	return a
}

// TestBudgetConcurrent: 100 concurrent calls against a budget with room
// for 10 → exactly 10 allowed; the other 90 wait for a reviewer (the
// budget's effect approve), their reason saying the budget is exceeded
// and that nothing is left. Then a budget with effect deny, the same way.
func TestBudgetConcurrent(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	for _, effect := range []string{"approve", "deny"} {
		agent := env.Agent("spender-"+effect, budgetDoc("allow", "10", "24h", effect))
		var wg sync.WaitGroup
		results := make([]*client.Action, 100)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "payments.send", Args: map[string]any{"amount": 1, "i": i}})
				if assert.NoError(t, err) {
					results[i] = a
				}
			}()
		}
		wg.Wait()
		counts := map[string]int{}
		for _, a := range results {
			require.NotNil(t, a)
			counts[a.Status]++
			if a.Status != "approved" {
				assert.Equal(t, "budget", a.Decision.Source)
				assert.Contains(t, a.Decision.Reason, `budget "agent:wallet" exceeded: spent 10 of 10 in 24h, 0 left, this call 1`)
			}
		}
		want := map[string]int{"approved": 10, "pending": 90}
		if effect == "deny" {
			want = map[string]int{"approved": 10, "denied": 90}
		}
		assert.Equal(t, want, counts, effect)
	}
}

// TestBudgetExactAmounts: amounts are summed exactly (0.1 + 0.2 fits under
// 0.3, as it would not in binary floating point), and a call that would
// pass the limit by the smallest amount is over it.
func TestBudgetExactAmounts(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("exact", budgetDoc("allow", "0.3", "24h", "deny"))
	first := pay(t, agent, "0.1")
	assert.Equal(t, "approved", first.Status)
	assert.Contains(t, first.Decision.Reason, `; budget "agent:wallet": spent 0 of 0.3 in 24h, this call 0.1, 0.2 left after it`,
		"the agent reads what is left")
	second := pay(t, agent, "0.2")
	assert.Equal(t, "approved", second.Status, "0.1 + 0.2 is 0.3 exactly")
	assert.Contains(t, second.Decision.Reason, "spent 0.1 of 0.3 in 24h, this call 0.2, 0 left after it")
	stored, err := agent.Get(t.Context(), second.ID)
	require.NoError(t, err)
	assert.Equal(t, second.Decision.Reason, stored.Decision.Reason, "as stored")
	over := pay(t, agent, "0.0000000000000000000001")
	assert.Equal(t, "denied", over.Status)
	assert.Contains(t, over.Decision.Reason, "spent 0.3 of 0.3")
	assert.Equal(t, "approved", pay(t, agent, "0").Status, "nothing more fits")
}

// TestBudgetWindow: spend older than the window no longer counts (time is
// moved by ageing the recorded spend in SQL, not by waiting).
func TestBudgetWindow(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("windowed", budgetDoc("allow", "10", "24h", "deny"))
	assert.Equal(t, "approved", pay(t, agent, "10").Status)
	assert.Equal(t, "denied", pay(t, agent, "1").Status)

	conn, err := pgx.Connect(env.Ctx(), env.DBURL)
	require.NoError(t, err)
	defer conn.Close(env.Ctx())
	_, err = conn.Exec(env.Ctx(), `UPDATE budget_spends SET created_at = created_at - interval '23 hours 59 minutes' WHERE agent_id = 'windowed'`)
	require.NoError(t, err)
	assert.Equal(t, "denied", pay(t, agent, "1").Status, "still inside 24h")
	_, err = conn.Exec(env.Ctx(), `UPDATE budget_spends SET created_at = created_at - interval '2 minutes' WHERE agent_id = 'windowed'`)
	require.NoError(t, err)
	assert.Equal(t, "approved", pay(t, agent, "10").Status, "the old spend fell out of the window")
	assert.Equal(t, "denied", pay(t, agent, "1").Status)
}

// TestBudgetCountsOnlyApproved: a pending call does not spend, a denied,
// cancelled or expired one never does, and an approved one counts from its
// approval.
func TestBudgetCountsOnlyApproved(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{ExpiryEvery: 20 * time.Millisecond})
	ctx := env.Ctx()
	doc := budgetDoc("approve", "10", "24h", "deny")
	doc["rules"].([]map[string]any)[0]["timeout"] = "1s"
	agent := env.Agent("careful", doc)
	alice := env.Reviewer("alice")

	quick := pay(t, agent, "10")
	got, err := agent.Wait(ctx, quick.ID)
	require.NoError(t, err)
	require.Equal(t, "expired", got.Status)
	doc["rules"].([]map[string]any)[0]["timeout"] = "15m"
	_, err = env.Admin.PutAgentPolicy(ctx, "careful", doc)
	require.NoError(t, err)

	first := pay(t, agent, "10")
	require.Equal(t, "pending", first.Status)
	assert.Contains(t, first.Decision.Reason, "this call 10, 10 left (it spends once approved)")
	second := pay(t, agent, "10")
	require.Equal(t, "pending", second.Status, "a pending call spends nothing")
	_, err = alice.Deny(ctx, first.ID, "no")
	require.NoError(t, err)
	_, err = agent.Cancel(ctx, second.ID)
	require.NoError(t, err)
	third := pay(t, agent, "10")
	require.Equal(t, "pending", third.Status, "expired, denied and cancelled calls spent nothing")
	_, err = approveWith(t, alice, third.ID, "")
	require.NoError(t, err)
	over := pay(t, agent, "1")
	assert.Equal(t, "denied", over.Status, "the approved call spent the budget")
	assert.Equal(t, "budget", over.Decision.Source)
}

// TestBudgetCountsWhatTheAgentReportsFailed: a call the agent ran itself
// and then reported failed still counts: the budget caps the agent, and
// the agent's own word that nothing was spent is not taken. Before, an
// agent could pay, report failed, and have its budget back, over and over
// (found by a review).
func TestBudgetCountsWhatTheAgentReportsFailed(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("shifty", budgetDoc("allow", "10", "24h", "deny"))
	paid := pay(t, agent, "10")
	require.Equal(t, "approved", paid.Status)
	failed, err := agent.ReportResult(ctx, paid.ID, client.Result{Outcome: "failed", Error: "declined, honest"})
	require.NoError(t, err)
	require.Equal(t, "failed", failed.Status)
	again := pay(t, agent, "1")
	assert.Equal(t, "denied", again.Status, "the failed call spent the budget")
	assert.Equal(t, "budget", again.Decision.Source)
}

// TestBudgetOnATokenCount: a budget on a model's token count
// (args.max_tokens) holds at submit and at approval. Before, the stored
// args had the count redacted ("token" is in the name), and every
// approval was refused: the amount could not be worked out again (found
// by a review).
func TestBudgetOnATokenCount(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("writer", map[string]any{
		"rules":   []map[string]any{{"id": "gen", "tool": "llm.generate", "effect": "approve"}},
		"budgets": []map[string]any{{"id": "tok", "tool": "llm.*", "amount": "args.max_tokens", "per": "24h", "limit": 1000, "effect": "deny"}},
	})
	alice := env.Reviewer("alice")
	a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "llm.generate", Args: map[string]any{"prompt": "hi", "max_tokens": 500}})
	require.NoError(t, err)
	require.Equal(t, "pending", a.Status)
	assert.Equal(t, json.Number("500"), a.Args["max_tokens"])
	got, err := approveWith(t, alice, a.ID, "")
	require.NoError(t, err)
	assert.Equal(t, "approved", got.Status)
}

// TestBudgetAmountError: an amount that cannot be computed denies the call
// (fail closed); a call of a tool no budget matches is not charged.
func TestBudgetAmountError(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	doc := budgetDoc("allow", "10", "24h", "approve")
	doc["rules"] = append(doc["rules"].([]map[string]any), map[string]any{"id": "mail", "tool": "email.send", "effect": "allow"})
	agent := env.Agent("sloppy", doc)
	a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "payments.send", Args: map[string]any{"to": "acme"}})
	require.NoError(t, err)
	assert.Equal(t, "denied", a.Status)
	assert.Equal(t, "budget", a.Decision.Source)
	assert.Contains(t, a.Decision.Reason, "fail closed")
	a, err = agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "email.send", Args: map[string]any{}})
	require.NoError(t, err)
	assert.Equal(t, "approved", a.Status)
}

// TestBudgetValidation: a bad budget or rate is refused with 422 naming
// the field, and nothing is stored.
func TestBudgetValidation(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	require.NoError(t, env.Admin.CreateAgent(ctx, "strict", "strict"))
	good := map[string]any{"id": "w", "tool": "payments.*", "amount": "args.amount", "per": "24h", "limit": 10, "effect": "approve"}
	with := func(k string, v any) map[string]any {
		b := map[string]any{}
		for kk, vv := range good {
			b[kk] = vv
		}
		b[k] = v
		return map[string]any{"rules": []any{}, "budgets": []any{b}}
	}
	for name, doc := range map[string]map[string]any{
		"bad CEL":          with("amount", "args.amount +"),
		"bool amount":      with("amount", "args.amount > 1"),
		"string amount":    with("amount", "'x'"),
		"no amount":        with("amount", ""),
		"allow effect":     with("effect", "allow"),
		"negative limit":   with("limit", -1),
		"zero window":      with("per", "0s"),
		"upper-case tool":  with("tool", "Payments"),
		"bad id":           with("id", "a b"),
		"rate per_minute0": {"rules": []any{}, "settings": map[string]any{"rate": map[string]any{"per_minute": 0}}},
	} {
		_, err := env.Admin.PutAgentPolicy(ctx, "strict", doc)
		assert.Equal(t, http.StatusUnprocessableEntity, client.StatusOf(err), "%s: %v", name, err)
	}
	_, err := env.Admin.PutAgentPolicy(ctx, "strict", map[string]any{"rules": []any{}, "budgets": []any{good, good}})
	assert.Equal(t, http.StatusUnprocessableEntity, client.StatusOf(err), "duplicate id")
	pv, err := env.Admin.PutAgentPolicy(ctx, "strict", map[string]any{"rules": []any{}, "budgets": []any{good},
		"settings": map[string]any{"rate": map[string]any{"per_minute": 5}}})
	require.NoError(t, err)
	assert.Equal(t, 1, pv.Version, "only the good document was stored")
}

// TestRateLimit: beyond settings.rate.per_minute a submit gets 429 with a
// Retry-After within the minute, and nothing is stored; another agent has
// its own count, and an agent's rate replaces the fleet's.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	doc := func(n int) map[string]any {
		return map[string]any{"rules": []map[string]any{{"id": "all", "tool": "*", "effect": "allow"}},
			"settings": map[string]any{"rate": map[string]any{"per_minute": n}}}
	}
	agent := env.Agent("chatty", doc(3))
	other := env.Agent("quiet", doc(3))
	for i := range 3 {
		_, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"i": i}})
		require.NoError(t, err)
	}
	refused := postSubmit(t, env, agent.Token(), `{"tool":"email.send","args":{"i":4}}`)
	require.Equal(t, http.StatusTooManyRequests, refused.status)
	assert.Equal(t, "rate_limited", refused.code)
	assert.Contains(t, refused.message, "settings.rate.per_minute")
	assertRetryWithinTheMinute(t, refused.retryAfter)

	_, err := other.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{}})
	require.NoError(t, err, "another agent has its own count")
	page, err := env.Auditor("audra").ListActions(ctx, nil)
	require.NoError(t, err)
	assert.Len(t, page.Actions, 4, "the refused submit stored nothing")

	conn, err := pgx.Connect(ctx, env.DBURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `UPDATE actions SET created_at = created_at - interval '61 seconds' WHERE agent_id = 'chatty'`)
	require.NoError(t, err)
	// A restarted instance holds nothing (TestRateHold): the database's
	// window decides.
	env.Restart()
	_, err = agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"i": 5}})
	require.NoError(t, err, "the minute has passed")
}

// TestRateHold: once an agent's rate refused a call, its next calls are
// refused at once until the Retry-After, before their bodies are decoded:
// a body the decoder would refuse (400) gets the same 429, so an agent
// past its limit costs no decoding, classification or policy evaluation.
// Another agent is not held.
func TestRateHold(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	doc := map[string]any{"rules": []map[string]any{{"id": "all", "tool": "*", "effect": "allow"}},
		"settings": map[string]any{"rate": map[string]any{"per_minute": 1}}}
	agent := env.Agent("chatty", doc)
	other := env.Agent("quiet", doc)
	_, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"i": 1}})
	require.NoError(t, err)

	post := func(body string) (int, string, string) {
		r := postSubmit(t, env, agent.Token(), body)
		return r.status, r.code, r.retryAfter
	}
	bad := `{"tool":"email.send","args":{"s":"a\u0000b"}}`
	status, code, _ := post(bad)
	require.Equal(t, http.StatusBadRequest, status, "not held yet: the decoder refuses the NUL")
	assert.Equal(t, "invalid_json", code)

	status, code, _ = post(`{"tool":"email.send","args":{"i":2}}`)
	require.Equal(t, http.StatusTooManyRequests, status, "the database's window refuses the second call")
	assert.Equal(t, "rate_limited", code)

	status, code, retry := post(bad)
	assert.Equal(t, http.StatusTooManyRequests, status, "held: refused before the body is decoded")
	assert.Equal(t, "rate_limited", code)
	assertRetryWithinTheMinute(t, retry)

	_, err = other.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{}})
	require.NoError(t, err, "another agent is not held")
}

// TestBudgetDenyHoldsAgainstApprovals: a budget whose effect is deny is a
// hard cap for reviewers too. Five calls of 30 under a limit of 100 each
// fit when submitted (they wait for a reviewer under the rule); approved
// at once by five reviewers, exactly three are approved and the other two
// get 409 saying what is left, and stay pending. Before, all five were
// approved (150 spent of 100). A deny budget added to the policy after a
// call was submitted holds for its approval too, and records its spend.
func TestBudgetDenyHoldsAgainstApprovals(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("payer", budgetDoc("approve", "100", "24h", "deny"))
	calls := make([]*client.Action, 5)
	for i := range calls {
		calls[i] = pay(t, agent, "30")
		require.Equal(t, "pending", calls[i].Status)
	}
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, a := range calls {
		rev := env.Reviewer("rev" + strconv.Itoa(i))
		wg.Go(func() { _, errs[i] = approveWith(t, rev, a.ID, "") })
	}
	wg.Wait()
	approved := 0
	for i, err := range errs {
		if err == nil {
			approved++
			continue
		}
		assert.Equal(t, http.StatusConflict, client.StatusOf(err))
		assert.Contains(t, err.Error(), "would pass a budget whose effect is deny")
		assert.Contains(t, err.Error(), `budget "agent:wallet" exceeded: spent 90 of 100 in 24h, 10 left, this call 30`)
		got, err := agent.Get(ctx, calls[i].ID)
		require.NoError(t, err)
		assert.Equal(t, "pending", got.Status, "a refused approval leaves the call pending")
	}
	assert.Equal(t, 3, approved, "%v", errs)

	// A budget added after the call was submitted.
	later := env.Agent("later", budgetDoc("approve", "1000", "24h", "approve"))
	big := pay(t, later, "50")
	require.Equal(t, "pending", big.Status)
	_, err := env.Admin.PutAgentPolicy(ctx, "later", budgetDoc("approve", "40", "24h", "deny"))
	require.NoError(t, err)
	rita := env.Reviewer("rita")
	_, err = approveWith(t, rita, big.ID, "")
	assert.Equal(t, http.StatusConflict, client.StatusOf(err))
	assert.Contains(t, err.Error(), "spent 0 of 40 in 24h, 40 left, this call 50")
	_, err = env.Admin.PutAgentPolicy(ctx, "later", budgetDoc("approve", "60", "24h", "deny"))
	require.NoError(t, err)
	_, err = approveWith(t, rita, big.ID, "")
	require.NoError(t, err, "it fits under the raised limit")
	over := pay(t, later, "20")
	require.Equal(t, "denied", over.Status, "the approval recorded its spend under the new budget")
	assert.Contains(t, over.Decision.Reason, "spent 50 of 60")
}

// TestBudgetApprovalRecordsWhatItChecked: an approval under a deny budget
// is checked with the call's amount under the policy as it is now, and
// that amount is what the call then spends (not the one recorded when it
// was submitted under an older policy).
func TestBudgetApprovalRecordsWhatItChecked(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	doc := budgetDoc("approve", "100", "24h", "deny")
	agent := env.Agent("repriced", doc)
	rita := env.Reviewer("rita")
	a, b := pay(t, agent, "60"), pay(t, agent, "50")
	require.Equal(t, "pending", b.Status, "50 fits while nothing is spent")
	_, err := approveWith(t, rita, a.ID, "")
	require.NoError(t, err)
	doc["budgets"].([]map[string]any)[0]["amount"] = "args.amount - 20"
	_, err = env.Admin.PutAgentPolicy(ctx, "repriced", doc)
	require.NoError(t, err)
	_, err = approveWith(t, rita, b.ID, "")
	require.NoError(t, err, "30 now: 60 + 30 fits under 100")
	c := pay(t, agent, "30")
	assert.Equal(t, "pending", c.Status, "%+v", c.Decision)
	assert.Contains(t, c.Decision.Reason, "spent 90 of 100", "the approval spent the 30 it was checked with, not the 50 recorded at submit")
}

// submitted is what a raw submit got back.
type submitted struct {
	status                    int
	code, message, retryAfter string
}

// postSubmit posts body to POST /api/v1/actions with the agent token.
func postSubmit(t *testing.T, env *apptest.Env, token, body string) submitted {
	t.Helper()
	req, err := http.NewRequestWithContext(env.Ctx(), http.MethodPost, env.URL+"/api/v1/actions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := env.HTTP.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return submitted{status: resp.StatusCode, code: out.Error.Code, message: out.Error.Message, retryAfter: resp.Header.Get("Retry-After")}
}

func assertRetryWithinTheMinute(t *testing.T, retryAfter string) {
	t.Helper()
	secs, err := strconv.Atoi(retryAfter)
	require.NoError(t, err, "Retry-After %q", retryAfter)
	assert.True(t, secs >= 1 && secs <= 61, "Retry-After %d within the minute", secs)
}
