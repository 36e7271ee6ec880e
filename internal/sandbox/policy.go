package sandbox

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Validator checks the arguments (argv[1:]) of one allowed program. It
// returns nil or a *Refusal; c confines paths to the workspace.
type Validator func(c *Checker, args []string) error

// Policy says which commands an exec request may run and how.
type Policy struct {
	// Commands maps each allowed program name to the validator of its
	// arguments. A program without a validator is not allowed.
	Commands map[string]Validator
	// AllowShell accepts "sh -c SCRIPT"; every simple command of the script
	// is then checked against Commands.
	AllowShell bool
	// AllowNetwork accepts requests with Network set.
	AllowNetwork bool
	// MaxTimeout bounds ExecRequest.Timeout; zero means no bound here.
	MaxTimeout time.Duration
	// GitDirs are host directories outside the workspace where a
	// repository's git directory may live (a linked worktree's main
	// repository). Elsewhere, git is refused for a workspace whose .git
	// points out of it: its config could not be checked.
	GitDirs []string
	// Env lists environment variable names a request may set beyond the
	// built-in safe set (locale, TZ, git identity). Names on the hard deny
	// list (credentials, LD_*, proxies, agent sockets, program-controlling
	// variables) stay refused whatever this says.
	Env []string
}

// DefaultCommands are the programs DefaultPolicy allows.
var DefaultCommands = []string{
	"cat", "cp", "diff", "find", "git", "grep", "head", "ls", "printenv", "pwd",
	"rg", "sed", "sort", "tail", "wc", "which",
}

// DefaultPolicy returns the default allowlist (DefaultCommands with their
// safe flags), no shell, no network and a one-hour timeout bound.
func DefaultPolicy() Policy {
	p := Policy{Commands: map[string]Validator{}, MaxTimeout: time.Hour}
	for _, name := range DefaultCommands {
		p.Commands[name] = catalog[name]
	}
	return p
}

// Catalog returns the names of every program with a built-in validator:
// the default ones and those a configuration may add with Enable (for
// example awk, tar, echo, mkdir, cp).
func Catalog() []string {
	return slices.Sorted(maps.Keys(catalog))
}

// Enable adds programs from the catalog to the allowlist. It fails on a name
// without a built-in validator and on programs that are never allowed
// (shells, env, xargs and other wrappers; the shell is AllowShell).
func (p *Policy) Enable(names ...string) error {
	for _, name := range names {
		if reason, never := neverAllowed[name]; never {
			return fmt.Errorf("sandbox: %s can never be allowed (%s)", name, reason)
		}
		v := catalog[name]
		if v == nil {
			return fmt.Errorf("sandbox: no validator for %q (known: %v)", name, Catalog())
		}
		if p.Commands == nil {
			p.Commands = map[string]Validator{}
		}
		p.Commands[name] = v
	}
	return nil
}

// Clone returns a copy of p whose maps and slices can be changed freely.
func (p Policy) Clone() Policy {
	p.Commands = maps.Clone(p.Commands)
	p.Env = slices.Clone(p.Env)
	p.GitDirs = slices.Clone(p.GitDirs)
	return p
}

// neverAllowed are programs no policy can allow, with the reason: they run
// other programs (wrappers, shells, interpreters) or leave the sandbox's
// rules by design. sh is handled by AllowShell, never as a command inside a
// script.
var neverAllowed = map[string]string{
	"env":      "runs another program",
	"xargs":    "runs another program",
	"nohup":    "runs another program",
	"timeout":  "runs another program",
	"nice":     "runs another program",
	"ionice":   "runs another program",
	"setsid":   "runs another program",
	"stdbuf":   "runs another program",
	"chroot":   "runs another program",
	"unshare":  "runs another program",
	"nsenter":  "runs another program",
	"flock":    "runs another program",
	"watch":    "runs another program",
	"busybox":  "runs another program",
	"sudo":     "changes privileges",
	"su":       "changes privileges",
	"doas":     "changes privileges",
	"pkexec":   "changes privileges",
	"sh":       "a shell; see Policy.AllowShell",
	"bash":     "a shell",
	"dash":     "a shell",
	"zsh":      "a shell",
	"ksh":      "a shell",
	"fish":     "a shell",
	"csh":      "a shell",
	"tcsh":     "a shell",
	"python":   "an interpreter",
	"python3":  "an interpreter",
	"perl":     "an interpreter",
	"ruby":     "an interpreter",
	"node":     "an interpreter",
	"exec":     "a shell builtin that replaces the shell",
	"eval":     "a shell builtin that runs a string",
	"source":   "a shell builtin that runs a file",
	".":        "a shell builtin that runs a file",
	"command":  "a shell builtin that runs another program",
	"builtin":  "a shell builtin that runs another builtin",
	"trap":     "a shell builtin that runs a string later",
	"alias":    "a shell builtin",
	"unalias":  "a shell builtin",
	"set":      "a shell builtin",
	"unset":    "a shell builtin",
	"export":   "a shell builtin",
	"readonly": "a shell builtin",
	"local":    "a shell builtin",
	"cd":       "a shell builtin; use the request's Dir or git -C",
	"ulimit":   "a shell builtin",
	"umask":    "a shell builtin",
	"kill":     "signals processes",
	"wait":     "a shell builtin",
	"read":     "a shell builtin",
	"getopts":  "a shell builtin",
	"shift":    "a shell builtin",
	"hash":     "a shell builtin",
	"type":     "a shell builtin",
	"fc":       "a shell builtin that runs commands",
	"jobs":     "a shell builtin",
	"fg":       "a shell builtin",
	"bg":       "a shell builtin",
}
