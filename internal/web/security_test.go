package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/identity"
)

func TestStreamHandshake(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	b, rev := userSession(t, env, "rita", "reviewer")
	agent := env.Agent("mailer", askPolicy)
	cookie := "airlock_session=" + b.session()

	cases := []struct {
		name   string
		header http.Header
		want   int
		code   string // the error body's code, for a refusal
	}{
		{"cross-origin page with a valid session", http.Header{"Cookie": {cookie}, "Origin": {"https://evil.example"}}, http.StatusForbidden, "forbidden"},
		{"look-alike origin on another port", http.Header{"Cookie": {cookie}, "Origin": {"http://127.0.0.1:1"}}, http.StatusForbidden, "forbidden"},
		{"opaque origin", http.Header{"Cookie": {cookie}, "Origin": {"null"}}, http.StatusForbidden, "forbidden"},
		{"session cookie without an Origin", http.Header{"Cookie": {cookie}}, http.StatusForbidden, "forbidden"},
		{"bearer token with a foreign origin", http.Header{"Authorization": {"Bearer " + rev.Token()}, "Origin": {"https://evil.example"}}, http.StatusForbidden, "forbidden"},
		{"no credentials", http.Header{"Origin": {env.URL}}, http.StatusUnauthorized, "unauthorized"},
		{"no credentials and no Origin (a program)", http.Header{}, http.StatusUnauthorized, "unauthorized"},
		{"a malformed bearer token", bearer("not-a-token"), http.StatusUnauthorized, "unauthorized"},
		{"agent token", bearer(agent.Token()), http.StatusForbidden, "forbidden"},
		{"same-origin session", http.Header{"Cookie": {cookie}, "Origin": {env.URL}}, http.StatusSwitchingProtocols, ""},
		{"bearer token (programs)", bearer(rev.Token()), http.StatusSwitchingProtocols, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, resp, err := dial(ctx, env.URL, tc.header)
			require.NotNil(t, resp, "err: %v", err)
			assert.Equal(t, tc.want, resp.StatusCode)
			if tc.want == http.StatusSwitchingProtocols {
				require.NoError(t, err)
				conn.Close(websocket.StatusNormalClosure, "")
				return
			}
			assert.Error(t, err, "no upgrade")
			assertErrorBody(t, resp, tc.code)
		})
	}

	// Asked without the upgrade (a plain GET, through the client that
	// checks every answer against the OpenAPI document): the same refusals,
	// and 426 for a caller who may have the stream.
	plain := []struct {
		name   string
		header http.Header
		want   int
		code   string
	}{
		{"no credentials", http.Header{}, http.StatusUnauthorized, "unauthorized"},
		{"agent token", bearer(agent.Token()), http.StatusForbidden, "forbidden"},
		{"reviewer token", bearer(rev.Token()), http.StatusUpgradeRequired, "upgrade_required"},
		{"half an upgrade", http.Header{"Authorization": {"Bearer " + rev.Token()}, "Connection": {"Upgrade"}, "Upgrade": {"websocket"}},
			http.StatusBadRequest, "invalid"}, // no Sec-WebSocket-Key
	}
	hc := apptest.ValidatingClient(t)
	for _, tc := range plain {
		t.Run("plain GET, "+tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+"/api/v1/stream", nil)
			require.NoError(t, err)
			req.Header = tc.header
			resp, err := hc.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, tc.want, resp.StatusCode)
			assertErrorBody(t, resp, tc.code)
			if tc.want == http.StatusUpgradeRequired {
				assert.Equal(t, "websocket", resp.Header.Get("Upgrade"))
			}
		})
	}
}

// assertErrorBody checks that resp is the API's error body with code.
func assertErrorBody(t *testing.T, resp *http.Response, code string) {
	t.Helper()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.NotNil(t, resp.Body)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	assert.Equal(t, code, body.Error.Code)
	assert.NotEmpty(t, body.Error.Message)
}

