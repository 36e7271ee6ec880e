package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// batchPolicy sends every payment and every email to review, by two
// rules; one reviewer suffices. A big payment is held by a second rule
// too.
var batchPolicy = map[string]any{
	"default": "deny",
	"rules": []map[string]any{
		{"id": "pay", "tool": "payments.send", "effect": "approve"},
		{"id": "pay-big", "tool": "payments.send", "effect": "approve", "when": "args.amount > 5000"},
		{"id": "mail", "tool": "email.send", "effect": "approve"},
		{"id": "pay-quorum", "tool": "payments.refund", "effect": "approve", "approvals": 2},
	},
}

type batchJSON struct {
	ID                 string   `json:"id"`
	IDs                []string `json:"ids"`
	Tool               string   `json:"tool"`
	ConfirmationPhrase string   `json:"confirmation_phrase"`
}

type batchApprovalJSON struct {
	Actions []struct {
		ID      string         `json:"id"`
		Outcome string         `json:"outcome"`
		Action  *client.Action `json:"action"`
		Error   *client.Error  `json:"error"`
	} `json:"actions"`
}

func pendingPayments(t *testing.T, agent *client.Client, tool string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		a := submit(t, agent, tool, map[string]any{"to": fmt.Sprintf("acct-%d", i), "amount": 10 + i})
		require.Equal(t, "pending", a.Status)
		ids[i] = a.ID
	}
	return ids
}

func createBatch(t *testing.T, env *apptest.Env, c *client.Client, ids []string) (*batchJSON, int, error) {
	t.Helper()
	var b batchJSON
	status, err := c.Do(env.Ctx(), http.MethodPost, "/api/v1/batches", map[string]any{"ids": ids}, &b)
	return &b, status, err
}

func approveBatch(t *testing.T, env *apptest.Env, c *client.Client, id, phrase string) (*batchApprovalJSON, int, error) {
	t.Helper()
	var out batchApprovalJSON
	status, err := c.Do(env.Ctx(), http.MethodPost, "/api/v1/batches/"+id+"/approve", map[string]any{"confirmation": phrase}, &out)
	return &out, status, err
}

// TestBatchApprovesFiveWithOnePhrase: five pending payments of one rule
// are approved with one phrase that names the count; each is approved and
// audited on its own, naming the batch.
func TestBatchApprovesFiveWithOnePhrase(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("payer", batchPolicy)
	alice := env.Reviewer("alice")
	ids := pendingPayments(t, agent, "payments.send", 5)

	b, status, err := createBatch(t, env, alice, ids)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, status)
	assert.Equal(t, ids, b.IDs)
	assert.Equal(t, "payments.send", b.Tool)
	require.Regexp(t, `^approve 5 payments\.send [A-Z0-9]{4}$`, b.ConfirmationPhrase)

	out, status, err := approveBatch(t, env, alice, b.ID, b.ConfirmationPhrase)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.Len(t, out.Actions, 5)
	for i, o := range out.Actions {
		assert.Equal(t, ids[i], o.ID)
		assert.Equal(t, "approved", o.Outcome)
		require.NotNil(t, o.Action)
		assert.Equal(t, "approved", o.Action.Status)
		assert.Equal(t, "alice", o.Action.Decision.By)
	}

	audra := env.Auditor("audra")
	page, err := audra.Audit(ctx, url.Values{"kind": {"action.approved"}, "agent": {"payer"}})
	require.NoError(t, err)
	require.Len(t, page.Events, 5, "five audit events, one per action")
	seen := map[string]bool{}
	for _, ev := range page.Events {
		seen[ev.ActionID] = true
		assert.Equal(t, b.ID, ev.Data["batch_id"])
		assert.Equal(t, "alice", ev.Actor)
	}
	for _, id := range ids {
		assert.True(t, seen[id], "action %s has its own approval event", id)
	}

	_, status, err = approveBatch(t, env, alice, b.ID, b.ConfirmationPhrase)
	assert.Equal(t, http.StatusConflict, status, "a batch is used once: %v", err)
}

