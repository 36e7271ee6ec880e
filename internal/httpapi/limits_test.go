package httpapi_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestMaxArgsBytes: args larger than settings.max_args_bytes (64 KiB by
// default, the agent's own setting when it has one) are refused with 413
// and nothing is stored.
func TestMaxArgsBytes(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	small := env.Agent("small", map[string]any{"rules": []map[string]any{{"id": "all", "tool": "*", "effect": "allow"}},
		"settings": map[string]any{"max_args_bytes": 2048}})
	big := env.Agent("big", map[string]any{"rules": []map[string]any{{"id": "all", "tool": "*", "effect": "allow"}}})

	_, err := small.Submit(ctx, client.SubmitRequest{Tool: "file.write", Args: map[string]any{"content": strings.Repeat("a", 1500)}})
	require.NoError(t, err)
	_, err = small.Submit(ctx, client.SubmitRequest{Tool: "file.write", Args: map[string]any{"content": strings.Repeat("a", 3000)}})
	assert.Equal(t, http.StatusRequestEntityTooLarge, client.StatusOf(err))
	_, err = big.Submit(ctx, client.SubmitRequest{Tool: "file.write", Args: map[string]any{"content": strings.Repeat("a", 3000)}})
	require.NoError(t, err)
	_, err = big.Submit(ctx, client.SubmitRequest{Tool: "file.write", Args: map[string]any{"content": strings.Repeat("a", 70<<10)}})
	assert.Equal(t, http.StatusRequestEntityTooLarge, client.StatusOf(err), "default 64 KiB")

	page, err := env.Auditor("audra").ListActions(ctx, nil)
	require.NoError(t, err)
	assert.Len(t, page.Actions, 2, "refused submits store nothing")
}

// TestMaxPending: an agent with settings.max_pending pending actions gets
// 429 for the next one that would wait (calls that do not wait still go
// through); a decision makes room. The count follows every way out of
// pending.
func TestMaxPending(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{ExpiryEvery: 20 * time.Millisecond})
	ctx := env.Ctx()
	agent := env.Agent("busy", map[string]any{"rules": []map[string]any{
		{"id": "mail", "tool": "email.send", "effect": "approve"},
		{"id": "quick", "tool": "sms.send", "effect": "approve", "timeout": "1s"},
		{"id": "read", "tool": "fs.read", "effect": "allow"},
	}, "settings": map[string]any{"max_pending": 3}})
	alice := env.Reviewer("alice")
	mail := func(i int) (*client.Action, error) {
		return agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"n": i}})
	}
	var pending []*client.Action
	for i := range 3 {
		a, err := mail(i)
		require.NoError(t, err)
		pending = append(pending, a)
	}
	_, err := mail(3)
	require.Equal(t, http.StatusTooManyRequests, client.StatusOf(err), "%v", err)
	_, err = agent.Submit(ctx, client.SubmitRequest{Tool: "fs.read", Args: map[string]any{"path": "a"}})
	require.NoError(t, err, "a call that does not wait is not counted")
	other := env.Agent("calm", map[string]any{"rules": []map[string]any{{"id": "mail", "tool": "email.send", "effect": "approve"}},
		"settings": map[string]any{"max_pending": 3}})
	_, err = other.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{}})
	require.NoError(t, err, "another agent has its own count")

	_, err = alice.Deny(ctx, pending[0].ID, "no")
	require.NoError(t, err)
	_, err = approveWith(t, alice, pending[1].ID, "")
	require.NoError(t, err)
	_, err = agent.Cancel(ctx, pending[2].ID)
	require.NoError(t, err)
	for i := range 2 {
		_, err := mail(10 + i)
		require.NoError(t, err, "room again")
	}
	quick, err := agent.Submit(ctx, client.SubmitRequest{Tool: "sms.send", Args: map[string]any{}})
	require.NoError(t, err)
	_, err = mail(20)
	require.Equal(t, http.StatusTooManyRequests, client.StatusOf(err))
	got, err := agent.Wait(ctx, quick.ID)
	require.NoError(t, err)
	require.Equal(t, "expired", got.Status)
	_, err = mail(21)
	require.NoError(t, err, "an expiry makes room")

	conn, err := pgx.Connect(ctx, env.DBURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var counted, actual int
	require.NoError(t, conn.QueryRow(ctx, `SELECT pending FROM agent_pending WHERE agent_id = 'busy'`).Scan(&counted))
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM actions WHERE agent_id = 'busy' AND status = 'pending'`).Scan(&actual))
	assert.Equal(t, actual, counted)
	assert.Equal(t, 3, actual)
}

// TestMaxPendingUnderLoad: many submits of several agents at once, each
// answered 201 or 429 (never an error), and every agent's pending count
// stays what its actions say.
func TestMaxPendingUnderLoad(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	doc := map[string]any{"rules": []map[string]any{{"id": "mail", "tool": "email.send", "effect": "approve"}},
		"settings": map[string]any{"max_pending": 10}}
	agents := []*client.Client{env.Agent("a1", doc), env.Agent("a2", doc), env.Agent("a3", doc), env.Agent("a4", doc)}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				_, err := agents[(g+i)%4].Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"g": g, "i": i}})
				if err != nil {
					assert.Equal(t, http.StatusTooManyRequests, client.StatusOf(err), "%v", err)
				}
			}
		}()
	}
	wg.Wait()
	conn, err := pgx.Connect(ctx, env.DBURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT p.agent_id, p.pending, (SELECT count(*) FROM actions a WHERE a.agent_id = p.agent_id AND a.status = 'pending')
		FROM agent_pending p ORDER BY 1`)
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		var id string
		var counted, actual int
		require.NoError(t, rows.Scan(&id, &counted, &actual))
		assert.Equal(t, actual, counted, id)
		assert.GreaterOrEqual(t, actual, 10, id)
		assert.LessOrEqual(t, actual, 10+16, "%s: at most the submits in flight past the bound", id)
		n++
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, 4, n)
}

