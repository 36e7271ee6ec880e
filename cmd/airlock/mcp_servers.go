package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/jsonx"
)

// The registry commands are a thin skin over /api/v1/mcp/servers: every
// rule of a registration is the server's (internal/mcp.Validate), so a
// refused one comes back as the API's one-line error.

type mcpServersCmd struct {
	Add    mcpServersAddCmd    `cmd:"" help:"Register an MCP server from flags or a file (admin); --replace writes a new version of an existing one."`
	List   mcpServersListCmd   `cmd:"" help:"List the registered MCP servers."`
	Get    mcpServersGetCmd    `cmd:"" help:"Show one registration."`
	Remove mcpServersRemoveCmd `cmd:"" help:"Remove a registration (admin)."`
}

type mcpServersAddCmd struct {
	Name string `arg:"" optional:"" help:"The registration's name, [a-z0-9-] (with -f: the file's, which it must match when both are given)."`
	File string `short:"f" type:"path" placeholder:"FILE" help:"The registration, YAML or JSON, as for POST /api/v1/mcp/servers (- for stdin); no other flag with it."`

	Transport     string   `placeholder:"stdio|http" help:"stdio (launched by airlock mcp proxy) or http (Streamable HTTP)."`
	Command       string   `placeholder:"CMD" help:"stdio: the command, an absolute path or a name looked up in PATH."`
	Arg           []string `placeholder:"ARG" sep:"none" help:"stdio: one argument of the command (repeat for more; passed as is, no shell)."`
	Env           []string `placeholder:"K=V" sep:"none" help:"stdio: one variable of the command's environment (repeatable)."`
	PassEnv       []string `name:"pass-env" placeholder:"NAME" sep:"none" help:"stdio: a variable copied from the proxy's environment (repeatable)."`
	NoSandbox     bool     `name:"no-sandbox" help:"stdio: run the command outside bubblewrap."`
	ReadOnlyPath  []string `name:"read-only-path" placeholder:"PATH" sep:"none" help:"stdio: a path bound read-only in the sandbox (repeatable)."`
	Network       bool     `help:"stdio: give the sandboxed command the network."`
	URL           string   `name:"endpoint" placeholder:"URL" help:"http: the MCP server's Streamable HTTP URL, the registration's url (--url is Airlock's own)."`
	HeaderFromEnv []string `name:"header-from-env" placeholder:"H=VAR" sep:"none" help:"http: request header H set from the connecting process's variable VAR (repeatable)."`
	AllowPrivate  []string `name:"allow-private" placeholder:"CIDR" sep:"none" help:"http: a private range the URL may be reached in (repeatable)."`
	Replace       bool     `help:"Replace an existing registration (a new version) instead of refusing the name."`
	IfVersion     int      `name:"if-version" placeholder:"N" help:"With --replace: write only if N is still the current version."`
}

// Run registers the server, or writes its next version with --replace.
func (c *mcpServersAddCmd) Run(ctx context.Context, g *globals) error {
	srv, err := c.registration(g.stdin)
	if err != nil {
		return err
	}
	if c.IfVersion != 0 && !c.Replace {
		return usageError("--if-version goes with --replace")
	}
	if c.IfVersion < 0 {
		return usageError("--if-version must be positive")
	}
	cl, err := g.client()
	if err != nil {
		return err
	}
	var reg *client.MCPRegistration
	if c.Replace {
		reg, err = cl.UpdateMCPServer(ctx, srv, c.IfVersion)
	} else {
		reg, err = cl.CreateMCPServer(ctx, srv)
	}
	if err != nil {
		return err
	}
	return printRegistration(g, reg)
}

// registration builds the body from the file or from the flags.
func (c *mcpServersAddCmd) registration(stdin io.Reader) (client.MCPServer, error) {
	if c.File != "" {
		if c.flagsGiven() {
			return client.MCPServer{}, usageError("-f takes the whole registration: give no other registration flag with it")
		}
		srv, err := readRegistration(c.File, stdin)
		if err != nil {
			return srv, err
		}
		if c.Name != "" && c.Name != srv.Name {
			return srv, usageError("the file registers %q, not %q", srv.Name, c.Name)
		}
		return srv, nil
	}
	if c.Name == "" {
		return client.MCPServer{}, usageError("name the server, or give -f FILE")
	}
	srv := client.MCPServer{
		Name: c.Name, Transport: c.Transport, Command: c.Command, Args: c.Arg, PassEnv: c.PassEnv,
		ReadOnlyPaths: c.ReadOnlyPath, Network: c.Network, URL: c.URL, AllowPrivate: c.AllowPrivate,
	}
	if srv.Transport == "" {
		// The transport the flags point at; the server refuses a mix.
		srv.Transport = "stdio"
		if c.URL != "" {
			srv.Transport = "http"
		}
	}
	var err error
	if srv.Env, err = pairs("--env", c.Env); err != nil {
		return srv, err
	}
	if srv.HeadersFromEnv, err = pairs("--header-from-env", c.HeaderFromEnv); err != nil {
		return srv, err
	}
	if c.NoSandbox {
		off := false
		srv.Sandbox = &off
	}
	return srv, nil
}

