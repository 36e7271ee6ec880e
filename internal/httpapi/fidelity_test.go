package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apptest"
)

// spendPolicy denies every payments tool but a plain send, and denies a
// send of exactly 10000000000000000: its neighbour 10000000000000001 must
// not match.
var spendPolicy = json.RawMessage(`{"rules":[
	{"id":"no-payments","tool":"payments.*","effect":"deny","when":"tool != 'payments.send'"},
	{"id":"neighbour","tool":"payments.send","effect":"deny","when":"args.amount == 10000000000000000"},
	{"id":"spend","tool":"payments.send","effect":"approve"},
	{"id":"refund","tool":"payments.refund","effect":"allow"}]}`)

// rawBody sends a request and returns its status and body as bytes.
func rawBody(t *testing.T, method, url, token string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := apptest.ValidatingClient(t).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, data
}

// TestToolNameVariantsCannotMissARule: with a deny on payments.*, every
// spelling of a payments tool is decided as its canonical lower-case name
// or refused.
func TestToolNameVariantsCannotMissARule(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	env.Agent("payer", json.RawMessage(`{"rules":[{"id":"no-payments","tool":"payments.*","effect":"deny"},{"id":"rest","tool":"*","effect":"allow"}]}`))
	token := agentTokenOf(t, env, "payer")
	actions := env.URL + "/api/v1/actions"

	for _, tool := range []string{"payments.send", "Payments.send", "PAYMENTS.SEND", "pAyMeNtS.SeNd"} {
		t.Run("denied "+tool, func(t *testing.T) {
			got := rawRequest(t, "POST", actions, token, "", []byte(`{"tool":"`+tool+`","args":{}}`))
			require.Equal(t, 201, got.status, "%v", got.body)
			assert.Equal(t, "payments.send", got.body["tool"], "stored lower case")
			assert.Equal(t, "denied", got.body["status"])
			assert.Equal(t, "no-payments", got.body["decision"].(map[string]any)["rule_id"])
		})
	}
	for _, tool := range []string{"payments/send", "payments:send", "payments send", "payments.send\u200b", "paymentſ.send", ".payments", "-x"} {
		t.Run("refused "+tool, func(t *testing.T) {
			before := rowCounts(t, env.DBURL)
			got := rawRequest(t, "POST", actions, token, "", []byte(`{"tool":"`+tool+`","args":{}}`))
			require.Equal(t, 400, got.status, "%v", got.body)
			assert.Equal(t, "invalid", got.body["error"].(map[string]any)["code"])
			assert.Equal(t, before, rowCounts(t, env.DBURL))
		})
	}
	t.Run("rule patterns must be canonical", func(t *testing.T) {
		got := rawRequest(t, "PUT", env.URL+"/api/v1/agents/payer/policy", loginToken(t, env), "",
			[]byte(`{"rules":[{"id":"r","tool":"Payments.*","effect":"deny"}]}`))
		require.Equal(t, 422, got.status, "%v", got.body)
		assert.Equal(t, "validation_failed", got.body["error"].(map[string]any)["code"])
	})
}

