package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// designPolicy is the policy document from DESIGN.md.
var designPolicy = map[string]any{
	"default": "deny",
	"rules": []map[string]any{
		{"id": "reads", "tool": "fs.read", "effect": "allow"},
		{"id": "big-spend", "tool": "payments.send", "effect": "approve", "when": "args.amount > 100", "approvals": 2, "timeout": "15m"},
		{"id": "spend", "tool": "payments.send", "effect": "allow"},
		{"id": "no-shell", "tool": "shell.*", "effect": "deny"},
		{"id": "mail", "tool": "email.send", "effect": "approve", "timeout": "10m"},
	},
}

func submit(t *testing.T, c *client.Client, tool string, args map[string]any) *client.Action {
	t.Helper()
	a, err := c.Submit(context.Background(), client.SubmitRequest{Tool: tool, Args: args})
	require.NoError(t, err)
	return a
}

func TestPolicyOutcomes(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("billing-bot", designPolicy)

	cases := []struct {
		name, tool string
		args       map[string]any
		status     string
		rule       string
		approvals  int
	}{
		{"allow rule", "fs.read", map[string]any{"path": "README.md"}, "approved", "reads", 0},
		{"spending under cap is allowed", "payments.send", map[string]any{"amount": 50, "to": "acme"}, "approved", "spend", 0},
		{"spending over cap needs two approvals", "payments.send", map[string]any{"amount": 150, "to": "acme"}, "pending", "big-spend", 2},
		{"deny rule by glob", "shell.run", map[string]any{"cmd": "ls"}, "denied", "no-shell", 0},
		{"deny by default", "db.drop", map[string]any{"table": "users"}, "denied", "", 0},
		{"approve rule", "email.send", map[string]any{"to": "a@example.com", "body": "hi"}, "pending", "mail", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := submit(t, agent, tc.tool, tc.args)
			assert.Equal(t, tc.status, a.Status)
			assert.Equal(t, tc.rule, a.Decision.RuleID)
			assert.Equal(t, "policy", a.Decision.By)
			assert.NotEmpty(t, a.Decision.Reason)
			if tc.status == "pending" {
				assert.Equal(t, 1, a.Decision.PolicyVersion)
				assert.Equal(t, tc.approvals, a.RequiredApprovals)
				require.NotNil(t, a.ExpiresAt)
				assert.Empty(t, a.ConfirmationPhrase, "agents never see the confirmation phrase")
			}
		})
	}
}

func TestFleetDenyBeatsAgentAllow(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	_, err := env.Admin.PutFleetPolicy(ctx, map[string]any{"rules": []map[string]any{
		{"id": "no-payments-to-mallory", "tool": "payments.*", "effect": "deny", "when": `args.to == "mallory"`},
	}})
	require.NoError(t, err)
	agent := env.Agent("payer", map[string]any{"rules": []map[string]any{{"id": "pay", "tool": "payments.send", "effect": "allow"}}})

	a := submit(t, agent, "payments.send", map[string]any{"amount": 5, "to": "mallory"})
	assert.Equal(t, "denied", a.Status)
	assert.Equal(t, "no-payments-to-mallory", a.Decision.RuleID)
	assert.Equal(t, "fleet", a.Decision.Source)

	b := submit(t, agent, "payments.send", map[string]any{"amount": 5, "to": "bob"})
	assert.Equal(t, "approved", b.Status)
	assert.Equal(t, "pay", b.Decision.RuleID)
}

func TestAgentWithoutPolicyIsDeniedByDefault(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("fresh", nil)
	a := submit(t, agent, "fs.read", map[string]any{"path": "x"})
	assert.Equal(t, "denied", a.Status)
	assert.Equal(t, "default", a.Decision.Source)
}

