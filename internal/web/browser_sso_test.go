package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/sso/ssotest"
)

// TestBrowserSignsInWithSSO: chromium clicks "Sign in with SSO" on the
// login page, goes through the real provider on 127.0.0.1 (authorization
// endpoint, code exchange with PKCE, ID token verified against its JWKS)
// and lands on the queue as the mapped roles allow; it signs out, and the
// session is over. Signing in again after the provider dropped the
// reviewers group, the user is an auditor only: the page no longer offers
// what a reviewer does.
func TestBrowserSignsInWithSSO(t *testing.T) {
	t.Parallel()
	p := ssotest.Start(t)
	env := apptest.Start(t, apptest.Options{OIDC: p.Config(t)})
	c := startChrome(t)
	// A reviewer group of the provider's group's name: every sign-in
	// makes grace a member of exactly the groups the provider lists.
	_, err := env.Admin.Do(t.Context(), http.MethodPost, "/api/v1/groups", map[string]any{"name": "airlock-reviewers", "members": []string{}}, nil)
	require.NoError(t, err)
	members := func() []string {
		var g struct {
			Members []string `json:"members"`
		}
		_, err := env.Admin.Do(t.Context(), http.MethodGet, "/api/v1/groups/airlock-reviewers", nil, &g)
		require.NoError(t, err)
		return g.Members
	}

	p.Next(ssotest.User{Subject: "sub-grace", PreferredUsername: "grace", Email: "grace@example.com",
		Groups: []string{"airlock-reviewers", "airlock-admins"}})
	c.do(t,
		chromedp.Navigate(env.URL+"/ui/queue"),
		chromedp.WaitVisible(chromedp.CSS("#sso-login")),
	)
	assert.Equal(t, "Sign in with SSO", c.text(t, "#sso-login"))
	c.screenshot(t, "sso-login.png")
	c.do(t,
		chromedp.Click(chromedp.CSS("#sso-login")),
		chromedp.WaitVisible(chromedp.CSS("#queue")),
	)
	assert.True(t, strings.HasSuffix(run(t, c, chromedp.Location()), "/ui/queue"), "back on the page asked for")
	assert.Equal(t, "grace", c.text(t, "#account-link"))
	roles := c.text(t, ".who .roles")
	for _, r := range []string{"admin", "reviewer", "auditor"} {
		assert.Contains(t, roles, r)
	}
	assert.Equal(t, 1, run(t, c, chromedp.Evaluate[int](`document.querySelectorAll('a[href="/ui/users"]').length`)), "an admin sees Users")
	c.screenshot(t, "sso-signed-in.png")
	assert.Equal(t, []string{"grace"}, members(), "the provider's group made her a member of the reviewer group")

	// Sign out: back at the login page, and the session no longer opens
	// the queue.
	c.do(t,
		chromedp.Click(chromedp.CSS(`form[action="/ui/logout"] button`)),
		chromedp.WaitVisible(chromedp.CSS("#sso-login")),
		chromedp.Navigate(env.URL+"/ui/queue"),
		chromedp.WaitVisible(chromedp.CSS("#sso-login")),
	)
	assert.Contains(t, run(t, c, chromedp.Location()), "/ui/login")

	// The provider dropped grace from the reviewers and admins: the next
	// sign-in makes her an auditor only.
	p.Next(ssotest.User{Subject: "sub-grace", PreferredUsername: "grace", Groups: []string{"airlock-auditors"}})
	c.do(t,
		chromedp.Click(chromedp.CSS("#sso-login")),
		chromedp.WaitVisible(chromedp.CSS("#queue")),
	)
	c.within(t, 10*time.Second, chromedp.WaitVisible(chromedp.CSS("#account-link")))
	assert.Equal(t, "auditor", c.text(t, ".who .roles"))
	assert.Equal(t, 0, run(t, c, chromedp.Evaluate[int](`document.querySelectorAll('a[href="/ui/users"]').length`)), "no Users page any more")
	status := run(t, c, chromedp.Evaluate[int](`fetch("/ui/users").then(r => r.status)`, chromedp.EvalAwaitPromise))
	assert.Equal(t, http.StatusForbidden, status, "the admin role is gone")
	assert.Empty(t, members(), "and the reviewer group membership with it")

	// Without a mapped group the provider's sign-in is refused, on the
	// login page, with the reason.
	c.do(t, chromedp.Click(chromedp.CSS(`form[action="/ui/logout"] button`)), chromedp.WaitVisible(chromedp.CSS("#sso-login")))
	p.Next(ssotest.User{Subject: "sub-grace", PreferredUsername: "grace", Groups: []string{"somewhere-else"}})
	c.do(t,
		chromedp.Click(chromedp.CSS("#sso-login")),
		chromedp.WaitVisible(chromedp.CSS("#login-error")),
	)
	require.Contains(t, c.text(t, "#login-error"), "no Airlock role")
}
