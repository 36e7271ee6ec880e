package client_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
)

func TestActionKeepsNumbersExact(t *testing.T) {
	t.Parallel()
	var a client.Action
	require.NoError(t, json.Unmarshal([]byte(`{"id":"x","args":{"amount":10000000000000001,"rate":0.1},"status":"pending"}`), &a))
	assert.Equal(t, json.Number("10000000000000001"), a.Args["amount"])
	assert.Equal(t, json.Number("0.1"), a.Args["rate"])
	assert.Equal(t, "pending", a.Status)
}

func TestPolicyVersionKeepsNumbersExact(t *testing.T) {
	t.Parallel()
	var pv client.PolicyVersion
	require.NoError(t, json.Unmarshal([]byte(`{"scope":"fleet","version":3,"document":{"settings":{"amount_cap":10000000000000001}}}`), &pv))
	assert.Equal(t, json.Number("10000000000000001"), pv.Document["settings"].(map[string]any)["amount_cap"])
	assert.Equal(t, 3, pv.Version)
}
