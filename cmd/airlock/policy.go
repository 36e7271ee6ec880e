package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"

	"sigs.k8s.io/yaml"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/policy"
)

type policyCmd struct {
	Get   policyGetCmd   `cmd:"" help:"Print the current policy (YAML; --output json for the stored version)."`
	Diff  policyDiffCmd  `cmd:"" help:"Show what applying a policy file would change."`
	Apply policyApplyCmd `cmd:"" help:"Show the diff and write a policy file as the next version (admin), refusing a stale version."`
}

// policyScope says whose policy: one agent's or the fleet's.
type policyScope struct {
	Agent string `placeholder:"ID" help:"An agent's policy."`
	Fleet bool   `help:"The fleet policy."`
}

func (s policyScope) check() error {
	if (s.Agent == "") == !s.Fleet {
		return usageError("name the policy: --agent ID or --fleet")
	}
	return nil
}

func (s policyScope) label() string {
	if s.Fleet {
		return "fleet"
	}
	return "agent " + s.Agent
}

// current returns the current policy of the scope; an agent without one
// has version 0 and no rules.
func (s policyScope) current(ctx context.Context, cl *client.Client) (*client.PolicyVersion, error) {
	if s.Fleet {
		return cl.FleetPolicy(ctx)
	}
	pv, err := cl.AgentPolicy(ctx, s.Agent)
	if client.StatusOf(err) == 404 {
		if _, aerr := cl.Agent(ctx, s.Agent); aerr != nil {
			return nil, aerr
		}
		return &client.PolicyVersion{Scope: "agent:" + s.Agent, Document: map[string]any{"rules": []any{}}}, nil
	}
	return pv, err
}

type policyGetCmd struct {
	policyScope
}

// Run prints the current policy.
func (c *policyGetCmd) Run(ctx context.Context, g *globals) error {
	if err := c.check(); err != nil {
		return err
	}
	cl, err := g.client()
	if err != nil {
		return err
	}
	var pv *client.PolicyVersion
	if c.Fleet {
		pv, err = cl.FleetPolicy(ctx)
	} else {
		pv, err = cl.AgentPolicy(ctx, c.Agent)
	}
	if err != nil {
		return err
	}
	if g.json() {
		return printJSON(g.stdout, pv)
	}
	text, err := renderStored(pv)
	if err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "# %s policy, version %d", c.label(), pv.Version)
	if pv.CreatedBy != "" {
		fmt.Fprintf(g.stdout, ", by %s at %s", safeText(pv.CreatedBy), when(pv.CreatedAt))
	}
	fmt.Fprintln(g.stdout)
	for _, o := range pv.Overrides {
		fmt.Fprintf(g.stdout, "# overrides the fleet's %s: %s (fleet: %s)\n", safeText(o.Setting), safeText(o.AgentValue), safeText(o.FleetValue))
	}
	_, err = io.WriteString(g.stdout, text)
	return err
}

// policyFile is a policy document read from a file.
type policyFile struct {
	File string `short:"f" required:"" type:"path" placeholder:"FILE" help:"The policy document, YAML or JSON (- for stdin)."`
}

// read parses the file as the server does (policy.ParseDocument).
func (f policyFile) read(stdin io.Reader) (policy.Document, error) {
	var b []byte
	var err error
	if f.File == "-" {
		b, err = io.ReadAll(io.LimitReader(stdin, 16<<20))
	} else {
		b, err = os.ReadFile(f.File)
	}
	if err != nil {
		return policy.Document{}, fmt.Errorf("reading the policy: %w", err)
	}
	doc, err := policy.ParseDocument(b)
	if err != nil {
		return policy.Document{}, &cliError{code: "invalid", message: f.File + ": " + err.Error(), exit: exitError}
	}
	if doc.Rules == nil {
		doc.Rules = []policy.Rule{}
	}
	return doc, nil
}

// render prints a document as YAML with sorted keys, the one form both
// sides of a diff are brought to.
func render(doc policy.Document) (string, error) {
	if doc.Rules == nil {
		doc.Rules = []policy.Rule{}
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("encoding the policy: %w", err)
	}
	y, err := yaml.JSONToYAML(js)
	if err != nil {
		return "", fmt.Errorf("encoding the policy: %w", err)
	}
	return string(y), nil
}

// renderStored renders a stored version's document the same way.
func renderStored(pv *client.PolicyVersion) (string, error) {
	js, err := json.Marshal(pv.Document)
	if err != nil {
		return "", fmt.Errorf("encoding the policy: %w", err)
	}
	doc, err := policy.ParseDocument(js)
	if err != nil { // the server's own document: show it as it came
		y, yerr := yaml.JSONToYAML(js)
		if yerr != nil {
			return "", fmt.Errorf("encoding the policy: %w", yerr)
		}
		return string(y), nil
	}
	return render(doc)
}

