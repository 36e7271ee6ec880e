package client_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
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

// TestSubmitAnswerDecodedExactlyAndWhole: the submit path's answer is
// decoded without json.Unmarshal's first pass, and still keeps numbers
// exact, and still refuses a body with anything after the action.
func TestSubmitAnswerDecodedExactlyAndWhole(t *testing.T) {
	t.Parallel()
	body := `{"id":"x","tool":"payments.send","args":{"amount":10000000000000001},"status":"approved"}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, body+r.URL.Query().Get("tail"))
	}))
	defer srv.Close()
	c := client.New(srv.URL, "token")
	a, err := c.Submit(t.Context(), client.SubmitRequest{Tool: "payments.send"})
	require.NoError(t, err)
	assert.Equal(t, json.Number("10000000000000001"), a.Args["amount"])
	assert.Equal(t, "approved", a.Status)

	var out client.Action
	_, err = c.Do(t.Context(), http.MethodGet, "/?tail=%20%0A", nil, &out)
	require.NoError(t, err, "white space after the value is fine")
	_, err = c.Do(t.Context(), http.MethodGet, "/?tail=x", nil, &out)
	require.Error(t, err, "anything else after it is not")
	_, err = c.Do(t.Context(), http.MethodGet, "/?tail={}", nil, &out)
	require.Error(t, err)
}