// TestBatchPhraseForAnotherCountIsRefused: the phrase names the count: a
// phrase for 4 does not approve 5, nor does another batch's phrase; each
// refusal counts as a wrong phrase for every action of the batch.
func TestBatchPhraseForAnotherCountIsRefused(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("payer", batchPolicy)
	alice := env.Reviewer("alice")
	ids := pendingPayments(t, agent, "payments.send", 5)
	b, _, err := createBatch(t, env, alice, ids)
	require.NoError(t, err)
	other, _, err := createBatch(t, env, alice, ids[:4])
	require.NoError(t, err)

	four := strings.Replace(b.ConfirmationPhrase, "approve 5 ", "approve 4 ", 1)
	for _, phrase := range []string{four, other.ConfirmationPhrase} {
		_, status, err := approveBatch(t, env, alice, b.ID, phrase)
		require.Error(t, err)
		assert.Equal(t, http.StatusUnprocessableEntity, status, "phrase %q", phrase)
		var e *client.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, "wrong_confirmation", e.Code)
	}
	for _, id := range ids {
		a, err := alice.Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, "pending", a.Status, "nothing was approved")
	}
	page, err := env.Auditor("audra").Audit(ctx, url.Values{"kind": {"action.phrase_refused"}, "action_id": {ids[4]}})
	require.NoError(t, err)
	assert.Len(t, page.Events, 2, "each wrong batch phrase counts for every action")

	// The batch is still good with its own phrase.
	out, status, err := approveBatch(t, env, alice, b.ID, b.ConfirmationPhrase)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.Len(t, out.Actions, 5)
}

// TestBatchRefusesMixedSelections: a batch is of one tool and one rule,
// every action pending: anything else is 422 naming the misfit.
func TestBatchRefusesMixedSelections(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("payer", batchPolicy)
	alice := env.Reviewer("alice")
	pays := pendingPayments(t, agent, "payments.send", 2)
	mail := submit(t, agent, "email.send", map[string]any{"to": "x@example.com"})
	refund := submit(t, agent, "payments.refund", map[string]any{"to": "acct-0"})
	other := env.Agent("payer2", batchPolicy)
	otherPay := submit(t, other, "payments.send", map[string]any{"to": "acct-9", "amount": 1})
	big := submit(t, agent, "payments.send", map[string]any{"to": "acct-0", "amount": 9000})
	require.Equal(t, "pay", big.Decision.RuleID)
	denied := pendingPayments(t, agent, "payments.send", 1)[0]
	_, err := alice.Deny(ctx, denied, "no")
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		ids  []string
		want int
	}{
		{"mixed tools", []string{pays[0], mail.ID}, http.StatusUnprocessableEntity},
		{"same tool family, another rule", []string{pays[0], refund.ID}, http.StatusUnprocessableEntity},
		{"same rule id of another agent's policy", []string{pays[0], otherPay.ID}, http.StatusUnprocessableEntity},
		{"same rule, another rule holding one too", []string{pays[0], big.ID}, http.StatusUnprocessableEntity},
		{"one no longer pending", []string{pays[0], pays[1], denied}, http.StatusUnprocessableEntity},
		{"twice the same", []string{pays[0], pays[0]}, http.StatusUnprocessableEntity},
		{"unknown id", []string{pays[0], "0190a0a0-0000-7000-8000-000000000000"}, http.StatusUnprocessableEntity},
		{"not an id", []string{pays[0], "nope"}, http.StatusUnprocessableEntity},
		{"only one", []string{pays[0]}, http.StatusUnprocessableEntity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, status, err := createBatch(t, env, alice, tc.ids)
			require.Error(t, err)
			assert.Equal(t, tc.want, status)
		})
	}
	for _, id := range pays {
		a, err := alice.Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, "pending", a.Status)
	}
}

