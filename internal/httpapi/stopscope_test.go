package httpapi_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