func TestFormPostsNeedTheCSRFToken(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	b, rev := userSession(t, env, "rita", "reviewer")
	agent := env.Agent("mailer", askPolicy)
	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com"}})
	require.NoError(t, err)
	_, page := b.get("/ui/actions/" + a.ID)
	token := csrfOf(t, page)
	path := "/ui/actions/" + a.ID + "/deny"

	cases := []struct {
		name    string
		form    url.Values
		headers []string
	}{
		{"no token", url.Values{"reason": {"no"}}, nil},
		{"a wrong token", url.Values{"reason": {"no"}, "csrf": {"forged"}}, nil},
		{"another session's token", url.Values{"reason": {"no"}, "csrf": {csrfOf(t, func() string {
			other, _ := userSession(t, env, "rob", "reviewer")
			_, p := other.get("/ui/queue")
			return p
		}())}}, nil},
		{"the right token from a cross-site page", url.Values{"reason": {"no"}, "csrf": {token}},
			[]string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := b.post(path, tc.form, tc.headers...)
			assert.Equal(t, http.StatusForbidden, resp.StatusCode)
			got, err := rev.Get(ctx, a.ID)
			require.NoError(t, err)
			assert.Equal(t, "pending", got.Status, "nothing changed")
		})
	}
	t.Run("with the token the form works", func(t *testing.T) {
		resp, _ := b.post(path, url.Values{"reason": {"not today"}, "csrf": {token}})
		assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
		got, err := rev.Get(ctx, a.ID)
		require.NoError(t, err)
		assert.Equal(t, "denied", got.Status)
		assert.Equal(t, "not today", got.Decision.Reason)
	})
	t.Run("the login form needs its token too", func(t *testing.T) {
		anon := newBrowser(t, env.URL)
		resp, _ := anon.post("/ui/login", url.Values{"username": {"rita"}, "password": {"rita-password-123"}})
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)
		assert.Empty(t, anon.session())
	})
}

func TestAuditorSeesActionsReadOnly(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	b, aud := userSession(t, env, "audra", "auditor")
	agent := env.Agent("mailer", askPolicy)
	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com"}})
	require.NoError(t, err)

	resp, page := b.get("/ui/actions/" + a.ID)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, page, `id="read-only"`)
	assert.NotContains(t, page, `id="approve-form"`, "no approve control")
	assert.NotContains(t, page, `id="deny-form"`, "no deny control")
	assert.NotContains(t, page, `id="phrase"`, "auditors never see the phrase")

	token := csrfOf(t, page)
	for _, decision := range []string{"approve", "deny"} {
		resp, page := b.post("/ui/actions/"+a.ID+"/"+decision, url.Values{"csrf": {token}, "confirmation": {"anything"}, "reason": {"no"}})
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, decision)
		assert.Contains(t, page, "reviewer")
	}
	got, err := aud.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, "pending", got.Status)
	assert.Empty(t, got.Approvals)

	resp, _ = b.get("/ui/audit")
	assert.Equal(t, http.StatusOK, resp.StatusCode, "auditors read the trail")
	resp, _ = b.get("/ui/users")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "only admins manage users")
	resp, _ = b.post("/ui/agents/"+a.AgentID+"/suspend", url.Values{"csrf": {token}})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "only admins suspend agents")
	resp, page = b.get("/ui/agents/" + a.AgentID)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.NotContains(t, page, `id="suspend-form"`, "no suspend control")
	second, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "y@example.com"}})
	require.NoError(t, err)
	assert.Equal(t, "pending", second.Status, "the agent was not suspended")
}

func TestPagesSetSecurityHeaders(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("mailer", askPolicy)
	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com"}})
	require.NoError(t, err)
	b := signIn(t, env, "admin", apptest.AdminPassword)

	for _, path := range []string{"/ui/login", "/ui/queue", "/ui/actions/" + a.ID, "/ui/agents", "/ui/agents/mailer/policy",
		"/ui/fleet", "/ui/users", "/ui/audit", "/ui/nowhere", "/static/js/queue.js"} {
		t.Run(path, func(t *testing.T) {
			resp, _ := b.get(path)
			h := resp.Header
			csp := h.Get("Content-Security-Policy")
			assert.Contains(t, csp, "frame-ancestors 'none'")
			assert.Contains(t, csp, "script-src 'self'")
			assert.Contains(t, csp, "style-src 'self'")
			assert.NotContains(t, csp, "unsafe-inline")
			assert.NotContains(t, csp, "unsafe-eval")
			assert.Equal(t, "DENY", h.Get("X-Frame-Options"))
			assert.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
		})
	}

	t.Run("pages hold no inline script or style", func(t *testing.T) {
		for _, path := range []string{"/ui/queue", "/ui/actions/" + a.ID, "/ui/fleet"} {
			_, page := b.get(path)
			for _, bad := range []string{"<script>", "style=", "onclick", "onload", "javascript:"} {
				assert.NotContains(t, page, bad, path)
			}
		}
	})

	t.Run("the session cookie is HttpOnly and SameSite", func(t *testing.T) {
		anon := newBrowser(t, env.URL)
		_, page := anon.get("/ui/login")
		resp, _ := anon.post("/ui/login", url.Values{"csrf": {csrfOf(t, page)}, "username": {"admin"}, "password": {apptest.AdminPassword}})
		var found bool
		for _, c := range resp.Cookies() {
			if c.Name == "airlock_session" {
				found = true
				assert.True(t, c.HttpOnly)
				assert.Equal(t, http.SameSiteLaxMode, c.SameSite)
			}
		}
		assert.True(t, found, "login sets the session cookie")
	})
}

