package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestWrongPhrasesAreBounded: five wrong phrases from one reviewer for one
// action, each audited; the sixth try is refused (429, Retry-After) even
// with the right phrase, while another reviewer may still approve.
func TestWrongPhrasesAreBounded(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("mailer", designPolicy)
	alice, bob := env.Reviewer("alice"), env.Reviewer("bob")
	a := submit(t, agent, "email.send", map[string]any{"to": "x@example.com"})
	full, err := alice.Get(ctx, a.ID)
	require.NoError(t, err)

	for i := range 5 {
		_, err := alice.Approve(ctx, a.ID, "email.send ZZZZ", "")
		require.Equal(t, http.StatusUnprocessableEntity, client.StatusOf(err), "wrong phrase %d: %v", i+1, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.URL+"/api/v1/actions/"+a.ID+"/approve",
		bytes.NewReader([]byte(`{"confirmation":"`+full.ConfirmationPhrase+`"}`)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+alice.Token())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the sixth try is refused, right phrase or not")
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))

	still, err := alice.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, "pending", still.Status)
	got, err := bob.Approve(ctx, a.ID, full.ConfirmationPhrase, "")
	require.NoError(t, err, "another reviewer is not locked out")
	assert.Equal(t, "approved", got.Status)

	page, err := env.Auditor("audra").Audit(ctx, url.Values{"action_id": {a.ID}, "kind": {"action.phrase_refused"}})
	require.NoError(t, err)
	require.Len(t, page.Events, 5, "every wrong phrase is audited")
	assert.Equal(t, "alice", page.Events[0].Actor)
}

// TestPhraseSpaceCannotBeExhausted: with every 4-character code of a tool
// taken by a pending action, submits still get a phrase (a longer one),
// never a 500.
func TestPhraseSpaceCannotBeExhausted(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("mailer", designPolicy)

	env.Agent("seed", nil)
	seedCtx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(seedCtx, env.DBURL)
	require.NoError(t, err)
	defer conn.Close(seedCtx)
	// All 25^4 codes of email.send, pending, held by another agent (phrases
	// are unique per tool across agents), whose pending count is set once.
	_, err = conn.Exec(seedCtx, `
		WITH codes AS (
			SELECT n, string_agg(substr('ACDEFGHJKMNPQRTUVWXY34679', (n / (25 ^ p)::int) % 25 + 1, 1), '' ORDER BY p DESC) AS code
			FROM generate_series(0, 390624) AS n, generate_series(0, 3) AS p GROUP BY n
		)
		INSERT INTO actions (id, agent_id, correlation_id, tool, args, status, risk, decision, phrase, expires_at)
		SELECT gen_random_uuid(), 'seed', 'seed', 'email.send', '{}', 'pending', '{"level":"low","score":0,"reasons":[]}',
			'{"effect":"approve","by":"policy"}', 'email.send ' || code, now() + interval '1 hour'
		FROM codes;
		UPDATE agent_pending SET pending = 390625 WHERE agent_id = 'seed';`)
	require.NoError(t, err)

	rev := env.Reviewer("rita")
	for i := range 50 {
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com", "n": i}})
		require.NoError(t, err, "submit %d", i)
		require.Equal(t, "pending", a.Status)
		full, err := rev.Get(ctx, a.ID)
		require.NoError(t, err)
		assert.Regexp(t, `^email\.send [ACDEFGHJKMNPQRTUVWXY34679]{6,8}$`, full.ConfirmationPhrase)
	}
}
