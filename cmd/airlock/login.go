package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/airlockhq/airlock/client"
)

type loginCmd struct {
	Username  string `short:"u" env:"AIRLOCK_USERNAME" help:"Who logs in (AIRLOCK_USERNAME); asked on the terminal when absent."`
	SSO       bool   `name:"sso" help:"Sign in through the server's single sign-on (OpenID Connect) in a browser instead of a password."`
	NoBrowser bool   `name:"no-browser" help:"With --sso: print the sign-in URL without opening a browser."`
}

// Run asks for the password (on a terminal without echo, else one line of
// stdin), logs in and keeps the session token; with --sso it signs in
// through the browser instead.
func (c *loginCmd) Run(ctx context.Context, g *globals) error {
	if c.SSO {
		lr, err := c.ssoLogin(ctx, g)
		if err != nil {
			return err
		}
		return keepLogin(g, lr)
	}
	if c.NoBrowser {
		return usageError("--no-browser goes with --sso")
	}
	tty := term.IsTerminal(int(g.stdin.Fd()))
	in := bufio.NewReader(g.stdin)
	user := strings.TrimSpace(c.Username)
	if user == "" {
		if !tty {
			return usageError("--username is needed when stdin is not a terminal")
		}
		fmt.Fprint(g.stderr, "Username: ")
		line, err := readLine(in)
		if err != nil {
			return err
		}
		user = strings.TrimSpace(line)
	}
	var password string
	if tty {
		fmt.Fprint(g.stderr, "Password: ")
		b, err := term.ReadPassword(int(g.stdin.Fd()))
		fmt.Fprintln(g.stderr)
		if err != nil {
			return fmt.Errorf("reading the password: %w", err)
		}
		password = string(b)
	} else {
		line, err := readLine(in)
		if err != nil {
			return err
		}
		password = line
	}
	if password == "" {
		return usageError("no password given")
	}
	_, lr, err := client.New(g.url, "").Login(ctx, user, password)
	if err != nil {
		return err
	}
	return keepLogin(g, lr)
}

// keepLogin keeps a login's session token and says who is logged in.
func keepLogin(g *globals, lr *client.LoginResponse) error {
	path, err := keepToken(lr.Token)
	if err != nil {
		return err
	}
	if g.json() {
		return printJSON(g.stdout, map[string]any{"user": lr.User, "expires_at": lr.ExpiresAt, "token_file": path})
	}
	fmt.Fprintf(g.stdout, "logged in as %s (%s) until %s; token kept in %s\n",
		safeText(lr.User.Username), strings.Join(lr.User.Roles, ", "), when(lr.ExpiresAt), path)
	return nil
}

// readLine reads one line without its line ending.
func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		if errors.Is(err, io.EOF) {
			return "", usageError("nothing to read on stdin")
		}
		return "", fmt.Errorf("reading stdin: %w", err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

type logoutCmd struct{}

// Run revokes the kept session token and removes it.
func (c *logoutCmd) Run(ctx context.Context, g *globals) error {
	path, err := tokenPath()
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &cliError{code: "not_found", message: "no kept token at " + path, exit: exitNotFound}
	}
	if err != nil {
		return fmt.Errorf("reading the kept token: %w", err)
	}
	// Revoke first; an already revoked or expired token is gone anyway.
	if err := client.New(g.url, strings.TrimSpace(string(b))).Logout(ctx); err != nil && client.StatusOf(err) != 401 {
		return err
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("removing the kept token: %w", err)
	}
	fmt.Fprintln(g.stderr, "logged out")
	return nil
}
