package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestPlanModeAndFleetStopCommands: plan mode for an agent and the fleet,
// and the emergency stop, through the command line; an agent's token is
// refused.
func TestPlanModeAndFleetStopCommands(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("billing", map[string]any{"rules": []map[string]any{{"id": "mail", "tool": "email.send", "effect": "allow"}}})
	r := newRunner(t, env.URL, env.Admin.Token())
	mail := client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com"}}

	res := r.run("", "agents", "plan-mode", "billing", "on", "--reason", "plan first")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "billing: plan mode on since ")
	assert.Contains(t, res.stdout, "by admin: plan first")
	a, err := agent.Submit(env.Ctx(), mail)
	require.NoError(t, err)
	assert.Equal(t, "plan_mode", a.Decision.Source)
	res = r.run("", "agents", "plan-mode", "billing", "off")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "billing: plan mode off")

	res = r.run("", "fleet", "plan-mode", "on", "--output", "json")
	require.Equal(t, 0, res.code, "%+v", res)
	var pm client.PlanMode
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &pm))
	assert.True(t, pm.On)
	res = r.run("", "agents", "plan-mode", "billing")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "billing: plan mode off\nfleet: plan mode on since ")
	res = r.run("", "fleet", "plan-mode", "off")
	require.Equal(t, 0, res.code, "%+v", res)

	res = r.run("", "fleet", "suspend", "--reason", "incident 7")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "fleet: stopped since ")
	assert.Contains(t, res.stdout, "suspended billing\n")
	res = r.run("", "fleet", "status")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "fleet: plan mode off\n")
	assert.Contains(t, res.stdout, "by admin: incident 7")
	a, err = agent.Submit(env.Ctx(), mail)
	require.NoError(t, err)
	assert.Equal(t, "suspended", a.Decision.Source)
	res = r.run("", "fleet", "resume")
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Contains(t, res.stdout, "fleet: running\nresumed billing\n")

	// An agent's token cannot flip anything.
	ar := newRunner(t, env.URL, agent.Token())
	res = ar.run("", "agents", "plan-mode", "billing", "off")
	assert.NotEqual(t, 0, res.code)
	assert.Contains(t, res.stderr, "airlock: forbidden: ")
	res = ar.run("", "fleet", "resume")
	assert.Contains(t, res.stderr, "airlock: forbidden: ")
}
