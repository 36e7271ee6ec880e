package web_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// closedWith reads conn until it ends and returns its close code (-1 when
// it did not end with a close frame, or not before ctx ended).
func closedWith(ctx context.Context, conn *websocket.Conn) websocket.StatusCode {
	for {
		if _, _, err := conn.Read(ctx); err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code
			}
			return -1
		}
	}
}

func patch(t *testing.T, c *client.Client, username string, body map[string]any) {
	t.Helper()
	_, err := c.Do(context.Background(), http.MethodPatch, "/api/v1/users/"+url.PathEscape(username), body, nil)
	require.NoError(t, err)
}

// TestDisabledUsersStreamsCloseOnEveryInstance: a reviewer's streams on two
// instances close (1008) as soon as an admin on one of them disables the
// reviewer, long before the next ping (20 s) would have noticed; a
// reviewer who loses the role is closed too, one whose roles change
// otherwise is sent to reconnect (1012), and a logout closes the session's
// streams at once as well.
func TestDisabledUsersStreamsCloseOnEveryInstance(t *testing.T) {
	t.Parallel()
	one := apptest.Start(t)
	two := apptest.Start(t, apptest.Options{DatabaseURL: one.DBURL, DataDir: one.Config.DataDir})
	ctx := one.Ctx()
	rita := one.Reviewer("rita")
	bob := one.Reviewer("bob")
	vera := one.User("vera", "reviewer", "auditor")
	lena := one.Reviewer("lena")

	open := func(base string, c *client.Client) *websocket.Conn {
		conn, _, err := dial(ctx, base, bearer(c.Token()))
		require.NoError(t, err)
		t.Cleanup(func() { conn.CloseNow() })
		return conn
	}
	ritaOne, ritaTwo := open(one.URL, rita), open(two.URL, rita)
	bobTwo, veraTwo, lenaTwo := open(two.URL, bob), open(two.URL, vera), open(two.URL, lena)
	// The connections are registered once they receive a change.
	agent := one.Agent("mailer", askPolicy)
	_, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"warm-up": true}})
	require.NoError(t, err)
	for _, conn := range []*websocket.Conn{ritaOne, ritaTwo, bobTwo, veraTwo, lenaTwo} {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, _, err := conn.Read(rctx)
		cancel()
		require.NoError(t, err, "every stream is live")
	}

	start := time.Now()
	patch(t, one.Admin, "rita", map[string]any{"disabled": true})
	patch(t, one.Admin, "bob", map[string]any{"roles": []string{"admin"}})
	patch(t, one.Admin, "vera", map[string]any{"roles": []string{"auditor"}})
	_, err = lena.Do(ctx, http.MethodPost, "/api/v1/auth/logout", nil, nil)
	require.NoError(t, err)
	within := func(conn *websocket.Conn) websocket.StatusCode {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second) // well before the 20 s ping
		defer cancel()
		return closedWith(rctx, conn)
	}
	assert.Equal(t, websocket.StatusPolicyViolation, within(ritaOne), "the disabled reviewer's stream on the instance that disabled her")
	assert.Equal(t, websocket.StatusPolicyViolation, within(ritaTwo), "…and on the other instance")
	assert.Equal(t, websocket.StatusPolicyViolation, within(bobTwo), "a user who is no longer a reviewer or auditor")
	assert.Equal(t, websocket.StatusServiceRestart, within(veraTwo), "a reviewer who became an auditor only reconnects")
	assert.Equal(t, websocket.StatusPolicyViolation, within(lenaTwo), "a session logged out on the other instance")
	t.Logf("streams closed %s after the first change", time.Since(start).Round(time.Millisecond))

	_, resp, err := dial(ctx, two.URL, bearer(rita.Token()))
	require.Error(t, err)
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no new stream for a disabled user")
}

