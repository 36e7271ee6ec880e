package sso_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/sso"
	"github.com/airlockhq/airlock/internal/sso/ssotest"
	"github.com/airlockhq/airlock/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// setup starts a provider and a server signing in through it.
func setup(t *testing.T) (*ssotest.Provider, *apptest.Env) {
	t.Helper()
	p := ssotest.Start(t)
	env := apptest.Start(t, apptest.Options{OIDC: p.Config(t)})
	return p, env
}

// browser is an HTTP client with a cookie jar that stops at every redirect,
// so a test sees (and may tamper with) each step of the flow.
type browser struct {
	t   *testing.T
	c   *http.Client
	env *apptest.Env
}

func newBrowser(t *testing.T, env *apptest.Env) *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{t: t, env: env, c: &http.Client{Jar: jar, Transport: env.HTTP.Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// get fetches u and returns the response (body read and closed).
func (b *browser) get(u string) (*http.Response, string) {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.env.Ctx(), http.MethodGet, u, nil)
	require.NoError(b.t, err)
	res, err := b.c.Do(req)
	require.NoError(b.t, err)
	body, err := io.ReadAll(res.Body)
	require.NoError(b.t, err)
	require.NoError(b.t, res.Body.Close())
	return res, string(body)
}

// start begins a console sign-in and returns the provider's authorization
// URL.
func (b *browser) start() *url.URL {
	b.t.Helper()
	res, _ := b.get(b.env.URL + sso.LoginPath)
	require.Equal(b.t, http.StatusSeeOther, res.StatusCode)
	u, err := url.Parse(res.Header.Get("Location"))
	require.NoError(b.t, err)
	q := u.Query()
	assert.Equal(b.t, "S256", q.Get("code_challenge_method"), "PKCE")
	assert.NotEmpty(b.t, q.Get("code_challenge"))
	assert.NotEmpty(b.t, q.Get("state"))
	assert.NotEmpty(b.t, q.Get("nonce"))
	return u
}

// authorize goes through the provider's authorization endpoint and returns
// the callback URL it redirects to.
func (b *browser) authorize(authURL *url.URL) *url.URL {
	b.t.Helper()
	res, body := b.get(authURL.String())
	require.Equal(b.t, http.StatusFound, res.StatusCode, body)
	cb, err := url.Parse(res.Header.Get("Location"))
	require.NoError(b.t, err)
	require.Equal(b.t, sso.CallbackPath, cb.Path)
	return cb
}

// session is the session cookie the jar holds for the server ("" if none).
func (b *browser) session() string {
	u, _ := url.Parse(b.env.URL)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == auth.SessionCookie {
			return c.Value
		}
	}
	return ""
}

// signIn runs the whole flow and returns a client holding the session.
func (b *browser) signIn() *client.Client {
	b.t.Helper()
	res, body := b.get(b.authorize(b.start()).String())
	require.Equal(b.t, http.StatusSeeOther, res.StatusCode, body)
	require.NotEmpty(b.t, b.session())
	return b.env.Client(b.session())
}

type user struct {
	Username string   `json:"username"`
	Roles    []string `json:"roles"`
	Disabled bool     `json:"disabled"`
}

// me is the user named name as an admin lists it.
func me(t *testing.T, env *apptest.Env, name string) user {
	t.Helper()
	var list struct {
		Users []user `json:"users"`
	}
	_, err := env.Admin.Do(env.Ctx(), http.MethodGet, "/api/v1/users", nil, &list)
	require.NoError(t, err)
	for _, u := range list.Users {
		if u.Username == name {
			return u
		}
	}
	t.Fatalf("no user %q among %+v", name, list.Users)
	return user{}
}

// lastEvent is the newest audit event of kind.
func lastEvent(t *testing.T, env *apptest.Env, kind string) client.Event {
	t.Helper()
	page, err := env.Auditor("auditor-"+strings.ReplaceAll(kind, ".", "-")).Audit(env.Ctx(), url.Values{"kind": {kind}})
	require.NoError(t, err)
	require.NotEmpty(t, page.Events, "no %s event", kind)
	return page.Events[len(page.Events)-1]
}

