package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/airlockhq/airlock/client"
)

// globals is what every command's Run gets: the global flags, the standard
// streams and how to reach the server.
type globals struct {
	url    string
	output string
	stdin  *os.File
	stdout io.Writer
	stderr io.Writer
	parser *kong.Kong
}

// json reports whether answers are printed as JSON.
func (g *globals) json() bool { return g.output == "json" }

// client returns a client of the server holding AIRLOCK_TOKEN, else the
// token `airlock login` kept.
func (g *globals) client() (*client.Client, error) {
	tok, err := resolveToken()
	if err != nil {
		return nil, err
	}
	return client.New(g.url, tok), nil
}

// resolveToken returns AIRLOCK_TOKEN, else the kept token.
func resolveToken() (string, error) {
	if t := strings.TrimSpace(os.Getenv("AIRLOCK_TOKEN")); t != "" {
		return t, nil
	}
	path, err := tokenPath()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", &cliError{code: "unauthorized", message: "no token: set AIRLOCK_TOKEN or run `airlock login`", exit: exitForbidden}
	}
	if err != nil {
		return "", fmt.Errorf("reading the kept token: %w", err)
	}
	if t := strings.TrimSpace(string(b)); t != "" {
		return t, nil
	}
	return "", &cliError{code: "unauthorized", message: "the kept token " + path + " is empty: run `airlock login`", exit: exitForbidden}
}

// tokenPath is where `airlock login` keeps the session token:
// os.UserConfigDir()/airlock/token.
func tokenPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("finding the user's config directory: %w", err)
	}
	return filepath.Join(dir, "airlock", "token"), nil
}

// keepToken writes the token to tokenPath, readable by the user alone
// (mode 0600, in a 0700 directory), replacing the file whole.
func keepToken(token string) (string, error) {
	path, err := tokenPath()
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".token-*")
	if err != nil {
		return "", fmt.Errorf("keeping the token: %w", err)
	}
	defer os.Remove(f.Name()) // after a successful rename there is nothing left to remove
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return "", fmt.Errorf("keeping the token: %w", err)
	}
	if _, err := f.WriteString(token + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("keeping the token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("keeping the token: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return "", fmt.Errorf("keeping the token: %w", err)
	}
	return path, nil
}
