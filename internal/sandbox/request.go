package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// ExecRequest is one exec action: a command line to run in a workspace.
type ExecRequest struct {
	// Argv is the program and its arguments. Never a shell line: a shell
	// runs only as Argv = ["sh", "-c", SCRIPT] when the policy allows sh.
	Argv []string
	// Workspace is the absolute host path of the workspace root.
	Workspace string
	// Dir is the optional working directory, relative to the workspace.
	Dir string
	// Timeout bounds the run's wall time; zero means the runner's default.
	Timeout time.Duration
	// Network shares the host's network with the sandbox.
	Network bool
	// Env holds extra environment variables for the command; only the
	// names the policy allows pass (see EnvAllowed).
	Env map[string]string
}

// Refusal is a request the validators refuse. Reason is safe to show the
// client: it names the offending flag, path or construct as the client wrote
// it and never a host path.
type Refusal struct {
	Reason string
}

// Error returns the reason.
func (r *Refusal) Error() string { return r.Reason }

// refuse builds a *Refusal from a format.
func refuse(format string, a ...any) *Refusal {
	return &Refusal{Reason: fmt.Sprintf(format, a...)}
}

// AsRefusal reports whether err is (or wraps) a *Refusal and returns it.
func AsRefusal(err error) (*Refusal, bool) {
	var r *Refusal
	if errors.As(err, &r) {
		return r, true
	}
	return nil, false
}

// Limits on the size of a request, so a validator never walks an unbounded
// input.
const (
	maxArgs      = 4096
	maxArgBytes  = 128 << 10
	maxArgvBytes = 512 << 10
)

// Validate decides whether req may run under pol. It returns nil or a
// *Refusal. It does no I/O beyond resolving paths inside the workspace (and
// reading the git configuration of a repository a git command would use).
//
// With an empty Workspace (a server that does not have the worker's files)
// paths are checked lexically only: "..", absolute paths and everything
// that does not depend on the files are refused as usual, while symlinks,
// hard links, glob matches, sed script files and repository configs are
// left to the worker, which must validate again with the workspace before
// it runs the request (RunOptions.Policy does that).
func Validate(req ExecRequest, pol Policy) error {
	return validate(req, pol, nil)
}

func validate(req ExecRequest, pol Policy, seen func(raw, p string, write bool)) error {
	c, err := newChecker(req.Workspace, req.Dir)
	if err != nil {
		return err
	}
	c.seen = seen
	for _, d := range pol.GitDirs {
		if real, err := filepath.EvalSymlinks(d); err == nil {
			c.gitDirs = append(c.gitDirs, real)
		}
	}
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return refuse("empty command")
	}
	if len(req.Argv) > maxArgs {
		return refuse("too many arguments (%d, at most %d)", len(req.Argv), maxArgs)
	}
	total := 0
	for _, a := range req.Argv {
		if len(a) > maxArgBytes {
			return refuse("argument too long (%d bytes, at most %d)", len(a), maxArgBytes)
		}
		if strings.IndexByte(a, 0) >= 0 {
			return refuse("arguments must not contain NUL bytes")
		}
		total += len(a)
	}
	if total > maxArgvBytes {
		return refuse("command line too long (%d bytes, at most %d)", total, maxArgvBytes)
	}
	if req.Timeout < 0 {
		return refuse("timeout must not be negative")
	}
	if pol.MaxTimeout > 0 && req.Timeout > pol.MaxTimeout {
		return refuse("timeout %s is above the limit of %s", req.Timeout, pol.MaxTimeout)
	}
	if req.Network && !pol.AllowNetwork {
		return refuse("network access is not allowed")
	}
	for name, value := range req.Env {
		if reason := envRefusal(name, value, pol.Env); reason != "" {
			return refuse("env: %s", reason)
		}
	}
	if req.Argv[0] == "sh" {
		if !pol.AllowShell {
			return refuse("sh is not allowed")
		}
		if len(req.Argv) != 3 || req.Argv[1] != "-c" {
			return refuse("sh: only the form sh -c SCRIPT is allowed")
		}
		return checkScript(c, &pol, req.Argv[2])
	}
	return checkCommand(c, &pol, req.Argv)
}

// checkCommand checks one simple command (argv of literal words) against
// the policy.
func checkCommand(c *Checker, pol *Policy, argv []string) error {
	name := argv[0]
	if name == "" {
		return refuse("empty command")
	}
	if strings.ContainsRune(name, '/') {
		return refuse("command must be a program name, not a path: %s", quote(name))
	}
	if name == "sh" {
		return refuse("sh: a script must not start another shell")
	}
	if reason, never := neverAllowed[name]; never {
		return refuse("%s is not allowed (%s)", quote(name), reason)
	}
	v := pol.Commands[name]
	if v == nil {
		return refuse("command not allowed: %s", quote(name))
	}
	cc := c.forCommand(name)
	if err := v(cc, argv[1:]); err != nil {
		if _, ok := AsRefusal(err); ok {
			return err
		}
		return refuse("%s: %v", name, err)
	}
	return nil
}

// quote renders client input for a refusal reason: printable, bounded.
func quote(s string) string {
	const max = 120
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	safe := true
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '"' || r == '\\' {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return fmt.Sprintf("%q", s)
}