// queue is what reading the pending queue answers (its status).
func queue(env *apptest.Env, c *client.Client) error {
	_, err := c.ListActions(env.Ctx(), url.Values{})
	return err
}

// TestSignInMapsGroupsToRolesOnEveryLogin: the first sign-in creates the
// user with the mapped roles; a group removed at the provider takes its
// role away at the next sign-in, from the sessions already open too; no
// mapped group at all refuses the sign-in.
func TestSignInMapsGroupsToRolesOnEveryLogin(t *testing.T) {
	t.Parallel()
	p, env := setup(t)
	ctx := env.Ctx()

	p.Next(ssotest.User{Subject: "sub-carol", PreferredUsername: "carol", Groups: []string{"airlock-reviewers", "unrelated"}})
	first := newBrowser(t, env).signIn()
	assert.ElementsMatch(t, []string{"auditor", "reviewer"}, me(t, env, "carol").Roles)
	require.NoError(t, queue(env, first), "a reviewer reads the queue")

	// The reviewers group is gone at the provider: auditor only, at once
	// for the first session as well.
	p.Next(ssotest.User{Subject: "sub-carol", PreferredUsername: "carol", Groups: []string{"airlock-auditors"}})
	second := newBrowser(t, env).signIn()
	assert.Equal(t, []string{"auditor"}, me(t, env, "carol").Roles)
	for _, c := range []*client.Client{first, second} {
		_, err := c.Approve(ctx, "00000000-0000-0000-0000-000000000000", "", "")
		assert.Equal(t, http.StatusForbidden, client.StatusOf(err), "no reviewer role left: %v", err)
	}
	last := lastEvent(t, env, "user.updated")
	assert.Equal(t, "carol", last.Actor)
	assert.Equal(t, []any{"auditor"}, last.Data["roles"])

	// No group maps to a role: refused, and the roles are gone.
	p.Next(ssotest.User{Subject: "sub-carol", PreferredUsername: "carol", Groups: []string{"unrelated"}})
	b := newBrowser(t, env)
	res, body := b.get(b.authorize(b.start()).String())
	assert.Equal(t, http.StatusForbidden, res.StatusCode)
	assert.Contains(t, body, "no Airlock role")
	assert.Empty(t, b.session())
	assert.Empty(t, me(t, env, "carol").Roles)
	assert.Equal(t, http.StatusForbidden, client.StatusOf(queue(env, second)), "no role left in the open session")
}

// TestSignInKeepsTheLastAdmin: the role sync never takes the admin role
// from the last active admin (the rule UpdateUser keeps): a sign-in whose
// groups no longer map to admin is refused, audited, and leaves the roles
// as they were; once another admin exists the same sign-in goes through.
func TestSignInKeepsTheLastAdmin(t *testing.T) {
	t.Parallel()
	p, env := setup(t)
	ctx := env.Ctx()
	auditor := env.Auditor("auditor-last-admin")
	grace := ssotest.User{Subject: "sub-grace", PreferredUsername: "grace", Groups: []string{"airlock-admins", "airlock-reviewers"}}
	p.Next(grace)
	g := newBrowser(t, env).signIn()
	_, err := g.Do(ctx, http.MethodDelete, "/api/v1/users/admin", nil, nil)
	require.NoError(t, err, "grace, an admin, deletes the local admin: she is the last active admin")

	lister := g // an admin
	roles := func() []string {
		var list struct {
			Users []user `json:"users"`
		}
		_, err := lister.Do(ctx, http.MethodGet, "/api/v1/users", nil, &list)
		require.NoError(t, err)
		for _, u := range list.Users {
			if u.Username == "grace" {
				return u.Roles
			}
		}
		t.Fatalf("no grace among %+v", list.Users)
		return nil
	}
	for _, groups := range [][]string{{"airlock-reviewers"}, {"unrelated"}} {
		p.Next(ssotest.User{Subject: "sub-grace", PreferredUsername: "grace", Groups: groups})
		b := newBrowser(t, env)
		res, body := b.get(b.authorize(b.start()).String())
		assert.Equal(t, http.StatusForbidden, res.StatusCode, "groups %v", groups)
		assert.Contains(t, body, "last active admin")
		assert.Empty(t, b.session())
		assert.ElementsMatch(t, []string{"admin", "auditor", "reviewer"}, roles(), "groups %v: the roles stay", groups)
		page, err := auditor.Audit(ctx, url.Values{"kind": {"auth.login_failed"}})
		require.NoError(t, err)
		require.NotEmpty(t, page.Events)
		last := page.Events[len(page.Events)-1]
		assert.Equal(t, "grace", last.Actor)
		assert.Equal(t, "last active admin", last.Data["reason"])
	}

	// Another admin: the provider's word holds again.
	require.NoError(t, g.CreateUser(ctx, "henry", "henry-is-the-next-admin", "admin"))
	lister, _, err = env.Anon.Login(ctx, "henry", "henry-is-the-next-admin")
	require.NoError(t, err)
	p.Next(ssotest.User{Subject: "sub-grace", PreferredUsername: "grace", Groups: []string{"airlock-reviewers"}})
	newBrowser(t, env).signIn()
	assert.ElementsMatch(t, []string{"auditor", "reviewer"}, roles())
}

