package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/sso/ssotest"
)

// ssoLogin runs `airlock login --sso --no-browser` and plays the browser:
// it opens the URL the CLI prints, which goes through the server and the
// real provider on 127.0.0.1 and ends at the CLI's loopback port. It
// returns how the CLI ended and the final page's status.
func ssoLogin(t *testing.T, r *runner, tamper func(*url.URL)) (result, int) {
	t.Helper()
	cmd := r.command("", "login", "--sso", "--no-browser")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stderr = pw
	require.NoError(t, cmd.Start())
	require.NoError(t, pw.Close())

	var stderr strings.Builder
	lines := bufio.NewScanner(pr)
	var login string
	for lines.Scan() {
		stderr.WriteString(lines.Text() + "\n")
		if strings.HasPrefix(lines.Text(), "http://") {
			login = lines.Text()
			break
		}
	}
	require.NotEmpty(t, login, "the CLI printed no sign-in URL: %s", stderr.String())
	u, err := url.Parse(login)
	require.NoError(t, err)
	if tamper != nil {
		tamper(u)
	}
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	res, err := (&http.Client{Jar: jar}).Get(u.String())
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	require.NoError(t, res.Body.Close())
	status := res.StatusCode

	rest, _ := io.ReadAll(pr)
	stderr.Write(rest)
	code := 0
	if err := cmd.Wait(); err != nil {
		code = cmd.ProcessState.ExitCode()
	}
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}, status
}

// TestLoginSSO: `airlock login --sso` signs in through the provider by a
// loopback redirect and keeps the same kind of session token as a password
// login, with the mapped roles; the token works for later commands.
func TestLoginSSO(t *testing.T) {
	t.Parallel()
	p := ssotest.Start(t)
	env := apptest.Start(t, apptest.Options{OIDC: p.Config(t)})
	r := newRunner(t, env.URL, "")

	p.Next(ssotest.User{Subject: "sub-heidi", PreferredUsername: "heidi", Groups: []string{"airlock-reviewers"}})
	res, status := ssoLogin(t, r, nil)
	require.Equal(t, 0, res.code, "%+v", res)
	assert.Equal(t, http.StatusOK, status, "the browser ends on the CLI's page")
	assert.Contains(t, res.stdout, "logged in as heidi (auditor, reviewer)")

	kept, err := os.ReadFile(filepath.Join(r.home, ".config", "airlock", "token"))
	require.NoError(t, err)
	tok := strings.TrimSpace(string(kept))
	// The kept token is a server session: it works, with the roles.
	_, err = env.Client(tok).ListActions(env.Ctx(), url.Values{})
	require.NoError(t, err)
	out := r.run("", "actions", "list", "--output", "json")
	require.Equal(t, 0, out.code, "%+v", out)

	// Logging out revokes it on the server.
	out = r.run("", "logout")
	require.Equal(t, 0, out.code, "%+v", out)
	_, err = env.Client(tok).ListActions(env.Ctx(), url.Values{})
	assert.Equal(t, http.StatusUnauthorized, client.StatusOf(err))
}

// TestLoginSSORefusesTamperedSignIn: a challenge other than the CLI's (as
// if someone else had started the sign-in) gets a code the CLI's verifier
// cannot redeem; a loopback address that is not loopback is refused by the
// server before the provider is asked.
func TestLoginSSORefusesTamperedSignIn(t *testing.T) {
	t.Parallel()
	p := ssotest.Start(t)
	env := apptest.Start(t, apptest.Options{OIDC: p.Config(t)})

	t.Run("another challenge", func(t *testing.T) {
		r := newRunner(t, env.URL, "")
		p.Next(ssotest.User{Subject: "sub-ivan", PreferredUsername: "ivan", Groups: []string{"airlock-admins"}})
		res, status := ssoLogin(t, r, func(u *url.URL) {
			q := u.Query()
			q.Set("cli_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
			u.RawQuery = q.Encode()
		})
		assert.Equal(t, http.StatusOK, status)
		assert.Equal(t, exitForbidden, res.code, "%+v", res)
		assert.Contains(t, res.stderr, "code verifier does not match")
		_, err := os.Stat(filepath.Join(r.home, ".config", "airlock", "token"))
		assert.ErrorIs(t, err, os.ErrNotExist, "no token kept")
	})
	t.Run("not a loopback redirect", func(t *testing.T) {
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		q := url.Values{"cli_redirect": {"http://attacker.example:8080/callback"},
			"cli_challenge": {"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"}, "cli_state": {"x"}}
		res, err := (&http.Client{Jar: jar}).Get(env.URL + "/ui/sso/login?" + q.Encode())
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		assert.Equal(t, http.StatusBadRequest, res.StatusCode)
	})
}

// TestLoginSSOWithoutSSO: a server without single sign-on says so.
func TestLoginSSOWithoutSSO(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	res := newRunner(t, env.URL, "").run("", "login", "--sso", "--no-browser")
	assert.Equal(t, exitNotFound, res.code, "%+v", res)
	assert.Contains(t, res.stderr, "no single sign-on")
}
