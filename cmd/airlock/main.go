// Command airlock is Airlock's command line, for people and scripts: log in,
// register agents and issue their tokens, read and apply policies, list,
// wait for, approve and deny actions, revoke grants, verify and export the
// audit trail, and run as a coding agent's permission hook
// (`airlock hook claude-code`, `airlock hook codex`).
//
// It talks to the server's HTTP API through the Go client (package client):
// AIRLOCK_URL (default http://127.0.0.1:8080) and AIRLOCK_TOKEN, else the
// token `airlock login` kept under the user's config directory. Every
// command has --help; `airlock completion bash|zsh` prints a completion
// script. Errors are one line on stderr, `airlock: <code>: <message>`, and
// the exit code says what kind (see exitCodes and the README).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"
)

// cli is the command tree.
type cli struct {
	URL    string `name:"url" env:"AIRLOCK_URL" default:"http://127.0.0.1:8080" help:"The Airlock server."`
	Output string `name:"output" enum:"table,json" default:"table" help:"How to print answers: table or json."`

	Login      loginCmd      `cmd:"" help:"Log in as a user and keep the session token under the user's config directory."`
	Logout     logoutCmd     `cmd:"" help:"End the kept session and remove its token."`
	Agents     agentsCmd     `cmd:"" help:"Register, list, suspend and resume agents."`
	Tokens     tokensCmd     `cmd:"" help:"Issue and revoke agent tokens."`
	Policy     policyCmd     `cmd:"" help:"Read, compare and apply policies."`
	Actions    actionsCmd    `cmd:"" help:"List, wait for, approve and deny actions."`
	Grants     grantsCmd     `cmd:"" help:"List and revoke conversation grants."`
	Fleet      fleetCmd      `cmd:"" help:"Fleet-wide switches: plan mode and the emergency stop."`
	Audit      auditCmd      `cmd:"" help:"Query, verify and export the audit trail."`
	Hook       hookCmd       `cmd:"" help:"Permission hooks for coding agents (fail closed)."`
	Mcp        mcpCmd        `cmd:"" name:"mcp" help:"MCP connectors: the server registry, the stdio proxy, the permission-prompt server."`
	Completion completionCmd `cmd:"" help:"Print a shell completion script (bash or zsh)."`
	Version    versionCmd    `cmd:"" help:"Print the version of this binary."`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs one command line and returns the exit code.
func run(ctx context.Context, args []string, stdin *os.File, stdout, stderr io.Writer) (code int) {
	hook := hookKind(args)
	if hook != "" {
		// A hook fails closed on everything, a panic included.
		defer func() {
			if p := recover(); p != nil {
				code = failClosed(hook, nil, stdout, stderr, fmt.Errorf("internal error: %v", p))
			}
		}()
	}
	var root cli
	exited := -1
	parser, err := kong.New(&root,
		kong.Name("airlock"),
		kong.Description("Airlock's command line: AIRLOCK_URL and AIRLOCK_TOKEN (or the token `airlock login` keeps) say which server and who."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(c int) { exited = c; panic(exitSignal{}) }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
		kong.BindTo(ctx, (*context.Context)(nil)),
		kong.Vars(maxResultBytesVar),
	)
	if err != nil {
		return report(stderr, usageError("%s", err.Error()))
	}
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr, parser: parser}
	if len(args) > 0 && args[0] == completeWord {
		// The completion scripts ask for the candidates after the words
		// typed so far, which need not parse yet.
		for _, s := range candidates(parser.Model.Node, args[1:]) {
			fmt.Fprintln(stdout, s)
		}
		return 0
	}
	kctx, err := parse(parser, args, &exited)
	if exited >= 0 { // --help
		return exited
	}
	if err != nil {
		if hook != "" {
			return failClosed(hook, stdin, stdout, stderr, usageError("%s", err.Error()))
		}
		return report(stderr, usageError("%s", err.Error()))
	}
	g.url, g.output = root.URL, root.Output
	if err := kctx.Run(g); err != nil {
		if hook != "" {
			return failClosed(hook, nil, stdout, stderr, err)
		}
		return report(stderr, err)
	}
	return 0
}

// exitSignal unwinds kong's Exit (after --help) back into run.
type exitSignal struct{}

// parse parses args, catching kong's exit after printing help.
func parse(parser *kong.Kong, args []string, exited *int) (kctx *kong.Context, err error) {
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(exitSignal); !ok {
				panic(p)
			}
			err = nil
		}
	}()
	kctx, err = parser.Parse(args)
	if *exited >= 0 {
		return nil, nil
	}
	return kctx, err
}

// hookKind returns "claude-code" or "codex" when args run a hook.
func hookKind(args []string) string {
	var words []string
	for _, a := range args {
		if len(a) > 0 && a[0] != '-' {
			words = append(words, a)
		}
	}
	for i := 0; i+1 < len(words); i++ {
		if words[i] == "hook" && (words[i+1] == "claude-code" || words[i+1] == "codex") {
			return words[i+1]
		}
	}
	return ""
}