// TestSignInRefusesBadStateAndNonce: a callback whose state is not the
// flow's, one without the flow cookie, an ID token carrying another nonce
// and a code exchanged without the flow's PKCE verifier all sign nobody in.
func TestSignInRefusesBadStateAndNonce(t *testing.T) {
	t.Parallel()
	p, env := setup(t)
	mallory := ssotest.User{Subject: "sub-mallory", PreferredUsername: "mallory", Groups: []string{"airlock-admins"}}

	t.Run("wrong state", func(t *testing.T) {
		p.Next(mallory) // one who would be signed in, were the flow not refused
		b := newBrowser(t, env)
		cb := b.authorize(b.start())
		q := cb.Query()
		q.Set("state", "forged-"+q.Get("state"))
		cb.RawQuery = q.Encode()
		res, body := b.get(cb.String())
		assert.Equal(t, http.StatusBadRequest, res.StatusCode)
		assert.Contains(t, body, "state does not match")
		assert.Empty(t, b.session())
	})
	t.Run("no flow cookie", func(t *testing.T) {
		p.Next(mallory) // one who would be signed in, were the flow not refused
		b := newBrowser(t, env)
		cb := b.authorize(b.start())
		other := newBrowser(t, env) // another browser brings the callback
		res, _ := other.get(cb.String())
		assert.Equal(t, http.StatusBadRequest, res.StatusCode)
		assert.Empty(t, other.session())
		assert.Empty(t, b.session())
	})
	t.Run("wrong nonce", func(t *testing.T) {
		p.Next(mallory) // one who would be signed in, were the flow not refused
		b := newBrowser(t, env)
		authURL := b.start()
		q := authURL.Query()
		q.Set("nonce", "someone-elses-nonce")
		authURL.RawQuery = q.Encode()
		res, body := b.get(b.authorize(authURL).String())
		assert.Equal(t, http.StatusBadRequest, res.StatusCode)
		assert.Contains(t, body, "nonce does not match")
		assert.Empty(t, b.session())
	})
	t.Run("wrong PKCE challenge", func(t *testing.T) {
		p.Next(mallory) // one who would be signed in, were the flow not refused
		b := newBrowser(t, env)
		authURL := b.start()
		q := authURL.Query()
		q.Set("code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
		authURL.RawQuery = q.Encode()
		res, _ := b.get(b.authorize(authURL).String())
		assert.Equal(t, http.StatusUnauthorized, res.StatusCode, "the provider refuses the code without the matching verifier")
		assert.Empty(t, b.session())
	})
	t.Run("replayed callback", func(t *testing.T) {
		p.Next(ssotest.User{Subject: "sub-replay", PreferredUsername: "replay", Groups: []string{"airlock-auditors"}})
		b := newBrowser(t, env)
		cb := b.authorize(b.start())
		res, _ := b.get(cb.String())
		require.Equal(t, http.StatusSeeOther, res.StatusCode)
		// The flow cookie is gone with the first callback.
		res, _ = b.get(cb.String())
		assert.Equal(t, http.StatusBadRequest, res.StatusCode)
	})
	t.Run("forged ID token claims cannot come from the callback", func(t *testing.T) {
		p.Next(mallory) // one who would be signed in, were the flow not refused
		b := newBrowser(t, env)
		cb := b.authorize(b.start())
		q := cb.Query()
		q.Set("code", "not-a-code-the-provider-issued")
		cb.RawQuery = q.Encode()
		res, _ := b.get(cb.String())
		assert.Equal(t, http.StatusUnauthorized, res.StatusCode)
		assert.Empty(t, b.session())
	})
	t.Run("nobody was signed in", func(t *testing.T) {
		var list struct {
			Users []user `json:"users"`
		}
		_, err := env.Admin.Do(env.Ctx(), http.MethodGet, "/api/v1/users", nil, &list)
		require.NoError(t, err)
		for _, u := range list.Users {
			assert.NotEqual(t, "mallory", u.Username)
		}
	})
}

// TestSignInNeverTakesAnExistingName: the provider's preferred_username of
// a local user or a reserved word gives another name; the same person
// signing in again is the same user.
func TestSignInNeverTakesAnExistingName(t *testing.T) {
	t.Parallel()
	p, env := setup(t)
	env.Reviewer("dana")

	p.Next(ssotest.User{Subject: "sub-dana", PreferredUsername: "Dana", Groups: []string{"airlock-auditors"}})
	c := newBrowser(t, env).signIn()
	assert.Equal(t, []string{"reviewer"}, me(t, env, "dana").Roles, "the local user is untouched")
	assert.Equal(t, []string{"auditor"}, me(t, env, "Dana-2").Roles)

	p.Next(ssotest.User{Subject: "sub-sys", PreferredUsername: "System", Groups: []string{"airlock-auditors"}})
	newBrowser(t, env).signIn()
	assert.Equal(t, []string{"auditor"}, me(t, env, "sso-user").Roles)

	p.Next(ssotest.User{Subject: "sub-mail", Email: "erin+ops@example.com", Groups: []string{"airlock-auditors"}})
	newBrowser(t, env).signIn()
	me(t, env, "erin-ops@example.com")

	// Dana again, renamed at the provider: still Dana-2.
	p.Next(ssotest.User{Subject: "sub-dana", PreferredUsername: "dana.renamed", Groups: []string{"airlock-auditors"}})
	again := newBrowser(t, env).signIn()
	require.NoError(t, again.Logout(env.Ctx()))
	assert.Equal(t, http.StatusUnauthorized, client.StatusOf(queue(env, again)), "logged out")
	require.NoError(t, queue(env, c), "the other session goes on")
	_, _, err := env.Anon.Login(env.Ctx(), "Dana-2", "no-password-works-here")
	assert.Equal(t, http.StatusUnauthorized, client.StatusOf(err), "an SSO user has no password")
}

// TestSignInRefusesDisabledUser: an admin's disable holds for single
// sign-on too, and is audited.
func TestSignInRefusesDisabledUser(t *testing.T) {
	t.Parallel()
	p, env := setup(t)
	ctx := env.Ctx()
	p.Next(ssotest.User{Subject: "sub-frank", PreferredUsername: "frank", Groups: []string{"airlock-admins"}})
	c := newBrowser(t, env).signIn()
	_, err := c.Do(ctx, http.MethodGet, "/api/v1/users", nil, nil)
	require.NoError(t, err, "frank is an admin")

	_, err = env.Admin.Do(ctx, http.MethodPatch, "/api/v1/users/frank", map[string]any{"disabled": true}, nil)
	require.NoError(t, err)
	_, err = c.Do(ctx, http.MethodGet, "/api/v1/users", nil, nil)
	assert.Equal(t, http.StatusUnauthorized, client.StatusOf(err), "disabling ends the SSO session")

	p.Next(ssotest.User{Subject: "sub-frank", PreferredUsername: "frank", Groups: []string{"airlock-admins"}})
	b := newBrowser(t, env)
	res, body := b.get(b.authorize(b.start()).String())
	assert.Equal(t, http.StatusUnauthorized, res.StatusCode)
	assert.Contains(t, body, "disabled")
	assert.Empty(t, b.session())
	assert.Equal(t, "disabled", lastEvent(t, env, "auth.login_failed").Data["reason"])
}

// TestSSOEndpointsWhenOff: without configuration the console offers no
// SSO and the API says not_found.
func TestSSOEndpointsWhenOff(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	_, err := env.Anon.SSO(env.Ctx())
	assert.Equal(t, http.StatusNotFound, client.StatusOf(err))
	_, _, err = env.Anon.SSOToken(env.Ctx(), "x", "y")
	assert.Equal(t, http.StatusNotFound, client.StatusOf(err))
	b := newBrowser(t, env)
	res, _ := b.get(env.URL + sso.LoginPath)
	assert.Equal(t, http.StatusNotFound, res.StatusCode)
	_, body := b.get(env.URL + "/ui/login")
	assert.False(t, strings.Contains(body, "sso-login"), "no SSO button")
}

// TestSSOTokenRefusesBadInput: the CLI's exchange answers bad input with
// the error body and the right status, and a code is good once.
func TestSSOTokenRefusesBadInput(t *testing.T) {
	t.Parallel()
	_, env := setup(t)
	ctx := env.Ctx()
	for _, tc := range []struct {
		name   string
		body   any
		status int
	}{
		{"empty", map[string]any{}, http.StatusBadRequest},
		{"no verifier", map[string]any{"code": "abc"}, http.StatusBadRequest},
		{"unknown field", map[string]any{"code": "abc", "code_verifier": "v", "user": "admin"}, http.StatusBadRequest},
		{"wrong type", map[string]any{"code": 7, "code_verifier": "v"}, http.StatusBadRequest},
		{"unknown code", map[string]any{"code": "abc", "code_verifier": "v"}, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := env.Anon.Do(ctx, http.MethodPost, "/api/v1/auth/sso/token", tc.body, nil)
			assert.Equal(t, tc.status, client.StatusOf(err), "%v", err)
		})
	}
	info, err := env.Anon.SSO(ctx)
	require.NoError(t, err)
	assert.Equal(t, sso.LoginPath, info.LoginURL)
	assert.NotEmpty(t, info.Issuer)
}

