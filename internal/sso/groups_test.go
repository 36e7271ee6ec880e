package sso_test

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/identity"
	"github.com/airlockhq/airlock/internal/sso"
	"github.com/airlockhq/airlock/internal/sso/ssotest"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

// recorder is a GroupSync that keeps what it was told (or fails).
type recorder struct {
	mu   sync.Mutex
	got  map[string][]string
	fail error
}

func (r *recorder) SetMemberships(_ context.Context, username string, groups []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.got[username] = groups
	return nil
}

// direct is a Service over a fresh database, driven without a server: the
// provider's redirects are followed by a plain HTTP client.
func direct(t *testing.T, groups sso.GroupSync) (*ssotest.Provider, *sso.Service, *store.Store) {
	t.Helper()
	p := ssotest.Start(t)
	st := store.New(testdb.New(t), slog.New(slog.NewTextHandler(io.Discard, nil)))
	key := make([]byte, auth.KeySize)
	_, _ = rand.Read(key)
	signer, err := auth.NewSigner(key)
	require.NoError(t, err)
	svc, err := sso.New(p.Config(t), sso.Options{Identity: identity.NewService(identity.Config{Store: st, Signer: signer}),
		PublicURL: "http://127.0.0.1:1", Key: key, Groups: groups, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	return p, svc, st
}

// finish runs a console sign-in through the provider.
func finish(t *testing.T, svc *sso.Service) (sso.Result, error) {
	t.Helper()
	ctx := context.Background()
	authURL, cookie, err := svc.Begin(ctx, sso.Start{})
	require.NoError(t, err)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(authURL)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	cb, err := url.Parse(res.Header.Get("Location"))
	require.NoError(t, err)
	q := cb.Query()
	return svc.Finish(ctx, sso.Callback{Cookie: cookie, State: q.Get("state"), Code: q.Get("code"), Addr: netip.MustParseAddr("127.0.0.1")})
}

// TestGroupSyncGetsTheProviderGroups: every sign-in hands the user's
// provider groups to the GroupSync, as the ID token lists them.
func TestGroupSyncGetsTheProviderGroups(t *testing.T) {
	t.Parallel()
	rec := &recorder{got: map[string][]string{}}
	p, svc, _ := direct(t, rec)
	p.Next(ssotest.User{Subject: "sub-kim", PreferredUsername: "kim", Groups: []string{"airlock-reviewers", "payments-oncall"}})
	res, err := finish(t, svc)
	require.NoError(t, err)
	assert.Equal(t, "kim", res.User.Username)
	assert.NotEmpty(t, res.Token.Raw)
	assert.Equal(t, []string{"airlock-reviewers", "payments-oncall"}, rec.got["kim"])

	p.Next(ssotest.User{Subject: "sub-kim", PreferredUsername: "kim", Groups: []string{"airlock-reviewers"}})
	_, err = finish(t, svc)
	require.NoError(t, err)
	assert.Equal(t, []string{"airlock-reviewers"}, rec.got["kim"], "a group left at the provider is left here")
}

// TestGroupSyncFailureRefusesTheSignIn: a user whose reviewer groups could
// not be brought in line gets no session (fail closed).
func TestGroupSyncFailureRefusesTheSignIn(t *testing.T) {
	t.Parallel()
	rec := &recorder{got: map[string][]string{}, fail: errors.New("groups table is locked")}
	p, svc, st := direct(t, rec)
	p.Next(ssotest.User{Subject: "sub-lee", PreferredUsername: "lee", Groups: []string{"airlock-reviewers"}})
	res, err := finish(t, svc)
	assert.Equal(t, apperr.CodeUnavailable, apperr.CodeOf(err), "%v", err)
	assert.Empty(t, res.Token.Raw)
	n, err := st.Pool().Exec(context.Background(), `SELECT 1 FROM tokens WHERE subject = 'lee'`)
	require.NoError(t, err)
	assert.Zero(t, n.RowsAffected(), "no session was recorded")
}