func TestLogoutEndsTheSessionEverywhere(t *testing.T) {
	t.Parallel()
	one := apptest.Start(t)
	two := apptest.Start(t, apptest.Options{DatabaseURL: one.DBURL, DataDir: one.Config.DataDir})
	b, _ := userSession(t, one, "rita", "reviewer")
	session := b.session()
	onTwo := newBrowser(t, two.URL)
	u, _ := url.Parse(two.URL)
	onTwo.http.Jar.SetCookies(u, []*http.Cookie{{Name: "airlock_session", Value: session}})
	resp, _ := onTwo.get("/ui/queue")
	require.Equal(t, http.StatusOK, resp.StatusCode, "a session from instance one works on instance two")

	_, page := b.get("/ui/queue")
	resp, _ = b.post("/ui/logout", url.Values{"csrf": {csrfOf(t, page)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, "/ui/login", resp.Header.Get("Location"))

	resp, _ = onTwo.get("/ui/queue")
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode, "the session ended on instance two as well")
	assert.True(t, strings.HasPrefix(resp.Header.Get("Location"), "/ui/login"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, resp, err := dial(ctx, two.URL, http.Header{"Cookie": {"airlock_session=" + session}, "Origin": {two.URL}})
	assert.Error(t, err)
	if assert.NotNil(t, resp) {
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no new stream")
	}
}

// TestLoginIsRateLimited: the console shares the API's login limits (the
// identity service's): the 11th failure for one username is refused with
// Retry-After and a clear message, and another user still signs in.
func TestLoginIsRateLimited(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	b := newBrowser(t, env.URL)
	attempt := func(username, password string) (*http.Response, string) {
		_, form := b.get("/ui/login")
		return b.post("/ui/login", url.Values{"csrf": {csrfOf(t, form)}, "username": {username}, "password": {password}})
	}
	for i := range identity.LoginFailuresPerUser {
		resp, _ := attempt("mallory", "wrong-password-guess")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "failure %d", i+1)
	}
	resp, page := attempt("mallory", "wrong-password-guess")
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", resp.Header.Get("Retry-After"))
	assert.True(t, secs >= 1 && secs <= 60, "Retry-After %d", secs)
	assert.Contains(t, page, "Too many failed sign-ins from your address. Try again in "+strconv.Itoa(secs)+" second")

	resp, _ = attempt("admin", apptest.AdminPassword)
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode, "admin still signs in from the same address")
}

// TestLoginWhenHashingIsBusy: with every password-hashing slot taken, the
// sign-in form answers 503 with Retry-After and says to try again. Not
// parallel: it holds the process's slots.
func TestLoginWhenHashingIsBusy(t *testing.T) {
	env := apptest.Start(t)
	b := newBrowser(t, env.URL)
	var slots []*auth.PasswordSlot
	for range auth.PasswordSlots() {
		s, err := auth.AcquirePasswordSlot(context.Background())
		require.NoError(t, err)
		slots = append(slots, s)
	}
	release := func() {
		for _, s := range slots {
			s.Release()
		}
		slots = nil
	}
	t.Cleanup(release)

	_, form := b.get("/ui/login")
	resp, page := b.post("/ui/login", url.Values{"csrf": {csrfOf(t, form)}, "username": {"admin"}, "password": {apptest.AdminPassword}})
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Contains(t, page, "The server is busy right now. Try again in 1 second.")

	release()
	_, form = b.get("/ui/login")
	resp, _ = b.post("/ui/login", url.Values{"csrf": {csrfOf(t, form)}, "username": {"admin"}, "password": {apptest.AdminPassword}})
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode, "signed in once a slot is free")
}