func TestApproveDenyCancelAndResult(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("mailer", designPolicy)
	alice := env.Reviewer("alice")

	pending := func() (*client.Action, string) {
		a := submit(t, agent, "email.send", map[string]any{"to": "x@example.com"})
		require.Equal(t, "pending", a.Status)
		full, err := alice.Get(ctx, a.ID)
		require.NoError(t, err)
		require.Regexp(t, `^email\.send [A-Z0-9]{4}$`, full.ConfirmationPhrase)
		return a, full.ConfirmationPhrase
	}

	t.Run("approved then succeeded", func(t *testing.T) {
		a, phrase := pending()
		got, err := alice.Approve(ctx, a.ID, phrase, "")
		require.NoError(t, err)
		assert.Equal(t, "approved", got.Status)
		assert.Equal(t, "alice", got.Decision.By)
		assert.Empty(t, got.ConfirmationPhrase, "phrase is shown only while pending")
		require.Len(t, got.Approvals, 1)
		assert.Equal(t, "once", got.Approvals[0].Scope)

		done, err := agent.ReportResult(ctx, a.ID, client.Result{Outcome: "succeeded", Output: map[string]any{"message_id": "m1"}})
		require.NoError(t, err)
		assert.Equal(t, "succeeded", done.Status)
		assert.JSONEq(t, `{"output":{"message_id":"m1"}}`, string(done.Result))

		// Nothing leaves a final status.
		_, err = agent.ReportResult(ctx, a.ID, client.Result{Outcome: "failed"})
		assert.Equal(t, http.StatusConflict, client.StatusOf(err))
		_, err = alice.Deny(ctx, a.ID, "too late")
		assert.Equal(t, http.StatusConflict, client.StatusOf(err))
		_, err = agent.Cancel(ctx, a.ID)
		assert.Equal(t, http.StatusConflict, client.StatusOf(err))
	})

	t.Run("approved then failed", func(t *testing.T) {
		a, phrase := pending()
		_, err := alice.Approve(ctx, a.ID, phrase, "once")
		require.NoError(t, err)
		done, err := agent.ReportResult(ctx, a.ID, client.Result{Outcome: "failed", Error: "smtp 550"})
		require.NoError(t, err)
		assert.Equal(t, "failed", done.Status)
	})

	t.Run("denied", func(t *testing.T) {
		a, phrase := pending()
		got, err := alice.Deny(ctx, a.ID, "not today")
		require.NoError(t, err)
		assert.Equal(t, "denied", got.Status)
		assert.Equal(t, "not today", got.Decision.Reason)
		_, err = alice.Approve(ctx, a.ID, phrase, "")
		assert.Equal(t, http.StatusConflict, client.StatusOf(err))
		_, err = agent.ReportResult(ctx, a.ID, client.Result{Outcome: "succeeded"})
		assert.Equal(t, http.StatusConflict, client.StatusOf(err), "a denied action has no result")
		_, err = agent.Cancel(ctx, a.ID)
		assert.Equal(t, http.StatusConflict, client.StatusOf(err))
	})

	t.Run("cancelled", func(t *testing.T) {
		a, phrase := pending()
		got, err := agent.Cancel(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, "cancelled", got.Status)
		_, err = alice.Approve(ctx, a.ID, phrase, "")
		assert.Equal(t, http.StatusConflict, client.StatusOf(err))
		_, err = alice.Deny(ctx, a.ID, "x")
		assert.Equal(t, http.StatusConflict, client.StatusOf(err))
		_, err = agent.Cancel(ctx, a.ID)
		assert.Equal(t, http.StatusConflict, client.StatusOf(err))
	})

	t.Run("result before a decision is refused", func(t *testing.T) {
		a, _ := pending()
		_, err := agent.ReportResult(ctx, a.ID, client.Result{Outcome: "succeeded"})
		assert.Equal(t, http.StatusConflict, client.StatusOf(err))
	})

	t.Run("policy-approved action takes a result", func(t *testing.T) {
		a := submit(t, agent, "fs.read", map[string]any{"path": "a"})
		require.Equal(t, "approved", a.Status)
		_, err := agent.Cancel(ctx, a.ID)
		assert.Equal(t, http.StatusConflict, client.StatusOf(err), "only pending actions can be cancelled")
		done, err := agent.ReportResult(ctx, a.ID, client.Result{Outcome: "succeeded"})
		require.NoError(t, err)
		assert.Equal(t, "succeeded", done.Status)
	})

	t.Run("output numbers are kept exactly as sent", func(t *testing.T) {
		// Decoded into float64 the id became 12345678901234567000 and
		// 1.10 became 1.1, in the result and in its audit event.
		a := submit(t, agent, "fs.read", map[string]any{"path": "n"})
		require.Equal(t, "approved", a.Status)
		done, err := agent.ReportResult(ctx, a.ID, client.Result{Outcome: "succeeded",
			Output: json.RawMessage(`{"tx":12345678901234567890,"amt":1.10}`)})
		require.NoError(t, err)
		assert.Contains(t, string(done.Result), "12345678901234567890")
		assert.Contains(t, string(done.Result), "1.10")
	})

	t.Run("policy-denied action is final", func(t *testing.T) {
		a := submit(t, agent, "shell.run", map[string]any{})
		require.Equal(t, "denied", a.Status)
		_, err := agent.ReportResult(ctx, a.ID, client.Result{Outcome: "succeeded"})
		assert.Equal(t, http.StatusConflict, client.StatusOf(err))
	})

	t.Run("wrong phrase and another action's phrase are refused", func(t *testing.T) {
		a, _ := pending()
		_, otherPhrase := pending()
		for _, typed := range []string{"", "email.send XXXX", otherPhrase} {
			_, err := alice.Approve(ctx, a.ID, typed, "")
			assert.Equal(t, http.StatusUnprocessableEntity, client.StatusOf(err), "typed %q", typed)
		}
		still, err := alice.Get(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, "pending", still.Status)
		assert.Empty(t, still.Approvals)
	})
}