// flagsGiven reports whether a registration flag was given.
func (c *mcpServersAddCmd) flagsGiven() bool {
	return c.Transport != "" || c.Command != "" || len(c.Arg) > 0 || len(c.Env) > 0 || len(c.PassEnv) > 0 ||
		c.NoSandbox || len(c.ReadOnlyPath) > 0 || c.Network || c.URL != "" || len(c.HeaderFromEnv) > 0 || len(c.AllowPrivate) > 0
}

// pairs parses repeated K=V flags; a key given twice is refused.
func pairs(flag string, list []string) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(list))
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageError("%s %q: want KEY=VALUE", flag, kv)
		}
		if _, dup := out[k]; dup {
			return nil, usageError("%s: %s given twice", flag, k)
		}
		out[k] = v
	}
	return out, nil
}

// maxRegistrationFile bounds a registration file.
const maxRegistrationFile = 1 << 20

// readRegistration reads a registration file, YAML or JSON, strictly, as
// the API reads its body (jsonx): a field it does not know, or spells in
// another case, is refused, not dropped or matched.
func readRegistration(file string, stdin io.Reader) (client.MCPServer, error) {
	var srv client.MCPServer
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(io.LimitReader(stdin, maxRegistrationFile+1))
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return srv, fmt.Errorf("reading the registration: %w", err)
	}
	bad := func(format string, args ...any) error {
		return &cliError{code: "invalid", message: file + ": " + fmt.Sprintf(format, args...), exit: exitError}
	}
	if len(b) > maxRegistrationFile {
		return srv, bad("larger than %d bytes", maxRegistrationFile)
	}
	js, err := yaml.YAMLToJSONStrict(b) // JSON is YAML; duplicate keys refused
	if err != nil {
		return srv, bad("%v", err)
	}
	// As the server reads the body: a field spelled in another case, or
	// given twice so, is refused, not matched to one (the last winning).
	if err := jsonx.Decode(js, &srv); err != nil {
		return srv, bad("%v", err)
	}
	return srv, nil
}

type mcpServersListCmd struct{}

// Run lists the registrations.
func (c *mcpServersListCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	regs, err := cl.MCPServers(ctx)
	if err != nil {
		return err
	}
	if regs == nil {
		regs = []client.MCPRegistration{}
	}
	if g.json() {
		return printJSON(g.stdout, client.MCPServerList{Servers: regs})
	}
	rows := make([][]string, 0, len(regs))
	for _, r := range regs {
		rows = append(rows, []string{r.Name, r.Transport, target(r.MCPServer), strconv.Itoa(r.Version), r.UpdatedBy, when(r.UpdatedAt)})
	}
	return printTable(g.stdout, []string{"NAME", "TRANSPORT", "TARGET", "VERSION", "UPDATED BY", "UPDATED"}, rows)
}

// target is what a registration reaches: the command line or the URL.
func target(s client.MCPServer) string {
	if s.Transport == "http" {
		return s.URL
	}
	return strings.Join(append([]string{s.Command}, s.Args...), " ")
}

type mcpServersGetCmd struct {
	Name string `arg:"" help:"The registration's name."`
}

// Run shows the registration.
func (c *mcpServersGetCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	reg, err := cl.MCPServer(ctx, c.Name)
	if err != nil {
		return err
	}
	return printRegistration(g, reg)
}

// printRegistration prints one registration: JSON whole, or its fields.
func printRegistration(g *globals, r *client.MCPRegistration) error {
	if g.json() {
		return printJSON(g.stdout, r)
	}
	fields := [][2]string{{"name", r.Name}, {"transport", r.Transport}}
	if r.Transport == "http" {
		fields = append(fields,
			[2]string{"url", r.URL},
			[2]string{"headers_from_env", joinPairs(r.HeadersFromEnv)},
			[2]string{"allow_private", strings.Join(r.AllowPrivate, ", ")})
	} else {
		sandbox := "yes"
		if r.Sandbox != nil && !*r.Sandbox {
			sandbox = "no"
		}
		network := "no"
		if r.Network {
			network = "yes"
		}
		env := joinPairs(r.Env)
		if r.Redacted {
			env += " (values withheld)"
		}
		fields = append(fields,
			[2]string{"command", r.Command},
			[2]string{"args", compactJSON(r.Args)},
			[2]string{"env", env},
			[2]string{"pass_env", strings.Join(r.PassEnv, ", ")},
			[2]string{"sandbox", sandbox},
			[2]string{"read_only_paths", strings.Join(r.ReadOnlyPaths, ", ")},
			[2]string{"network", network})
	}
	fields = append(fields,
		[2]string{"version", strconv.Itoa(r.Version)},
		[2]string{"updated", strings.TrimSpace(r.UpdatedBy + " " + when(r.UpdatedAt))})
	return printFields(g.stdout, fields)
}

// joinPairs prints a map as k=v, sorted by key.
func joinPairs(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	return strings.Join(keys, ", ")
}

type mcpServersRemoveCmd struct {
	Name string `arg:"" help:"The registration's name."`
}

// Run removes the registration.
func (c *mcpServersRemoveCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	if err := cl.DeleteMCPServer(ctx, c.Name); err != nil {
		return err
	}
	if g.json() {
		return printJSON(g.stdout, map[string]any{"removed": c.Name})
	}
	fmt.Fprintf(g.stdout, "removed %s\n", safeText(c.Name))
	return nil
}