// TestBatchReportsEachAction: an action decided after the batch was made
// is refused on its own (409 as a single approval would be) while the
// others are approved; a quorum rule's approvals only count towards the
// quorum; another reviewer cannot see or approve the batch.
func TestBatchReportsEachAction(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("payer", batchPolicy)
	alice, bob := env.Reviewer("alice"), env.Reviewer("bob")
	ids := pendingPayments(t, agent, "payments.send", 3)
	b, _, err := createBatch(t, env, alice, ids)
	require.NoError(t, err)

	_, status, _ := approveBatch(t, env, bob, b.ID, b.ConfirmationPhrase)
	assert.Equal(t, http.StatusNotFound, status, "only the reviewer who made a batch approves it")
	_, err = bob.Deny(ctx, ids[1], "not this one")
	require.NoError(t, err)

	out, status, err := approveBatch(t, env, alice, b.ID, b.ConfirmationPhrase)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.Len(t, out.Actions, 3)
	assert.Equal(t, "approved", out.Actions[0].Outcome)
	assert.Equal(t, "refused", out.Actions[1].Outcome)
	require.NotNil(t, out.Actions[1].Error)
	assert.Equal(t, "conflict", out.Actions[1].Error.Code)
	assert.Nil(t, out.Actions[1].Action)
	assert.Equal(t, "approved", out.Actions[2].Outcome)
	a, err := alice.Get(ctx, ids[1])
	require.NoError(t, err)
	assert.Equal(t, "denied", a.Status)

	refunds := pendingPayments(t, agent, "payments.refund", 2)
	rb, _, err := createBatch(t, env, alice, refunds)
	require.NoError(t, err)
	out, _, err = approveBatch(t, env, alice, rb.ID, rb.ConfirmationPhrase)
	require.NoError(t, err)
	for _, o := range out.Actions {
		assert.Equal(t, "approval_recorded", o.Outcome)
		assert.Equal(t, "pending", o.Action.Status, "one of two approvals")
	}
}

// TestBatchWrongPhrasesCoolOffEveryAction: wrong batch phrases count on
// every action as wrong phrases typed on each would; after five, the
// right batch phrase still approves none (each refused with 429's
// rate_limited by the single approval path), and bad bodies are 400.
func TestBatchWrongPhrasesCoolOffEveryAction(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("payer", batchPolicy)
	alice := env.Reviewer("alice")
	ids := pendingPayments(t, agent, "payments.send", 3)
	b, _, err := createBatch(t, env, alice, ids)
	require.NoError(t, err)

	var got batchJSON
	status, err := alice.Do(ctx, http.MethodGet, "/api/v1/batches/"+b.ID, nil, &got)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, b.ConfirmationPhrase, got.ConfirmationPhrase)

	for range 5 {
		_, status, _ := approveBatch(t, env, alice, b.ID, "approve 3 payments.send ZZZZ")
		require.Equal(t, http.StatusUnprocessableEntity, status)
	}
	out, status, err := approveBatch(t, env, alice, b.ID, b.ConfirmationPhrase)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	for _, o := range out.Actions {
		assert.Equal(t, "refused", o.Outcome)
		require.NotNil(t, o.Error)
		assert.Equal(t, "rate_limited", o.Error.Code)
	}
	for _, id := range ids {
		a, err := alice.Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, "pending", a.Status)
	}

	for _, tc := range []struct {
		path string
		body any
	}{
		{"/api/v1/batches", map[string]any{"ids": "nope"}},
		{"/api/v1/batches", map[string]any{"ids": ids, "extra": 1}},
		{"/api/v1/batches/" + b.ID + "/approve", map[string]any{"confirmation": 5}},
	} {
		status, err := alice.Do(ctx, http.MethodPost, tc.path, tc.body, nil)
		assert.Equal(t, http.StatusBadRequest, status, "%s %v: %v", tc.path, tc.body, err)
	}
	status, _ = alice.Do(ctx, http.MethodGet, "/api/v1/batches/not-a-batch", nil, nil)
	assert.Equal(t, http.StatusNotFound, status)
	status, _ = agent.Do(ctx, http.MethodPost, "/api/v1/batches", map[string]any{"ids": ids}, nil)
	assert.Equal(t, http.StatusForbidden, status, "agents make no batches")
}

