package httpapi_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/hitl"
)

// TestStopRevokesTheGrantItsApprovalMade: a reviewer approves for the
// conversation by mistake and stops the action: the grant the approval
// made is revoked by the stop, in its transaction and audited as the
// stopper's, so the agent's next call in the conversation (any args) goes
// to a reviewer again. Before, the grant stayed in force for 24 h.
func TestStopRevokesTheGrantItsApprovalMade(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("mailer", grantPolicy)
	alice, rita := env.Reviewer("alice"), env.Reviewer("rita")
	mail := func(to string) string {
		return submitIn(t, agent, "conv", "email.send", map[string]any{"to": to}).Status
	}

	first := submitIn(t, agent, "conv", "email.send", map[string]any{"to": "x@example.com"})
	_, err := approveWith(t, alice, first.ID, "conversation")
	require.NoError(t, err)
	require.Equal(t, "approved", mail("y@example.com"), "the grant approves the conversation's calls")
	grants, err := alice.Grants(ctx, "mailer", "conv")
	require.NoError(t, err)
	require.Len(t, grants, 1)
	g := grants[0]

	stopped, err := rita.Stop(ctx, first.ID, "approved by mistake")
	require.NoError(t, err)
	assert.Equal(t, "cancelled", stopped.Status)
	assert.JSONEq(t, `{"error":"cancelled by rita: approved by mistake"}`, string(stopped.Result), "no policy to keep")

	assert.Equal(t, "pending", mail("z@example.com"), "the stop revoked the grant: a reviewer decides")
	active, err := alice.Grants(ctx, "mailer", "conv")
	require.NoError(t, err)
	assert.Empty(t, active)
	all, err := env.App.Service.Grants(ctx, hitl.GrantFilter{AgentID: "mailer", All: true})
	require.NoError(t, err)
	require.Len(t, all, 1)
	assert.Equal(t, g.ID, all[0].ID)
	assert.NotNil(t, all[0].RevokedAt)
	assert.Equal(t, "rita", all[0].RevokedBy)

	page, err := env.Auditor("audra").Audit(ctx, url.Values{"action_id": {first.ID}, "kind": {"grant.revoked"}})
	require.NoError(t, err)
	require.Len(t, page.Events, 1)
	ev := page.Events[0]
	assert.Equal(t, "rita", ev.Actor)
	assert.Equal(t, g.ID, ev.Data["grant_id"])
	assert.Equal(t, true, ev.Data["action_stopped"])
	assert.Equal(t, "approved by mistake", ev.Data["reason"])

	// One transaction: the row versions of the cancelled action and the
	// revoked grant were written by the same transaction.
	var same bool
	require.NoError(t, env.App.Pool().QueryRow(ctx, `SELECT a.xmin::text = g.xmin::text FROM actions a, grants g WHERE a.id = $1 AND g.id = $2`,
		first.ID, g.ID).Scan(&same))
	assert.True(t, same, "the grant is revoked in the stop's transaction")
}

// TestStopLeavesAGrantALaterApprovalMade: a grant is revoked only with the
// action whose approval it is: once a later approval for the same
// conversation replaced it, stopping the first action leaves the second's
// grant alone, and stopping the second revokes it.
func TestStopLeavesAGrantALaterApprovalMade(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("mailer", grantPolicy)
	alice, bob := env.Reviewer("alice"), env.Reviewer("bob")
	first := submitIn(t, agent, "conv", "email.send", map[string]any{"to": "x@example.com"})
	second := submitIn(t, agent, "conv", "email.send", map[string]any{"to": "y@example.com"})
	_, err := approveWith(t, alice, first.ID, "conversation")
	require.NoError(t, err)
	_, err = approveWith(t, bob, second.ID, "conversation")
	require.NoError(t, err)

	_, err = alice.Stop(ctx, first.ID, "")
	require.NoError(t, err)
	grants, err := alice.Grants(ctx, "mailer", "conv")
	require.NoError(t, err)
	require.Len(t, grants, 1, "bob's grant stays")
	assert.Equal(t, second.ID, grants[0].ActionID)
	assert.Equal(t, "approved", submitIn(t, agent, "conv", "email.send", map[string]any{"to": "z@example.com"}).Status)

	_, err = bob.Stop(ctx, second.ID, "")
	require.NoError(t, err)
	grants, err = alice.Grants(ctx, "mailer", "conv")
	require.NoError(t, err)
	assert.Empty(t, grants)
	assert.Equal(t, "pending", submitIn(t, agent, "conv", "email.send", map[string]any{"to": "w@example.com"}).Status)
}