func TestConcurrentApprovalsExactlyOneWins(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("racer", designPolicy)
	alice := env.Reviewer("alice")
	a := submit(t, agent, "email.send", map[string]any{"to": "x@example.com"})
	full, err := alice.Get(ctx, a.ID)
	require.NoError(t, err)

	var ok, conflict, other atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := alice.Approve(ctx, a.ID, full.ConfirmationPhrase, "")
			switch client.StatusOf(err) {
			case 0:
				ok.Add(1)
			case http.StatusConflict:
				conflict.Add(1)
			default:
				other.Add(1)
				t.Errorf("unexpected: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	assert.EqualValues(t, 1, ok.Load())
	assert.EqualValues(t, 99, conflict.Load())
	assert.Zero(t, other.Load())

	auditor := env.Auditor("audrey")
	page, err := auditor.Audit(ctx, url.Values{"action_id": {a.ID}, "kind": {"action.approved"}})
	require.NoError(t, err)
	assert.Len(t, page.Events, 1, "one approval, audited once")
}

func TestQuorumNeedsTwoDistinctReviewers(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("payer", designPolicy)
	alice, bob := env.Reviewer("alice"), env.Reviewer("bob")
	a := submit(t, agent, "payments.send", map[string]any{"amount": 500, "to": "acme"})
	require.Equal(t, 2, a.RequiredApprovals)
	full, err := alice.Get(ctx, a.ID)
	require.NoError(t, err)

	first, err := alice.Approve(ctx, a.ID, full.ConfirmationPhrase, "")
	require.NoError(t, err)
	assert.Equal(t, "pending", first.Status)
	assert.Len(t, first.Approvals, 1)

	_, err = alice.Approve(ctx, a.ID, full.ConfirmationPhrase, "")
	assert.Equal(t, http.StatusConflict, client.StatusOf(err), "the same reviewer counts once")

	second, err := bob.Approve(ctx, a.ID, full.ConfirmationPhrase, "")
	require.NoError(t, err)
	assert.Equal(t, "approved", second.Status)
	require.Len(t, second.Approvals, 2)
	assert.Equal(t, "alice", second.Approvals[0].By)
	assert.Equal(t, "bob", second.Approvals[1].By)
}

func TestConcurrentQuorumFromManyReviewers(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("payer", designPolicy)
	reviewers := []*client.Client{env.Reviewer("r1"), env.Reviewer("r2"), env.Reviewer("r3"), env.Reviewer("r4")}
	a := submit(t, agent, "payments.send", map[string]any{"amount": 500, "to": "acme"})
	full, err := reviewers[0].Get(ctx, a.ID)
	require.NoError(t, err)

	var ok atomic.Int32
	var wg sync.WaitGroup
	for _, r := range reviewers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.Approve(ctx, a.ID, full.ConfirmationPhrase, ""); err == nil {
				ok.Add(1)
			} else {
				assert.Equal(t, http.StatusConflict, client.StatusOf(err))
			}
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 2, ok.Load(), "exactly the quorum's approvals land")
	final, err := reviewers[0].Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, "approved", final.Status)
	assert.Len(t, final.Approvals, 2)
}

