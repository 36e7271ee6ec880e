package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cli/browser"

	"github.com/airlockhq/airlock/client"
)

// ssoTimeout bounds how long `airlock login --sso` waits for the browser.
const ssoTimeout = 5 * time.Minute

// ssoLogin signs in through the server's single sign-on: the browser goes
// to the server's sign-in page, which sends it to the identity provider
// and, once the server has verified the provider's answer, back to this
// process on a random 127.0.0.1 port with a one-time code. The code and
// this run's PKCE verifier are exchanged at the server for the same
// session token a password login gives. Nothing the browser brings back is
// believed by the CLI itself: the server checked the provider's answer,
// and the code is worth a session only with the verifier, which never left
// this process.
func (c *loginCmd) ssoLogin(ctx context.Context, g *globals) (*client.LoginResponse, error) {
	api := client.New(g.url, "")
	info, err := api.SSO(ctx)
	if client.StatusOf(err) == http.StatusNotFound {
		return nil, &cliError{code: "not_found", message: "this server has no single sign-on; log in with a password", exit: exitNotFound}
	}
	if err != nil {
		return nil, err
	}
	verifier := rand.Text() + rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(verifier))
	challenge := base64.RawURLEncoding.EncodeToString(sum[:])
	state := rand.Text()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening on a loopback port for the sign-in: %w", err)
	}
	defer ln.Close()
	type answer struct {
		code string
		err  error
	}
	answers := make(chan answer, 1)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		var a answer
		switch {
		case q.Get("state") != state:
			http.Error(w, "This sign-in was not started by this airlock login.", http.StatusBadRequest)
			return // not ours: keep waiting for the real one
		case q.Get("code") == "":
			a.err = &cliError{code: "unauthorized", message: "the sign-in came back without a code", exit: exitForbidden}
		default:
			a.code = q.Get("code")
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "Signed in to Airlock: you can close this tab and go back to the terminal.")
		select {
		case answers <- a:
		default:
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	login, err := url.Parse(strings.TrimRight(g.url, "/") + info.LoginURL)
	if err != nil {
		return nil, fmt.Errorf("the server's sign-in URL: %w", err)
	}
	login.RawQuery = url.Values{
		"cli_redirect":  {"http://" + ln.Addr().String() + "/callback"},
		"cli_challenge": {challenge},
		"cli_state":     {state},
	}.Encode()
	fmt.Fprintf(g.stderr, "Sign in through %s in your browser:\n%s\n", safeText(info.Issuer), login.String())
	if !c.NoBrowser {
		browser.Stdout, browser.Stderr = g.stderr, g.stderr // stdout is for the answer
		if err := browser.OpenURL(login.String()); err != nil {
			fmt.Fprintln(g.stderr, "(could not open a browser: open the URL above yourself)")
		}
	}
	wait, cancel := context.WithTimeout(ctx, ssoTimeout)
	defer cancel()
	var a answer
	select {
	case a = <-answers:
	case <-wait.Done():
		if errors.Is(wait.Err(), context.DeadlineExceeded) {
			return nil, &cliError{code: "timeout", message: "nobody finished the sign-in in the browser in time", exit: exitForbidden}
		}
		return nil, wait.Err()
	}
	if a.err != nil {
		return nil, a.err
	}
	_, lr, err := api.SSOToken(ctx, a.code, verifier)
	if err != nil {
		return nil, err
	}
	return lr, nil
}