// TestHostileSubmitsDoNotHurtOthers: agents sending NUL, lone surrogates
// and invalid UTF-8 in their submits get 400 each, while a healthy agent
// submitting beside them gets every submit through.
func TestHostileSubmitsDoNotHurtOthers(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	doc := map[string]any{"rules": []map[string]any{{"id": "all", "tool": "*", "effect": "allow"}}}
	healthy := env.Agent("healthy", doc)
	bad := []string{
		`{"tool":"fs.read","args":{"note":"a\u0000b"}}`,
		`{"tool":"fs.read","args":{"k\u0000":1}}`,
		`{"tool":"fs.read","args":{"nested":[{"x":"\ud800"}]}}`,
		"{\"tool\":\"fs.read\",\"args\":{\"p\":\"\xff\"}}",
	}
	hostile := make([]string, 4)
	for i := range hostile {
		hostile[i] = env.Agent("hostile-"+string(rune('a'+i)), doc).Token()
	}
	var wg sync.WaitGroup
	for i, tok := range hostile {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				got := rawRequest(t, "POST", env.URL+"/api/v1/actions", tok, "", []byte(bad[(i+j)%len(bad)]))
				assert.Equal(t, http.StatusBadRequest, got.status)
			}
		}()
	}
	for i := range 100 {
		a, err := healthy.Submit(ctx, client.SubmitRequest{Tool: "fs.read", Args: map[string]any{"i": i}})
		require.NoError(t, err)
		require.Equal(t, "approved", a.Status)
	}
	wg.Wait()
	page, err := env.Auditor("audra").ListActions(ctx, nil)
	require.NoError(t, err)
	assert.Len(t, page.Actions, 50, "the first page: only the healthy agent's actions exist")
	for _, a := range page.Actions {
		assert.Equal(t, "healthy", a.AgentID)
	}
}
