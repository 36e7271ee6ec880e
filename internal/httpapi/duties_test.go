package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestSeparationOfDuties: with the fleet setting on, neither the agent's
// owner nor the issuer of the submitting token may approve (403), and one
// person never counts twice; without it, they may.
func TestSeparationOfDuties(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	olga, alice := env.Reviewer("olga"), env.Reviewer("alice")
	_, err := env.Admin.Do(ctx, http.MethodPost, "/api/v1/agents", map[string]string{"id": "bot", "name": "Bot", "owner": "olga"}, nil)
	require.NoError(t, err)
	_, err = env.Admin.PutAgentPolicy(ctx, "bot", map[string]any{"rules": []map[string]any{
		{"id": "mail", "tool": "email.send", "effect": "approve"},
		{"id": "pay", "tool": "payments.send", "effect": "approve", "approvals": 2},
	}})
	require.NoError(t, err)
	tok, err := env.Admin.IssueAgentToken(ctx, "bot", 0) // issued by admin
	require.NoError(t, err)
	agent := env.Client(tok.Token)

	// Off (the default): the owner may approve.
	a := submit(t, agent, "email.send", map[string]any{"to": "x@example.com"})
	_, err = approveWith(t, olga, a.ID, "")
	require.NoError(t, err)

	_, err = env.Admin.PutFleetPolicy(ctx, map[string]any{"rules": []map[string]any{}, "settings": map[string]any{"separation_of_duties": true}})
	require.NoError(t, err)

	b := submit(t, agent, "email.send", map[string]any{"to": "y@example.com"})
	_, err = approveWith(t, olga, b.ID, "")
	assert.Equal(t, http.StatusForbidden, client.StatusOf(err), "the owner")
	_, err = approveWith(t, env.Admin, b.ID, "")
	assert.Equal(t, http.StatusForbidden, client.StatusOf(err), "the token's issuer")
	got, err := alice.Get(ctx, b.ID)
	require.NoError(t, err)
	assert.Equal(t, "pending", got.Status)
	assert.Empty(t, got.Approvals, "refused approvals leave nothing")
	got, err = approveWith(t, alice, b.ID, "")
	require.NoError(t, err)
	assert.Equal(t, "approved", got.Status, "anyone else")

	// A quorum of two needs two people other than owner and issuer.
	c := submit(t, agent, "payments.send", map[string]any{"amount": 5, "to": "acme"})
	_, err = approveWith(t, alice, c.ID, "")
	require.NoError(t, err)
	_, err = approveWith(t, alice, c.ID, "")
	assert.Equal(t, http.StatusConflict, client.StatusOf(err), "one person counts once")
	_, err = approveWith(t, olga, c.ID, "")
	assert.Equal(t, http.StatusForbidden, client.StatusOf(err))
	got, err = approveWith(t, env.Reviewer("bob"), c.ID, "")
	require.NoError(t, err)
	assert.Equal(t, "approved", got.Status)
}