// TestStopKeepsAnAlwaysPolicyAndSaysSo: stopping an action approved with
// scope always does not revert the policy version its approval wrote; the
// stop's answer and its action.cancelled event name that version and the
// rule it added, for an admin to revert.
func TestStopKeepsAnAlwaysPolicyAndSaysSo(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("mailer", grantPolicy)
	alice, rita := env.Reviewer("alice"), env.Reviewer("rita")
	args := map[string]any{"to": "x@example.com"}
	a := submitIn(t, agent, "", "email.send", args)
	_, err := approveWith(t, alice, a.ID, "always")
	require.NoError(t, err)
	require.Equal(t, 2, policyVersion(t, env.Admin, "mailer"))

	stopped, err := rita.Stop(ctx, a.ID, "too broad")
	require.NoError(t, err)
	var result struct {
		Error      string `json:"error"`
		PolicyKept struct {
			AgentID string `json:"agent_id"`
			Version int    `json:"version"`
			RuleID  string `json:"rule_id"`
			Note    string `json:"note"`
		} `json:"policy_kept"`
	}
	require.NoError(t, json.Unmarshal(stopped.Result, &result), "%s", stopped.Result)
	assert.Equal(t, "cancelled by rita: too broad", result.Error)
	kept := result.PolicyKept
	assert.Equal(t, "mailer", kept.AgentID)
	assert.Equal(t, 2, kept.Version)
	assert.True(t, strings.HasPrefix(kept.RuleID, "always-"), kept.RuleID)
	assert.Contains(t, kept.Note, "version 2 of agent mailer's policy")
	assert.Contains(t, kept.Note, "PUT /api/v1/agents/mailer/policy")

	assert.Equal(t, 2, policyVersion(t, env.Admin, "mailer"), "the stop writes no policy")
	assert.Equal(t, "approved", submitIn(t, agent, "", "email.send", args).Status, "the always rule stays in force")

	page, err := env.Auditor("audra").Audit(ctx, url.Values{"action_id": {a.ID}, "kind": {"action.cancelled"}})
	require.NoError(t, err)
	require.Len(t, page.Events, 1)
	ev := page.Events[0]
	assert.Equal(t, "rita", ev.Actor)
	pk, _ := ev.Data["policy_kept"].(map[string]any)
	require.NotNil(t, pk, "%v", ev.Data)
	assert.EqualValues(t, 2, pk["version"])
	assert.Equal(t, kept.RuleID, pk["rule_id"])
}

// grantActive reports whether agent's conversation conv has an active grant.
func grantActive(t *testing.T, rev *client.Client, agent, conv string) bool {
	t.Helper()
	gs, err := rev.Grants(context.Background(), agent, conv)
	require.NoError(t, err)
	return len(gs) > 0
}

// TestSuspensionRevokesTheAgentsGrants: suspending an agent, alone or with
// the fleet, is a hard stop, and ends its conversation grants in the
// suspension's transaction, each grant.revoked by the admin. Before, the
// grants outlived the suspension, and once the agent was resumed its
// calls in those conversations ran unreviewed for the rest of the 24 h.
func TestSuspensionRevokesTheAgentsGrants(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	one, two := env.Agent("mailer1", grantPolicy), env.Agent("mailer2", grantPolicy)
	alice := env.Reviewer("alice")
	granted := func(c *client.Client) *client.Action {
		a := submitIn(t, c, "conv", "email.send", map[string]any{"to": "x@example.com"})
		_, err := approveWith(t, alice, a.ID, "conversation")
		require.NoError(t, err)
		require.Equal(t, "approved", submitIn(t, c, "conv", "email.send", map[string]any{"to": "y@example.com"}).Status)
		return a
	}
	first, second := granted(one), granted(two)

	_, err := env.Admin.SuspendAgent(ctx, "mailer1")
	require.NoError(t, err)
	assert.False(t, grantActive(t, alice, "mailer1", "conv"), "the suspension revoked mailer1's grant")
	assert.True(t, grantActive(t, alice, "mailer2", "conv"), "another agent's grant stays")
	_, err = env.Admin.ResumeAgent(ctx, "mailer1")
	require.NoError(t, err)
	assert.Equal(t, "pending", submitIn(t, one, "conv", "email.send", map[string]any{"to": "z@example.com"}).Status,
		"resumed, mailer1's calls go to a reviewer again")

	_, err = env.Admin.SuspendFleet(ctx, "incident")
	require.NoError(t, err)
	assert.False(t, grantActive(t, alice, "mailer2", "conv"), "the fleet stop revoked mailer2's grant")
	_, err = env.Admin.ResumeFleet(ctx)
	require.NoError(t, err)
	assert.Equal(t, "pending", submitIn(t, two, "conv", "email.send", map[string]any{"to": "z@example.com"}).Status)

	auditor := env.Auditor("audra")
	for _, c := range []struct {
		action *client.Action
		fleet  bool
	}{{first, false}, {second, true}} {
		page, err := auditor.Audit(ctx, url.Values{"action_id": {c.action.ID}, "kind": {"grant.revoked"}})
		require.NoError(t, err)
		require.Len(t, page.Events, 1, c.action.AgentID)
		ev := page.Events[0]
		assert.Equal(t, "admin", ev.Actor)
		assert.Equal(t, true, ev.Data["agent_suspended"])
		if c.fleet {
			assert.Equal(t, true, ev.Data["fleet"])
		}
	}
	page, err := auditor.Audit(ctx, url.Values{"agent": {"mailer1"}, "kind": {"agent.suspended"}})
	require.NoError(t, err)
	require.Len(t, page.Events, 2, "its own suspension, then the fleet's")
	assert.EqualValues(t, 1, page.Events[0].Data["grants_revoked"])
	page, err = auditor.Audit(ctx, url.Values{"kind": {"fleet.suspended"}})
	require.NoError(t, err)
	require.Len(t, page.Events, 1)
	assert.EqualValues(t, 1, page.Events[0].Data["grants_revoked"], "mailer2's; mailer1's went with its own suspension")
}