func TestApprovalRacingExpiry(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{ExpiryEvery: 5 * time.Millisecond})
	ctx := env.Ctx()
	agent := env.Agent("racer", map[string]any{"rules": []map[string]any{
		{"id": "quick", "tool": "email.send", "effect": "approve", "timeout": "1s"},
	}})
	alice := env.Reviewer("alice")
	auditor := env.Auditor("audrey")

	for i := range 5 {
		a := submit(t, agent, "email.send", map[string]any{"n": i})
		full, err := alice.Get(ctx, a.ID)
		require.NoError(t, err)
		// Approve as close to the deadline as we can, from several goroutines.
		time.Sleep(time.Until(*a.ExpiresAt) - 3*time.Millisecond)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = alice.Approve(ctx, a.ID, full.ConfirmationPhrase, "")
			}()
		}
		wg.Wait()
		final, err := agent.Wait(ctx, a.ID)
		require.NoError(t, err)
		require.Contains(t, []string{"approved", "expired"}, final.Status)

		page, err := auditor.Audit(ctx, url.Values{"action_id": {a.ID}})
		require.NoError(t, err)
		var outcomes []string
		for _, ev := range page.Events {
			if ev.Kind == "action.approved" || ev.Kind == "action.expired" {
				outcomes = append(outcomes, ev.Kind)
			}
		}
		assert.Len(t, outcomes, 1, "exactly one outcome, audited once: %v", outcomes)
		assert.Equal(t, "action."+final.Status, outcomes[0])
	}
}

func TestIdempotentReplay(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("retrier", designPolicy)
	req := client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com"}, IdempotencyKey: "k-1"}

	first, err := agent.Submit(ctx, req)
	require.NoError(t, err)
	var replay client.Action
	status, err := agent.Do(ctx, http.MethodPost, "/api/v1/actions", req, &replay)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, first.ID, replay.ID)

	req.Args["to"] = "y@example.com"
	_, err = agent.Submit(ctx, req)
	assert.Equal(t, http.StatusConflict, client.StatusOf(err))

	// Another agent may use the same key.
	other := env.Agent("other", designPolicy)
	req.Args["to"] = "x@example.com"
	theirs, err := other.Submit(ctx, req)
	require.NoError(t, err)
	assert.NotEqual(t, first.ID, theirs.ID)

	// Concurrent replays all get the one action.
	req.IdempotencyKey = "k-2"
	ids := make(chan string, 20)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := agent.Submit(ctx, req)
			if assert.NoError(t, err) {
				ids <- a.ID
			}
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		seen[id] = true
	}
	assert.Len(t, seen, 1)
}

func TestAgentsSeeOnlyTheirOwnActions(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	a := env.Agent("agent-a", designPolicy)
	b := env.Agent("agent-b", designPolicy)
	act := submit(t, a, "email.send", map[string]any{"to": "x@example.com"})

	_, err := b.Get(ctx, act.ID)
	assert.Equal(t, http.StatusNotFound, client.StatusOf(err))
	_, err = b.Cancel(ctx, act.ID)
	assert.Equal(t, http.StatusNotFound, client.StatusOf(err))
	_, err = b.ReportResult(ctx, act.ID, client.Result{Outcome: "succeeded"})
	assert.Equal(t, http.StatusNotFound, client.StatusOf(err))

	got, err := a.Get(ctx, act.ID)
	require.NoError(t, err)
	assert.Equal(t, "pending", got.Status)
}

