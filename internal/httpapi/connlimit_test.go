package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// heldMetric reads a series of the per-caller caps from /metrics:
// name is airlock_held_requests or airlock_held_requests_refused_total,
// kind long_poll or stream. A server without the series fails t.
func heldMetric(t *testing.T, env *apptest.Env, name, kind string) int {
	t.Helper()
	status, body := scrape(t, env, "")
	require.Equal(t, http.StatusOK, status)
	prefix := name + `{kind="` + kind + `"} `
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			n, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err, line)
			return int(n)
		}
	}
	t.Fatalf("/metrics has no %s%s", name, prefix)
	return 0
}

// waitHeld waits until the instance holds n long-lived requests of kind:
// the event a test waits on before it asks for one more (the server
// takes a caller's slot before it answers anything, so no client sees
// that happen).
func waitHeld(t *testing.T, env *apptest.Env, kind string, n int) {
	t.Helper()
	ctx := env.Ctx()
	for heldMetric(t, env, "airlock_held_requests", kind) != n {
		select {
		case <-ctx.Done():
			t.Fatalf("the server never held %d %s requests (it holds %d)", n, kind, heldMetric(t, env, "airlock_held_requests", kind))
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// poll is one long poll run in the background: its answer arrives on the
// channel.
type pollResult struct {
	status int
	action client.Action
	err    error
}

func longPoll(ctx context.Context, c *client.Client, id string) <-chan pollResult {
	done := make(chan pollResult, 1)
	go func() {
		var a client.Action
		status, err := c.Do(ctx, http.MethodGet, "/api/v1/actions/"+url.PathEscape(id)+"?wait=60s", nil, &a)
		done <- pollResult{status: status, action: a, err: err}
	}()
	return done
}

func answered(t *testing.T, ctx context.Context, done <-chan pollResult) pollResult {
	t.Helper()
	return awaitDone(t, ctx, done, "the long poll never returned")
}

// awaitDone waits for what a request made in the background (longPoll,
// holdSum) sends on done, failing with never when ctx ends first.
func awaitDone[T any](t *testing.T, ctx context.Context, done <-chan T, never string) T {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-ctx.Done():
		t.Fatal(never)
		var zero T
		return zero
	}
}

// rawPoll long-polls id with token through the OpenAPI-validating client
// and returns the response with its body read.
func rawPoll(t *testing.T, env *apptest.Env, token, id string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(env.Ctx(), http.MethodGet, env.URL+"/api/v1/actions/"+url.PathEscape(id)+"?wait=60s", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := env.HTTP.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

// assertRateLimited checks a refusal over a caller's cap: 429, Retry-After
// in whole seconds, and the API's error body naming the setting.
func assertRateLimited(t *testing.T, resp *http.Response, body []byte, setting string) {
	t.Helper()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "%s", body)
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	assert.NoError(t, err, "Retry-After %q", resp.Header.Get("Retry-After"))
	assert.Positive(t, secs)
	var eb struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(body, &eb), "%s", body)
	assert.Equal(t, "rate_limited", eb.Error.Code)
	assert.Contains(t, eb.Error.Message, setting)
}

// TestLongPollsCappedPerAgent: an agent holding AIRLOCK_MAX_LONG_POLLS
// long polls on an instance gets 429 rate_limited with Retry-After and
// the error body for one more, whatever token it uses, while a poll
// without wait still answers and another agent's long poll is held and
// returns when its action is decided; a poll that returns frees its slot.
// Before, one agent token could hold any number of polls open.
func TestLongPollsCappedPerAgent(t *testing.T) {
	t.Parallel()
	const max = 3
	env := apptest.Start(t, apptest.Options{MaxLongPolls: max})
	ctx := env.Ctx()
	greedy := env.Agent("greedy", designPolicy)
	modest := env.Agent("modest", designPolicy)
	rita := env.Reviewer("rita")

	var mine []*client.Action
	for i := range max + 1 {
		mine = append(mine, submit(t, greedy, "email.send", map[string]any{"n": i}))
	}
	var polls []<-chan pollResult
	for _, a := range mine[:max] {
		polls = append(polls, longPoll(ctx, greedy, a.ID))
	}
	waitHeld(t, env, "long_poll", max)

	// One more is refused, also with another token of the same agent.
	resp, body := rawPoll(t, env, greedy.Token(), mine[max].ID)
	assertRateLimited(t, resp, body, "AIRLOCK_MAX_LONG_POLLS")
	resp, body = rawPoll(t, env, agentTokenOf(t, env, "greedy"), mine[max].ID)
	assertRateLimited(t, resp, body, "AIRLOCK_MAX_LONG_POLLS")
	assert.Equal(t, 2, heldMetric(t, env, "airlock_held_requests_refused_total", "long_poll"))
	// A read that does not wait is no long poll.
	got, err := greedy.Get(ctx, mine[max].ID)
	require.NoError(t, err)
	assert.Equal(t, "pending", got.Status)

	// Another agent is not affected: its poll is held, and returns the
	// moment its action is decided.
	theirs := submit(t, modest, "email.send", map[string]any{"to": "x@example.com"})
	theirPoll := longPoll(ctx, modest, theirs.ID)
	waitHeld(t, env, "long_poll", max+1)
	full, err := rita.Get(ctx, theirs.ID)
	require.NoError(t, err)
	_, err = rita.Approve(ctx, theirs.ID, full.ConfirmationPhrase, "")
	require.NoError(t, err)
	r := answered(t, ctx, theirPoll)
	require.NoError(t, r.err)
	assert.Equal(t, "approved", r.action.Status)

	// A poll that returns gives its slot back: the next one is held.
	_, err = rita.Deny(ctx, mine[0].ID, "not now")
	require.NoError(t, err)
	r = answered(t, ctx, polls[0])
	require.NoError(t, r.err)
	assert.Equal(t, "denied", r.action.Status)
	last := longPoll(ctx, greedy, mine[max].ID)
	waitHeld(t, env, "long_poll", max)
	_, err = rita.Deny(ctx, mine[max].ID, "no")
	require.NoError(t, err)
	r = answered(t, ctx, last)
	require.NoError(t, r.err, "held, not refused")
	assert.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "denied", r.action.Status)

	for i, a := range mine[1:max] {
		_, err = rita.Deny(ctx, a.ID, "no")
		require.NoError(t, err)
		r = answered(t, ctx, polls[i+1])
		require.NoError(t, r.err)
	}
	waitHeld(t, env, "long_poll", 0)
}

// TestMCPGatewayCallsCapped: the MCP gateway's gated calls count as
// their agent's long polls from submit to decision. A call beyond the cap
// is answered at once as any call Airlock could not decide on (a tool
// result with isError naming the limit) and nothing is submitted; the
// agent's REST long polls share the cap; another agent's calls are held
// as ever; decided calls give their slots back.
func TestMCPGatewayCallsCapped(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{MaxLongPolls: 2})
	ctx := env.Ctx()
	up := startUpstream(t, false)
	token, otherToken := twoAgentsOn(t, env, up.URL)
	reviewer := env.Reviewer("rita")
	s, err := connectGateway(t, env, "up", token)
	require.NoError(t, err)
	defer s.Close()
	other, err := connectGateway(t, env, "up", otherToken)
	require.NoError(t, err)
	defer other.Close()

	heldCall := func(tok, sid string, id int) <-chan string {
		done := make(chan string, 1)
		go func() {
			_, body := sessionMCP(t, env, tok, sid, fmt.Sprintf(
				`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"get-sum","arguments":{"a":%d,"b":1}}}`, id, id))
			done <- body
		}()
		return done
	}
	pending := func() []client.Action {
		page, err := reviewer.ListActions(ctx, url.Values{"status": {"pending"}, "tool": {"mcp.up.get-sum"}})
		require.NoError(t, err)
		return page.Actions
	}
	// A call holds its slot from before its submit: the gauge can count
	// it before its action is stored.
	waitPending := func(n int) {
		for len(pending()) != n {
			select {
			case <-ctx.Done():
				t.Fatalf("never %d pending calls", n)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	one, two := heldCall(token, s.ID(), 1), heldCall(token, s.ID(), 2)
	waitHeld(t, env, "long_poll", 2)
	waitPending(2)
	_, body := sessionMCP(t, env, token, s.ID(), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get-sum","arguments":{"a":3,"b":1}}}`)
	assert.Contains(t, body, `"isError":true`)
	assert.Contains(t, body, "AIRLOCK_MAX_LONG_POLLS")
	assert.Len(t, pending(), 2, "the refused call was not submitted")
	// The agent's REST long polls share the cap.
	resp, raw := rawPoll(t, env, token, pending()[0].ID)
	assertRateLimited(t, resp, raw, "AIRLOCK_MAX_LONG_POLLS")

	// Another agent's call is held as ever.
	theirs := heldCall(otherToken, other.ID(), 4)
	waitHeld(t, env, "long_poll", 3)
	waitPending(3)

	// Decided calls give their slots back.
	for _, a := range pending() {
		full, err := reviewer.Get(ctx, a.ID)
		require.NoError(t, err)
		_, err = reviewer.Approve(ctx, a.ID, full.ConfirmationPhrase, "")
		require.NoError(t, err)
	}
	for _, done := range []<-chan string{one, two, theirs} {
		select {
		case body := <-done:
			assert.Contains(t, body, "The sum of")
		case <-ctx.Done():
			t.Fatal("a held call was never answered")
		}
	}
	waitHeld(t, env, "long_poll", 0)
	again := heldCall(token, s.ID(), 5)
	waitHeld(t, env, "long_poll", 1)
	a := pendingAction(t, env, reviewer, "mcp.up.get-sum")
	_, err = reviewer.Approve(ctx, a.ID, a.ConfirmationPhrase, "")
	require.NoError(t, err)
	select {
	case body := <-again:
		assert.Contains(t, body, "The sum of 5 and 1 is 6.", "a slot is free again")
	case <-ctx.Done():
		t.Fatal("the call was never answered")
	}
}

// TestMCPGatewayStreamsCapped: the gateway's GET event streams count as
// their agent's streams. One beyond the cap is 429 rate_limited with
// Retry-After and the API's error body, and never reaches the upstream;
// another agent's stream opens; a closed stream gives its slot back.
func TestMCPGatewayStreamsCapped(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{MaxStreams: 1})
	// An upstream whose GET stream stays open until its client goes.
	var gets atomic.Int32
	stop := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		gets.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(stop) })
	resp, _ := call(t, env, http.MethodPost, "/api/v1/mcp/servers", loginToken(t, env), map[string]any{
		"name": "hold", "transport": "http", "url": hs.URL, "allow_private": []string{"127.0.0.0/8"}})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	env.Agent("coder", gatewayPolicy)
	env.Agent("other", gatewayPolicy)
	token, otherToken := agentTokenOf(t, env, "coder"), agentTokenOf(t, env, "other")

	// open opens a GET stream and returns its response (the stream held
	// open until cancel) .
	open := func(token string) (*http.Response, context.CancelFunc) {
		ctx, cancel := context.WithCancel(env.Ctx())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+"/mcp/hold", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := env.HTTP.Do(req)
		require.NoError(t, err)
		return resp, func() { cancel(); resp.Body.Close() }
	}
	first, closeFirst := open(token)
	require.Equal(t, http.StatusOK, first.StatusCode)
	refused, closeRefused := open(token)
	body, err := io.ReadAll(refused.Body)
	require.NoError(t, err)
	closeRefused()
	assertRateLimited(t, refused, body, "AIRLOCK_MAX_STREAMS")
	assert.EqualValues(t, 1, gets.Load(), "the refused stream never reached the upstream")

	theirs, closeTheirs := open(otherToken)
	assert.Equal(t, http.StatusOK, theirs.StatusCode, "another agent is not affected")
	waitHeld(t, env, "stream", 2)

	closeFirst()
	waitHeld(t, env, "stream", 1)
	again, closeAgain := open(token)
	assert.Equal(t, http.StatusOK, again.StatusCode, "a closed stream frees its slot")
	closeAgain()
	closeTheirs()
	waitHeld(t, env, "stream", 0)
}

// TestWorkerLeasesCapped: a worker's lease that waits is one of its long
// polls (counted by worker name, whatever its tokens): one more is 429
// with Retry-After, a lease that does not wait is not counted, and a
// lease answered with a job gives its slot back.
func TestWorkerLeasesCapped(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{MaxLongPolls: 1})
	ctx := env.Ctx()
	agent := env.Agent("runner", execPolicy)
	targets := []string{"workspace:main"}
	worker := func() *client.Client {
		tok, err := env.Admin.IssueWorkerToken(ctx, "host-1", targets, 0)
		require.NoError(t, err)
		return env.Client(tok.Token)
	}
	w1, w2 := worker(), worker()

	type leased struct {
		job *client.Job
		err error
	}
	done := make(chan leased, 1)
	go func() {
		job, err := w1.Lease(ctx, execKinds, targets, time.Minute)
		done <- leased{job, err}
	}()
	waitHeld(t, env, "long_poll", 1)
	_, err := w2.Lease(ctx, execKinds, targets, time.Minute)
	require.Equal(t, http.StatusTooManyRequests, client.StatusOf(err), "%v", err)
	var e *client.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "rate_limited", e.Code)
	assert.Positive(t, e.RetryAfter)
	none, err := w2.Lease(ctx, execKinds, targets, 0)
	require.NoError(t, err, "a lease that does not wait is no long poll")
	assert.Nil(t, none)

	a := submit(t, agent, "exec", map[string]any{"argv": []any{"ls"}, "workspace": "main"})
	require.Equal(t, "approved", a.Status)
	select {
	case l := <-done:
		require.NoError(t, l.err)
		require.NotNil(t, l.job)
		assert.Equal(t, a.ID, l.job.ActionID)
		_, err = w1.Complete(ctx, l.job.ID, l.job.Fence, client.JobResult{})
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the held lease never got the job")
	}
	waitHeld(t, env, "long_poll", 0)
}
