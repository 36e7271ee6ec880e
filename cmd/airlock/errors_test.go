package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestErrorsReachTheTerminalEscaped: the one error line is made of what
// the server says (its code and message, a decision's reason, a proxy's
// body), and is printed on the terminal of whoever runs the command. What
// a terminal would act on is shown escaped, never sent, and a huge answer
// is cut: the line stays one short line.
func TestErrorsReachTheTerminalEscaped(t *testing.T) {
	t.Parallel()
	const hostile = "\x1b]0;owned\x07\x1b[2J\x1b[1A\u202egnp.exe"
	assertClean := func(t *testing.T, res result) {
		t.Helper()
		shown := res.stderr
		if len(shown) > 300 {
			shown = shown[:300] + "…"
		}
		assert.True(t, strings.HasPrefix(res.stderr, "airlock: "), "%q", shown)
		assert.Equal(t, 1, strings.Count(res.stderr, "\n"), "one line: %q", shown)
		assert.False(t, strings.ContainsAny(res.stderr, "\x1b\x07\u009b\u202e"), "sent raw: %q", shown)
		assert.Less(t, len(res.stderr), 8<<10, "a huge answer is cut: %q", shown)
	}

	// A real server: a reviewer's deny reason is anyone's text, and
	// `actions wait` shows it to another reviewer on the error line.
	env := apptest.Start(t)
	agent := env.Agent("billing", map[string]any{"rules": []map[string]any{{"id": "pay", "tool": "payments.send", "effect": "approve"}}})
	reviewer := env.Reviewer("rita")
	a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "payments.send", Args: map[string]any{"amount": 5}})
	require.NoError(t, err)
	_, err = reviewer.Deny(env.Ctx(), a.ID, hostile)
	require.NoError(t, err)
	res := newRunner(t, env.URL, env.Reviewer("ross").Token()).run("", "actions", "wait", a.ID)
	assert.Equal(t, 2, res.code, "%+v", res)
	assertClean(t, res)
	assert.Contains(t, res.stderr, `\u001b]0;owned\u0007`, "shown escaped")

	// Something else answering at AIRLOCK_URL (a proxy, a wrong port):
	// an error body that is not Airlock's, and Airlock's shape with
	// hostile fields.
	for name, h := range map[string]http.HandlerFunc{
		"a huge text body": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusBadGateway)
			w.Write([]byte(hostile + strings.Repeat("A", 4<<20)))
		},
		"an error object": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"error":{"code":"x\u001b[31m","message":"\u001b]0;owned\u0007 \u009b2J gone"}}`))
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			res := newRunner(t, srv.URL, "token").run("", "agents", "list")
			assert.NotEqual(t, 0, res.code, "%+v", res)
			assertClean(t, res)

			// The hook fails closed, and says why the same way.
			res = newRunner(t, srv.URL, "token").run(claudeInput("PreToolUse", "Read", map[string]any{"file_path": "/x"}, "toolu_e"), "hook", "claude-code")
			require.Equal(t, 2, res.code, "%+v", res)
			behavior, _ := decodeAnswer(t, res.stdout, "PreToolUse")
			assert.Equal(t, "deny", behavior)
			assertClean(t, res)
		})
	}
}