func TestRolesAreEnforced(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("worker-bee", designPolicy)
	reviewer := env.Reviewer("rita")
	auditor := env.Auditor("audrey")
	act := submit(t, agent, "email.send", map[string]any{"to": "x@example.com"})
	full, err := reviewer.Get(ctx, act.ID)
	require.NoError(t, err)

	post := func(c *client.Client, path string, body any) int {
		_, err := c.Do(ctx, http.MethodPost, path, body, nil)
		return client.StatusOf(err)
	}
	get := func(c *client.Client, path string) int {
		_, err := c.Do(ctx, http.MethodGet, path, nil, nil)
		return client.StatusOf(err)
	}
	submitBody := map[string]any{"tool": "fs.read", "args": map[string]any{}}
	approveBody := map[string]any{"confirmation": full.ConfirmationPhrase}

	// Reviewers cannot act as agents.
	assert.Equal(t, http.StatusForbidden, post(reviewer, "/api/v1/actions", submitBody))
	// (A reviewer may cancel any action: TestStaffCancel.) Auditors never may.
	assert.Equal(t, http.StatusForbidden, post(auditor, "/api/v1/actions/"+act.ID+"/cancel", nil))
	assert.Equal(t, http.StatusForbidden, post(reviewer, "/api/v1/actions/"+act.ID+"/result", map[string]any{"outcome": "succeeded"}))
	// Agents cannot review, list, audit or administer.
	assert.Equal(t, http.StatusForbidden, post(agent, "/api/v1/actions/"+act.ID+"/approve", approveBody))
	assert.Equal(t, http.StatusForbidden, post(agent, "/api/v1/actions/"+act.ID+"/deny", map[string]any{"reason": "x"}))
	assert.Equal(t, http.StatusForbidden, get(agent, "/api/v1/actions"))
	assert.Equal(t, http.StatusForbidden, get(agent, "/api/v1/audit"))
	assert.Equal(t, http.StatusForbidden, post(agent, "/api/v1/agents", map[string]any{"id": "x", "name": "x"}))
	// Auditors read but never decide.
	assert.Equal(t, http.StatusForbidden, post(auditor, "/api/v1/actions/"+act.ID+"/approve", approveBody))
	assert.Zero(t, get(auditor, "/api/v1/actions/"+act.ID))
	assert.Zero(t, get(auditor, "/api/v1/audit"))
	// Reviewers cannot administer or audit.
	assert.Equal(t, http.StatusForbidden, post(reviewer, "/api/v1/agents", map[string]any{"id": "x", "name": "x"}))
	assert.Equal(t, http.StatusForbidden, get(reviewer, "/api/v1/audit"))
	// Auditors do not see the confirmation phrase.
	seen, err := auditor.Get(ctx, act.ID)
	require.NoError(t, err)
	assert.Empty(t, seen.ConfirmationPhrase)

	still, err := reviewer.Get(ctx, act.ID)
	require.NoError(t, err)
	assert.Equal(t, "pending", still.Status)
}

func TestLongPollReturnsWhenDecided(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("waiter", designPolicy)
	alice := env.Reviewer("alice")
	act := submit(t, agent, "email.send", map[string]any{"to": "x@example.com"})
	full, err := alice.Get(ctx, act.ID)
	require.NoError(t, err)

	done := make(chan *client.Action, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		a, err := agent.Wait(wctx, act.ID)
		assert.NoError(t, err)
		done <- a
	}()
	time.Sleep(200 * time.Millisecond) // let the long poll start
	select {
	case <-done:
		t.Fatal("Wait returned before any decision")
	default:
	}
	_, err = alice.Approve(ctx, act.ID, full.ConfirmationPhrase, "")
	require.NoError(t, err)
	got := <-done
	assert.Equal(t, "approved", got.Status)

	// A long poll that runs out returns the pending action.
	other := submit(t, agent, "email.send", map[string]any{"to": "y@example.com"})
	var a client.Action
	status, err := agent.Do(ctx, http.MethodGet, "/api/v1/actions/"+other.ID+"?wait=100ms", nil, &a)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "pending", a.Status)
}

func TestExpiryBySweeper(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{ExpiryEvery: 20 * time.Millisecond})
	ctx := env.Ctx()
	agent := env.Agent("slow", map[string]any{"rules": []map[string]any{
		{"id": "quick", "tool": "email.send", "effect": "approve", "timeout": "1s"},
	}})
	act := submit(t, agent, "email.send", map[string]any{})
	got, err := agent.Wait(ctx, act.ID)
	require.NoError(t, err)
	assert.Equal(t, "expired", got.Status)
}