// TestConsoleUserControls drives the users page's controls and the account
// page over HTTP, as a browser posts them: the same rules as the API.
func TestConsoleUserControls(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	admin := signIn(t, env, "admin", apptest.AdminPassword)
	_, page := admin.get("/ui/users")
	csrf := csrfOf(t, page)
	rita := env.Reviewer("rita")
	require.NoError(t, env.Admin.CreateAgent(ctx, "mailer", "Mailer"))

	resp, _ := admin.post("/ui/users/rita/roles", url.Values{"csrf": {csrf}, "roles": {"auditor"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	status, _ := rita.Do(ctx, http.MethodGet, "/api/v1/audit", nil, nil)
	assert.Equal(t, http.StatusOK, status, "the console's role change holds for the API session")

	resp, _ = admin.post("/ui/users/rita/disable", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	status, _ = rita.Do(ctx, http.MethodGet, "/api/v1/audit", nil, nil)
	assert.Equal(t, http.StatusUnauthorized, status, "disabled from the console: the token stops")
	_, page = admin.get("/ui/users")
	assert.Contains(t, page, "disabled")
	resp, _ = admin.post("/ui/users/rita/enable", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, _ = admin.post("/ui/users/rita/password", url.Values{"csrf": {csrf}, "password": {"reset-in-the-console"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, _, err := env.Anon.Login(ctx, "rita", "reset-in-the-console")
	require.NoError(t, err, "the reset password works")

	resp, body := admin.post("/ui/users/admin/disable", url.Values{"csrf": {csrf}})
	assert.Equal(t, http.StatusConflict, resp.StatusCode)
	assert.Contains(t, body, "last active admin")
	resp, body = admin.post("/ui/users", url.Values{"csrf": {csrf}, "username": {"Policy"}, "password": {"long-enough-password"}, "roles": {"reviewer"}})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, body, "reserved")
	resp, _ = admin.post("/ui/users", url.Values{"csrf": {csrf}, "username": {"RITA"}, "password": {"long-enough-password"}, "roles": {"reviewer"}})
	assert.Equal(t, http.StatusConflict, resp.StatusCode)

	// The token lifetime rule is the API's: 30 seconds is a lifetime.
	resp, _ = admin.post("/ui/agents/mailer/tokens", url.Values{"csrf": {csrf}, "ttl": {"30s"}})
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	resp, _ = admin.post("/ui/agents/mailer/tokens", url.Values{"csrf": {csrf}, "ttl": {"9000h"}})
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)

	// An owner named in the console is stored and shown.
	resp, _ = admin.post("/ui/agents", url.Values{"csrf": {csrf}, "id": {"ritas-bot"}, "name": {"Rita's bot"}, "owner": {"Rita"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page = admin.get("/ui/agents/ritas-bot")
	assert.Regexp(t, `Owner: <strong>rita</strong>`, page)

	// A reviewer's own account: the wrong current password is refused.
	bob, _ := userSession(t, env, "bob", "reviewer")
	resp, _ = bob.post("/ui/users/rita/disable", url.Values{"csrf": {csrf}})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	_, page = bob.get("/ui/account")
	bobCSRF := csrfOf(t, page)
	resp, body = bob.post("/ui/account/password", url.Values{"csrf": {bobCSRF}, "current_password": {"not-it-at-all"}, "password": {"bobs-new-password"}})
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Contains(t, body, "current password is wrong")
	resp, _ = bob.post("/ui/account/password", url.Values{"csrf": {bobCSRF}, "current_password": {"bob-password-123"}, "password": {"bobs-new-password"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, _ = bob.get("/ui/account")
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the session that changed it goes on")
	_, _, err = env.Anon.Login(ctx, "bob", "bobs-new-password")
	require.NoError(t, err)

	resp, _ = admin.post("/ui/users/rita/delete", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page = admin.get("/ui/users")
	assert.NotContains(t, page, `id="user-rita"`)
}

// TestBrowserUserLifecycle: an admin disables a reviewer from the users
// page and the reviewer's token stops at once; then the admin changes its
// own password from the account page the layout links to (a wrong current
// password first).
func TestBrowserUserLifecycle(t *testing.T) {
	env := apptest.Start(t)
	ctx := env.Ctx()
	rita := env.Reviewer("rita")

	c := startChrome(t)
	c.signIn(t, env, "/ui/users", "admin", apptest.AdminPassword, "#user-form")
	c.do(t,
		chromedp.Navigate(env.URL+"/ui/users"),
		chromedp.WaitVisible(chromedp.CSS("#user-rita .disable-form button")),
		chromedp.Click(chromedp.CSS("#user-rita .disable-form button")),
		chromedp.WaitVisible(chromedp.CSS(".flash.notice")),
		chromedp.WaitVisible(chromedp.CSS("#user-rita .enable-form")),
	)
	assert.Contains(t, c.text(t, "#user-rita"), "disabled")
	c.screenshot(t, "user-disabled.png")
	status, _ := rita.Do(ctx, http.MethodGet, "/api/v1/actions", nil, nil)
	assert.Equal(t, http.StatusUnauthorized, status, "disabled in the console: her token stops at once")

	c.do(t,
		chromedp.Click(chromedp.CSS("#account-link")),
		chromedp.WaitVisible(chromedp.CSS("#password-form")),
		chromedp.SendKeys(chromedp.CSS("#current-password"), "not the password"),
		chromedp.SendKeys(chromedp.CSS("#new-password"), "admins-new-password"),
		chromedp.Click(chromedp.CSS("#change-password")),
		chromedp.WaitVisible(chromedp.CSS("#page-error")),
	)
	assert.Contains(t, c.text(t, "#page-error"), "current password is wrong")
	c.do(t,
		chromedp.SendKeys(chromedp.CSS("#current-password"), apptest.AdminPassword),
		chromedp.SendKeys(chromedp.CSS("#new-password"), "admins-new-password"),
		chromedp.Click(chromedp.CSS("#change-password")),
		chromedp.WaitVisible(chromedp.CSS(".flash.notice")),
	)
	assert.True(t, strings.Contains(c.text(t, ".flash.notice"), "Password changed"))
	c.screenshot(t, "account.png")
	_, _, err := env.Anon.Login(ctx, "admin", apptest.AdminPassword)
	assert.Equal(t, http.StatusUnauthorized, client.StatusOf(err), "the old password is gone")
	_, _, err = env.Anon.Login(ctx, "admin", "admins-new-password")
	require.NoError(t, err)
}

// tokenID is the id (jti) of a raw token, read from its claims.
func tokenID(t *testing.T, raw string) string {
	t.Helper()
	parts := strings.Split(raw, ".")
	require.Len(t, parts, 3, "a JWT")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var claims struct {
		ID string `json:"jti"`
	}
	require.NoError(t, json.Unmarshal(payload, &claims))
	require.NotEmpty(t, claims.ID)
	return claims.ID
}

// TestRevokedTokenClosesItsStreams: DELETE /api/v1/tokens/{id} closes
// (1008) every stream opened with that token, on both instances, long
// before the next ping (20 s) would have noticed: one with the session as a
// bearer token and one with a browser's session cookie. A stream of the
// same user opened with another token goes on.
func TestRevokedTokenClosesItsStreams(t *testing.T) {
	t.Parallel()
	one := apptest.Start(t)
	two := apptest.Start(t, apptest.Options{DatabaseURL: one.DBURL, DataDir: one.Config.DataDir})
	ctx := one.Ctx()
	rita := one.Reviewer("rita")
	other, _, err := one.Anon.Login(ctx, "rita", "rita-password-123")
	require.NoError(t, err)
	browser := signIn(t, two, "rita", "rita-password-123")

	open := func(base string, hdr http.Header) *websocket.Conn {
		conn, _, err := dial(ctx, base, hdr)
		require.NoError(t, err)
		t.Cleanup(func() { conn.CloseNow() })
		return conn
	}
	bearerOne, bearerTwo := open(one.URL, bearer(rita.Token())), open(two.URL, bearer(rita.Token()))
	cookieTwo := open(two.URL, http.Header{"Cookie": {"airlock_session=" + browser.session()}, "Origin": {two.URL}})
	otherTwo := open(two.URL, bearer(other.Token()))
	all := []*websocket.Conn{bearerOne, bearerTwo, cookieTwo, otherTwo}
	// The connections are registered once they receive a change.
	agent := one.Agent("mailer", askPolicy)
	_, err = agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"warm-up": true}})
	require.NoError(t, err)
	for _, conn := range all {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, _, err := conn.Read(rctx)
		cancel()
		require.NoError(t, err, "every stream is live")
	}

	require.NoError(t, one.Admin.RevokeToken(ctx, tokenID(t, rita.Token())))
	require.NoError(t, one.Admin.RevokeToken(ctx, tokenID(t, browser.session())))
	within := func(conn *websocket.Conn) websocket.StatusCode {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second) // well before the 20 s ping
		defer cancel()
		return closedWith(rctx, conn)
	}
	assert.Equal(t, websocket.StatusPolicyViolation, within(bearerOne), "the revoked token's stream on the instance that revoked it")
	assert.Equal(t, websocket.StatusPolicyViolation, within(bearerTwo), "…and on the other instance")
	assert.Equal(t, websocket.StatusPolicyViolation, within(cookieTwo), "a revoked browser session's stream")

	_, err = agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"after": true}})
	require.NoError(t, err)
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		_, data, err := otherTwo.Read(rctx)
		require.NoError(t, err, "the stream of rita's other session goes on")
		if strings.Contains(string(data), `"after":true`) {
			break
		}
	}

	_, resp, err := dial(ctx, two.URL, bearer(rita.Token()))
	require.Error(t, err)
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no new stream with a revoked token")
}