// TestBatchRefusesWhatIsApprovedOnItsOwnPage: merges (and runs, and execs
// waiting for their impact preview) pin, when approved, the diff or
// command set their own page showed; a batch's page shows args only, so
// they cannot be batched. Before, two merges were batched before their
// previews were read, and once the previews were in, one phrase merged
// diffs nobody had been shown.
func TestBatchRefusesWhatIsApprovedOnItsOwnPage(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("merger", map[string]any{
		"rules": []map[string]any{
			{"id": "trees", "tool": "worktree.create", "effect": "allow"},
			{"id": "merge", "tool": "worktree.merge", "effect": "approve"},
		},
		"settings": map[string]any{"escalate_at": "none"},
	})
	host := workerClient(t, env, "repo-host", "repo:app")
	var merges []string
	for i := range 2 {
		created := submit(t, agent, "worktree.create", map[string]any{"repo": "app"})
		require.Equal(t, "approved", created.Status)
		job, err := host.Lease(ctx, []string{"worktree.create"}, []string{"repo:app"}, time.Second)
		require.NoError(t, err)
		require.Equal(t, created.ID, job.ActionID)
		wt := fmt.Sprintf("app/feature-%d", i)
		_, err = host.Complete(ctx, job.ID, job.Fence, client.JobResult{Worktree: wt, Branch: "airlock/" + wt})
		require.NoError(t, err)
		merge := submit(t, agent, "worktree.merge", map[string]any{"worktree": wt})
		require.Equal(t, "pending", merge.Status)
		merges = append(merges, merge.ID)
	}
	alice := env.Reviewer("alice")
	_, status, err := createBatch(t, env, alice, merges)
	require.Error(t, err)
	assert.Equal(t, http.StatusUnprocessableEntity, status)
	var ce *client.Error
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, ce.Message, "approve it on its own")
	for _, id := range merges {
		statusIs(t, alice, id, "pending")
	}
}

// TestBatchRefusesFileChanges: an fs.write or fs.patch approval pins the
// state of the files its own page showed the diff against; a batch's page
// shows args only, so neither can be batched. Before, a batch approved
// file changes whose diffs its reviewer had not been shown.
func TestBatchRefusesFileChanges(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("editor", map[string]any{
		"rules":    []map[string]any{{"id": "files", "tool": "fs.*", "effect": "approve"}},
		"settings": map[string]any{"escalate_at": "none"},
	})
	workerClient(t, env, "files-host", "workspace:main")
	alice := env.Reviewer("alice")
	for tool, args := range map[string]func(i int) map[string]any{
		"fs.write": func(i int) map[string]any {
			return map[string]any{"workspace": "main", "path": fmt.Sprintf("f%d.txt", i), "content": "x\n"}
		},
		"fs.patch": func(i int) map[string]any {
			return map[string]any{"workspace": "main", "patch": fmt.Sprintf("--- a/f%d.txt\n+++ b/f%d.txt\n@@ -1 +1 @@\n-x\n+y\n", i, i)}
		},
	} {
		var ids []string
		for i := range 2 {
			a := submit(t, agent, tool, args(i))
			require.Equal(t, "pending", a.Status, "%s: %+v", tool, a.Decision)
			ids = append(ids, a.ID)
		}
		_, status, err := createBatch(t, env, alice, ids)
		require.Error(t, err, tool)
		assert.Equal(t, http.StatusUnprocessableEntity, status, tool)
		var ce *client.Error
		require.ErrorAs(t, err, &ce)
		assert.Contains(t, ce.Message, "approve it on its own", tool)
		for _, id := range ids {
			statusIs(t, alice, id, "pending")
		}
	}
}