// TestNumbersRoundTripExactly: a 17-digit integer is stored, returned and
// compared as sent, never as 1e+16.
func TestNumbersRoundTripExactly(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	env.Agent("payer", spendPolicy)
	token := agentTokenOf(t, env, "payer")

	status, body := rawBody(t, "POST", env.URL+"/api/v1/actions", token,
		[]byte(`{"tool":"payments.send","args":{"amount":10000000000000001,"legs":[{"cents":123456789012345678901234567890}],"rate":0.1}}`))
	require.Equal(t, 201, status, "%s", body)
	assert.Contains(t, string(body), `"amount":10000000000000001`)
	assert.Contains(t, string(body), `"cents":123456789012345678901234567890`)
	assert.Contains(t, string(body), `"status":"pending"`, "10000000000000001 must not match the rule for 10000000000000000")
	assert.Contains(t, string(body), `"rule_id":"spend"`)
	id := between(string(body), `"id":"`, `"`)

	status, body = rawBody(t, "GET", env.URL+"/api/v1/actions/"+id, loginToken(t, env), nil)
	require.Equal(t, 200, status, "%s", body)
	assert.Contains(t, string(body), `"amount":10000000000000001`, "read back from Postgres exactly")
	assert.Contains(t, string(body), `"cents":123456789012345678901234567890`)
	assert.Contains(t, string(body), `"rate":0.1`)

	status, body = rawBody(t, "GET", env.URL+"/api/v1/audit?action_id="+id, loginToken(t, env), nil)
	require.Equal(t, 200, status, "%s", body)
	assert.Contains(t, string(body), `"amount":10000000000000001`, "the audit trail too")

	status, body = rawBody(t, "GET", env.URL+"/api/v1/audit/verify", loginToken(t, env), nil)
	require.Equal(t, 200, status, "%s", body)
	assert.Contains(t, string(body), `"ok":true`)

	// The neighbour itself is denied: the rule works.
	status, body = rawBody(t, "POST", env.URL+"/api/v1/actions", token, []byte(`{"tool":"payments.send","args":{"amount":1e16}}`))
	require.Equal(t, 201, status, "%s", body)
	assert.Contains(t, string(body), `"rule_id":"neighbour"`)
}

func between(s, start, end string) string {
	_, after, _ := strings.Cut(s, start)
	v, _, _ := strings.Cut(after, end)
	return v
}

// TestBadStringsAreRefusedWithTheField: NUL, lone surrogates and invalid
// UTF-8 anywhere in a body, or in the path or query, are a 400 naming
// where, and write nothing.
func TestBadStringsAreRefusedWithTheField(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	env.Agent("payer", spendPolicy)
	token := agentTokenOf(t, env, "payer")
	admin := loginToken(t, env)
	actions := env.URL + "/api/v1/actions"
	cases := []struct {
		name, method, url, tok string
		body                   string
		code, field            string
	}{
		{"lone surrogate", "POST", actions, token, `{"tool":"payments.send","args":{"memo":"\ud800"}}`, "invalid_json", "args.memo"},
		{"lone low surrogate", "POST", actions, token, `{"tool":"payments.send","args":{"memo":"x\udfff"}}`, "invalid_json", "args.memo"},
		{"NUL in a value", "POST", actions, token, `{"tool":"payments.send","args":{"memo":"a\u0000b"}}`, "invalid_json", "args.memo"},
		{"NUL in a key", "POST", actions, token, `{"tool":"payments.send","args":{"me\u0000mo":1}}`, "invalid_json", `args["me\x00mo"]`},
		{"NUL nested", "POST", actions, token, `{"tool":"payments.send","args":{"to":{"names":["ok","\u0000"]}}}`, "invalid_json", "args.to.names[1]"},
		{"NUL in a nested key", "POST", actions, token, `{"tool":"payments.send","args":{"to":[{"\u0000":1}]}}`, "invalid_json", `args.to[0]["\x00"]`},
		{"NUL in the reason", "POST", actions, token, `{"tool":"payments.send","args":{},"reason":"\u0000"}`, "invalid_json", "reason"},
		{"invalid UTF-8 in a value", "POST", actions, token, "{\"tool\":\"payments.send\",\"args\":{\"memo\":\"\xc3\"}}", "invalid_json", "args.memo"},
		{"NUL in a policy", "PUT", env.URL + "/api/v1/agents/payer/policy", admin, `{"rules":[{"id":"r","tool":"x","effect":"deny","when":"args.a == '\u0000'"}]}`, "invalid", "rules[0].when"},
		{"NUL in a query", "GET", actions + "?agent=pay%00er", admin, "", "invalid", "query.agent"},
		{"invalid UTF-8 in a query", "GET", env.URL + "/api/v1/audit?conversation_id=%ff", admin, "", "invalid", "query.conversation_id"},
		{"NUL in a path", "GET", env.URL + "/api/v1/agents/pay%00er", admin, "", "invalid", "path"},
		{"invalid UTF-8 in a path", "GET", env.URL + "/api/v1/agents/%c3", admin, "", "invalid", "path"},
		{"NUL in a console query", "GET", env.URL + "/ui/queue?agent=%00", admin, "", "invalid", "query.agent"},
	}
	for _, form := range []string{"username=ad%00min&password=x", "username=admin&password=%ff", "reason=%00&csrf=x"} {
		t.Run("console form "+form, func(t *testing.T) {
			before := rowCounts(t, env.DBURL)
			got := rawRequest(t, "POST", env.URL+"/ui/login", "", "application/x-www-form-urlencoded", []byte(form))
			require.Equal(t, 400, got.status, "%v", got.body)
			e := got.body["error"].(map[string]any)
			assert.Equal(t, "invalid", e["code"])
			assert.Contains(t, e["details"].(map[string]any)["field"], "form.")
			assert.Equal(t, before, rowCounts(t, env.DBURL))
		})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := rowCounts(t, env.DBURL)
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			got := rawRequest(t, tc.method, tc.url, tc.tok, "", body)
			require.Equal(t, 400, got.status, "%v", got.body)
			e := got.body["error"].(map[string]any)
			assert.Equal(t, tc.code, e["code"])
			assert.NotEmpty(t, e["message"])
			details, _ := e["details"].(map[string]any)
			assert.Equal(t, tc.field, details["field"], "%v", e)
			assert.Equal(t, before, rowCounts(t, env.DBURL))
		})
	}
}

