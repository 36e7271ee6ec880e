package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// heldStreams reads airlock_held_requests{kind="stream"} from /metrics: the
// streams the instance holds open now. A server without it fails t.
func heldStreams(t *testing.T, env *apptest.Env) int {
	t.Helper()
	req, err := http.NewRequestWithContext(env.Ctx(), http.MethodGet, env.URL+"/metrics", nil)
	require.NoError(t, err)
	resp, err := env.HTTP.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), `airlock_held_requests{kind="stream"} `); ok {
			n, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err, line)
			return int(n)
		}
	}
	t.Fatal(`/metrics has no airlock_held_requests{kind="stream"}`)
	return 0
}

// TestStreamsCappedPerUser: a user holding AIRLOCK_MAX_STREAMS streams on
// an instance, through any of its tokens and sessions, is refused one more
// before the upgrade with 429 rate_limited, Retry-After and the API's
// error body; another reviewer's stream opens and carries changes as
// ever; a closed stream frees its slot. Before, one reviewer token could
// hold any number of websockets open.
func TestStreamsCappedPerUser(t *testing.T) {
	t.Parallel()
	const max = 2
	env := apptest.Start(t, apptest.Options{MaxStreams: max})
	ctx := env.Ctx()
	b, rita := userSession(t, env, "rita", "reviewer")
	ritaAgain, _, err := env.Anon.Login(ctx, "rita", "rita-password-123") // another token of hers
	require.NoError(t, err)
	sam := env.Reviewer("sam")
	agent := env.Agent("mailer", askPolicy)
	browserHeader := http.Header{"Cookie": {"airlock_session=" + b.session()}, "Origin": {env.URL}}

	first, _, err := dial(ctx, env.URL, bearer(rita.Token()))
	require.NoError(t, err)
	defer first.CloseNow()
	second, _, err := dial(ctx, env.URL, bearer(ritaAgain.Token()))
	require.NoError(t, err)
	defer second.CloseNow()

	// Her console (the session cookie) is refused a third, before the
	// upgrade.
	conn, resp, err := dial(ctx, env.URL, browserHeader)
	require.Error(t, err, "no upgrade")
	require.Nil(t, conn)
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	assert.NoError(t, err, "Retry-After %q", resp.Header.Get("Retry-After"))
	assert.Positive(t, secs)
	assertErrorBody(t, resp, "rate_limited")
	// So is a plain GET (checked against the OpenAPI document), before the
	// 426 it would get otherwise.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+"/api/v1/stream", nil)
	require.NoError(t, err)
	req.Header = bearer(rita.Token())
	plain, err := apptest.ValidatingClient(t).Do(req)
	require.NoError(t, err)
	defer plain.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, plain.StatusCode)
	assertErrorBody(t, plain, "rate_limited")

	// Another reviewer's stream opens and carries the next change.
	theirs, _, err := dial(ctx, env.URL, bearer(sam.Token()))
	require.NoError(t, err)
	defer theirs.CloseNow()
	require.Equal(t, max+1, heldStreams(t, env))
	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com"}})
	require.NoError(t, err)
	for {
		_, data, err := theirs.Read(ctx)
		require.NoError(t, err, "sam's stream ended")
		var m message
		require.NoError(t, json.Unmarshal(data, &m))
		if m.Type == "action.created" && m.Action != nil && m.Action.ID == a.ID {
			break
		}
	}

	// A stream she closes gives its slot back: her console's opens.
	require.NoError(t, first.Close(websocket.StatusNormalClosure, ""))
	for heldStreams(t, env) != max {
		select {
		case <-ctx.Done():
			t.Fatal("the closed stream's slot was never given back")
		case <-time.After(5 * time.Millisecond):
		}
	}
	console, resp, err := dial(ctx, env.URL, browserHeader)
	require.NoError(t, err)
	assert.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	console.Close(websocket.StatusNormalClosure, "")
}