// TestRevokedTokenEndsTheGrantsOfItsActions: revoking an agent token (it
// leaked) ends the conversation grants that approvals of the calls
// submitted with it made, in the revocation's transaction; grants of the
// agent's other tokens stay. Before, the agent's next token, or anyone
// holding another of its tokens, still ran calls in that conversation
// unreviewed.
func TestRevokedTokenEndsTheGrantsOfItsActions(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	env.Agent("mailer", grantPolicy)
	issue := func() (*client.Client, string) {
		tok, err := env.Admin.IssueAgentToken(ctx, "mailer", 0)
		require.NoError(t, err)
		return env.Client(tok.Token), tok.TokenID
	}
	leaked, leakedID := issue()
	kept, _ := issue()
	alice := env.Reviewer("alice")
	first := submitIn(t, leaked, "conv-a", "email.send", map[string]any{"to": "x@example.com"})
	_, err := approveWith(t, alice, first.ID, "conversation")
	require.NoError(t, err)
	other := submitIn(t, kept, "conv-b", "email.send", map[string]any{"to": "x@example.com"})
	_, err = approveWith(t, alice, other.ID, "conversation")
	require.NoError(t, err)
	require.Equal(t, "approved", submitIn(t, kept, "conv-a", "email.send", map[string]any{"to": "y@example.com"}).Status,
		"the grant covers the conversation, whichever token calls")

	require.NoError(t, env.Admin.RevokeToken(ctx, leakedID))
	assert.Equal(t, "pending", submitIn(t, kept, "conv-a", "email.send", map[string]any{"to": "z@example.com"}).Status,
		"the revoked token's grant ended")
	assert.Equal(t, "approved", submitIn(t, kept, "conv-b", "email.send", map[string]any{"to": "z@example.com"}).Status,
		"the other token's grant stays")

	page, err := env.Auditor("audra").Audit(ctx, url.Values{"action_id": {first.ID}, "kind": {"grant.revoked"}})
	require.NoError(t, err)
	require.Len(t, page.Events, 1)
	assert.Equal(t, "admin", page.Events[0].Actor)
	assert.Equal(t, leakedID, page.Events[0].Data["token_revoked"])
}

// TestStopOfAGrantApprovedCallRevokesTheGrant: stopping a call that a
// conversation grant approved (not the approval that made the grant)
// revokes that grant too, in the stop's transaction: the stopper does not
// want what the grant lets through. Before, only stopping the approval
// that made the grant ended it, and the next call ran unreviewed.
func TestStopOfAGrantApprovedCallRevokesTheGrant(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("mailer", grantPolicy)
	alice, rita := env.Reviewer("alice"), env.Reviewer("rita")
	first := submitIn(t, agent, "conv", "email.send", map[string]any{"to": "x@example.com"})
	_, err := approveWith(t, alice, first.ID, "conversation")
	require.NoError(t, err)
	other := submitIn(t, agent, "other", "email.send", map[string]any{"to": "x@example.com"})
	_, err = approveWith(t, alice, other.ID, "conversation")
	require.NoError(t, err)
	second := submitIn(t, agent, "conv", "email.send", map[string]any{"to": "everyone@example.com"})
	require.Equal(t, "approved", second.Status, "the grant approved it")
	require.Equal(t, "grant", second.Decision.Source)

	_, err = rita.Stop(ctx, second.ID, "not to everyone")
	require.NoError(t, err)
	assert.False(t, grantActive(t, alice, "mailer", "conv"), "the grant that approved it ended")
	assert.True(t, grantActive(t, alice, "mailer", "other"), "another conversation's grant stays")
	assert.Equal(t, "pending", submitIn(t, agent, "conv", "email.send", map[string]any{"to": "y@example.com"}).Status)

	page, err := env.Auditor("audra").Audit(ctx, url.Values{"action_id": {first.ID}, "kind": {"grant.revoked"}})
	require.NoError(t, err)
	require.Len(t, page.Events, 1, "the grant.revoked event names the action that made the grant")
	assert.Equal(t, "rita", page.Events[0].Actor)
	assert.Equal(t, true, page.Events[0].Data["action_stopped"])
}