// policyChange is what diff and apply print with --output json.
type policyChange struct {
	Scope       string                `json:"scope"`
	FromVersion int                   `json:"from_version"`
	Changed     bool                  `json:"changed"`
	Diff        string                `json:"diff"`
	Applied     *client.PolicyVersion `json:"applied,omitempty"`
}

// compare reads the file and the current version and diffs them.
func compare(ctx context.Context, g *globals, cl *client.Client, scope policyScope, file policyFile) (policy.Document, *client.PolicyVersion, string, error) {
	doc, err := file.read(g.stdin)
	if err != nil {
		return doc, nil, "", err
	}
	cur, err := scope.current(ctx, cl)
	if err != nil {
		return doc, nil, "", err
	}
	before, err := renderStored(cur)
	if err != nil {
		return doc, nil, "", err
	}
	if cur.Version == 0 {
		before = "" // nothing written yet
	}
	after, err := render(doc)
	if err != nil {
		return doc, nil, "", err
	}
	diff := unifiedDiff(scope.label()+" version "+strconv.Itoa(cur.Version), file.File, before, after)
	return doc, cur, diff, nil
}

type policyDiffCmd struct {
	policyScope
	policyFile
}

// Run prints the diff from the current version to the file.
func (c *policyDiffCmd) Run(ctx context.Context, g *globals) error {
	if err := c.check(); err != nil {
		return err
	}
	cl, err := g.client()
	if err != nil {
		return err
	}
	_, cur, diff, err := compare(ctx, g, cl, c.policyScope, c.policyFile)
	if err != nil {
		return err
	}
	if g.json() {
		return printJSON(g.stdout, policyChange{Scope: cur.Scope, FromVersion: cur.Version, Changed: diff != "", Diff: diff})
	}
	if diff == "" {
		fmt.Fprintf(g.stdout, "no change from %s version %d\n", c.label(), cur.Version)
		return nil
	}
	_, err = io.WriteString(g.stdout, safeDiff(diff))
	return err
}

type policyApplyCmd struct {
	policyScope
	policyFile
	IfVersion int `name:"if-version" default:"-1" placeholder:"N" help:"Write only if N is still the current version (0: none yet); default: the version the diff was made against."`
}

// Run shows the diff and writes the file as the next version, compared
// and set by the server (If-Match): a version changed since it was read
// (or since --if-version) is refused with precondition_failed.
func (c *policyApplyCmd) Run(ctx context.Context, g *globals) error {
	if err := c.check(); err != nil {
		return err
	}
	if c.IfVersion < -1 {
		return usageError("--if-version must be 0 or more")
	}
	cl, err := g.client()
	if err != nil {
		return err
	}
	doc, cur, diff, err := compare(ctx, g, cl, c.policyScope, c.policyFile)
	if err != nil {
		return err
	}
	base := cur.Version
	if c.IfVersion >= 0 {
		base = c.IfVersion
	}
	out := policyChange{Scope: cur.Scope, FromVersion: cur.Version, Changed: diff != "", Diff: diff}
	if diff == "" {
		if base != cur.Version {
			return &cliError{code: "precondition_failed", exit: exitConflict,
				message: fmt.Sprintf("--if-version %d is not the current version (current version %d)", base, cur.Version)}
		}
		if g.json() {
			return printJSON(g.stdout, out)
		}
		fmt.Fprintf(g.stdout, "no change from %s version %d: nothing written\n", c.label(), cur.Version)
		return nil
	}
	if !g.json() {
		io.WriteString(g.stdout, safeDiff(diff))
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encoding the policy: %w", err)
	}
	var pv *client.PolicyVersion
	if c.Fleet {
		pv, err = cl.PutFleetPolicyIf(ctx, json.RawMessage(body), base)
	} else {
		pv, err = cl.PutAgentPolicyIf(ctx, c.Agent, json.RawMessage(body), base)
	}
	if err != nil {
		return err
	}
	if g.json() {
		out.Applied = pv
		return printJSON(g.stdout, out)
	}
	fmt.Fprintf(g.stdout, "applied %s version %d (was %d)\n", c.label(), pv.Version, cur.Version)
	return nil
}

// safeDiff escapes what a terminal would act on, line by line.
func safeDiff(diff string) string {
	lines := splitLines(diff)
	for i, l := range lines {
		lines[i] = safeText(l)
	}
	return joinLines(lines)
}

func joinLines(lines []string) string {
	var n int
	for _, l := range lines {
		n += len(l) + 1
	}
	b := make([]byte, 0, n)
	for _, l := range lines {
		b = append(b, l...)
		b = append(b, '\n')
	}
	return string(b)
}