// TestFirstSignInsAtOnceMakeOneUser: the same person signing in twice at
// the same moment is one user.
func TestFirstSignInsAtOnceMakeOneUser(t *testing.T) {
	t.Parallel()
	p, env := setup(t)
	const n = 4
	urls := make([]*url.URL, n)
	browsers := make([]*browser, n)
	for i := range n {
		p.Next(ssotest.User{Subject: "sub-judy", PreferredUsername: "judy", Groups: []string{"airlock-auditors"}})
		browsers[i] = newBrowser(t, env)
		urls[i] = browsers[i].authorize(browsers[i].start())
	}
	statuses := make(chan int, n)
	for i := range n {
		go func() {
			req, _ := http.NewRequest(http.MethodGet, urls[i].String(), nil)
			res, err := browsers[i].c.Do(req)
			if err != nil {
				statuses <- 0
				return
			}
			_ = res.Body.Close()
			statuses <- res.StatusCode
		}()
	}
	for range n {
		assert.Equal(t, http.StatusSeeOther, <-statuses)
	}
	var list struct {
		Users []user `json:"users"`
	}
	_, err := env.Admin.Do(env.Ctx(), http.MethodGet, "/api/v1/users", nil, &list)
	require.NoError(t, err)
	var judys []string
	for _, u := range list.Users {
		if strings.HasPrefix(u.Username, "judy") {
			judys = append(judys, u.Username)
		}
	}
	assert.Equal(t, []string{"judy"}, judys)
}