// TestSubmitEventsSealedFromTheirDigest: the submit statement stores each
// event's content digest (seal format 2) computed from the bytes the server
// sends, and PostgreSQL's jsonb respells them (key order, escapes, numbers):
// the sealer seals from the stored digest, and verification, which
// recomputes every digest from what the database kept, finds the chain
// whole, for an allowed and a pending call. A call under a budget, whose
// audited decision the statement composes in SQL, stores no digest: the
// sealer works it out from the stored event.
func TestSubmitEventsSealedFromTheirDigest(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	env.Agent("payer", spendPolicy)
	token := agentTokenOf(t, env, "payer")
	for _, body := range []string{
		`{"tool":"payments.refund","args":{"amount":1E1,"to":"\u00e9t\u00e9 \ud83d\ude00","memo":"a\/b\n","nested":{"z":[1.50,-0.0,1e-7],"a":null}}}`,
		`{"tool":"payments.send","args":{"zz":true,"amount":12345678901234567890.500,"to":"<acme>&co","legs":[{"b":2,"a":1}]}}`,
	} {
		status, resp := rawBody(t, "POST", env.URL+"/api/v1/actions", token, []byte(body))
		require.Equal(t, 201, status, "%s", resp)
	}
	budgeted := env.Agent("budgeted", budgetDoc("allow", "100", "24h", "approve"))
	assert.Equal(t, "approved", pay(t, budgeted, "2.50").Status)
	ctx := env.Ctx()
	conn, err := pgx.Connect(ctx, env.DBURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var submitted, digested int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(digest) FROM audit_events WHERE kind = 'action.submitted'`).
		Scan(&submitted, &digested))
	require.Equal(t, 3, submitted)
	assert.Equal(t, 2, digested, "the submit statement stores the digest, but under a budget")

	var events int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM audit_events`).Scan(&events))
	var report struct {
		OK      bool   `json:"ok"`
		Checked int    `json:"checked"`
		Reason  string `json:"reason"`
	}
	require.Eventually(t, func() bool { // the sealer runs every 250 ms
		status, body := rawBody(t, "GET", env.URL+"/api/v1/audit/verify", loginToken(t, env), nil)
		require.Equal(t, 200, status, "%s", body)
		require.NoError(t, json.Unmarshal(body, &report))
		return !report.OK || report.Checked >= events
	}, 20*time.Second, 50*time.Millisecond)
	assert.True(t, report.OK, report.Reason)
	var formats []int16
	require.NoError(t, conn.QueryRow(ctx, `SELECT array_agg(DISTINCT s.format) FROM audit_seals s
		JOIN audit_events e ON e.id = s.id AND e.at = s.at WHERE e.kind = 'action.submitted'`).Scan(&formats))
	assert.Equal(t, []int16{2}, formats)
}
