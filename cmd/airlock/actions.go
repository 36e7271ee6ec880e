package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/airlockhq/airlock/client"
)

type actionsCmd struct {
	List    actionsListCmd    `cmd:"" help:"List actions, newest first (reviewer, auditor)."`
	Get     actionsGetCmd     `cmd:"" help:"Show one action."`
	Wait    actionsWaitCmd    `cmd:"" help:"Wait until an action is decided; exit 0 approved, 2 denied, expired or cancelled, 7 still pending."`
	Approve actionsApproveCmd `cmd:"" help:"Approve a pending action (reviewer): its confirmation phrase must be typed on a terminal."`
	Deny    actionsDenyCmd    `cmd:"" help:"Deny a pending action (reviewer)."`
	Cancel  actionsCancelCmd  `cmd:"" help:"Cancel a pending, approved or running action (reviewer, admin)."`
}

type actionsListCmd struct {
	Status    string `help:"Only these statuses (comma-separated: pending,approved,denied,expired,cancelled,running,succeeded,failed)."`
	Agent     string `placeholder:"ID" help:"Only this agent's."`
	Risk      string `help:"Only this risk level (low, medium, high, critical)."`
	Tool      string `help:"Only this tool."`
	DecidedBy string `name:"decided-by" placeholder:"USER" help:"Only those decided by this reviewer."`
	Since     string `placeholder:"TIME" help:"Only those created at or after (RFC 3339)."`
	Until     string `placeholder:"TIME" help:"Only those created before (RFC 3339)."`
	Limit     int    `help:"At most this many (the server's page size when 0)."`
	Cursor    string `help:"The next_cursor of the previous page."`
}

// Run lists one page of actions.
func (c *actionsListCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	q := url.Values{}
	for name, v := range map[string]string{"status": c.Status, "agent": c.Agent, "risk": c.Risk, "tool": c.Tool,
		"decided_by": c.DecidedBy, "since": c.Since, "until": c.Until, "cursor": c.Cursor} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if c.Limit > 0 {
		q.Set("limit", strconv.Itoa(c.Limit))
	}
	page, err := cl.ListActions(ctx, q)
	if err != nil {
		return err
	}
	if g.json() {
		return printJSON(g.stdout, page)
	}
	rows := make([][]string, 0, len(page.Actions))
	for _, a := range page.Actions {
		rows = append(rows, []string{a.ID, a.Status, a.Tool, a.AgentID, a.Risk.Level, when(a.CreatedAt)})
	}
	if err := printTable(g.stdout, []string{"ID", "STATUS", "TOOL", "AGENT", "RISK", "CREATED"}, rows); err != nil {
		return err
	}
	if page.NextCursor != "" {
		fmt.Fprintf(g.stderr, "more: --cursor %s\n", safeText(page.NextCursor))
	}
	return nil
}

type actionsGetCmd struct {
	ID string `arg:"" help:"The action's id."`
}

// Run shows the action.
func (c *actionsGetCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	a, err := cl.Get(ctx, c.ID)
	if err != nil {
		return err
	}
	return printAction(g, a)
}

type actionsWaitCmd struct {
	ID      string        `arg:"" help:"The action's id."`
	Timeout time.Duration `default:"10m" help:"Give up after this long (the action stays pending)."`
}

// Run long-polls until the action leaves pending.
func (c *actionsWaitCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	a, err := cl.Wait(wctx, c.ID)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		if a == nil {
			// The time ran out before the server answered (--timeout
			// shorter than a round trip): look once, so that what is
			// said is the action's status, not a guess.
			if a, err = cl.Get(ctx, c.ID); err != nil {
				return err
			}
		}
		if a.Pending() {
			if perr := printAction(g, a); perr != nil {
				return perr
			}
			return &cliError{code: "timeout", message: fmt.Sprintf("action %s is still pending after %s", c.ID, c.Timeout), exit: exitTimeout}
		}
	} else if err != nil {
		return err
	}
	if err := printAction(g, a); err != nil {
		return err
	}
	return decidedError(a)
}

// decidedError is nil for an action that was let through, else the
// "denied" exit with the status as its code.
func decidedError(a *client.Action) error {
	switch a.Status {
	case "approved", "running", "succeeded", "failed":
		return nil
	}
	msg := fmt.Sprintf("action %s is %s", a.ID, a.Status)
	if a.Decision.Reason != "" {
		msg += ": " + a.Decision.Reason
	}
	return &cliError{code: a.Status, message: msg, exit: exitUsage}
}

type actionsApproveCmd struct {
	ID      string `arg:"" help:"The action's id."`
	Scope   string `enum:"once,conversation,always" default:"once" help:"How far the approval reaches: once, conversation or always."`
	Comment string `help:"A comment kept with the approval."`
}

// errNotTerminal refuses a confirmation that was not typed.
var errNotTerminal = &cliError{code: "not_a_terminal", exit: exitUsage,
	message: "approving asks for the confirmation phrase to be typed on a terminal, and stdin is not one (the phrase cannot be passed as a flag or piped)"}

// Run shows the action and asks for its confirmation phrase to be typed,
// then approves it with what was typed (the server compares).
func (c *actionsApproveCmd) Run(ctx context.Context, g *globals) error {
	tty := term.IsTerminal(int(g.stdin.Fd()))
	if !tty {
		return errNotTerminal
	}
	cl, err := g.client()
	if err != nil {
		return err
	}
	a, err := cl.Get(ctx, c.ID)
	if err != nil {
		return err
	}
	if !a.Pending() {
		return &cliError{code: "conflict", message: fmt.Sprintf("action %s is %s, not pending", a.ID, a.Status), exit: exitConflict}
	}
	if a.ConfirmationPhrase == "" {
		return &cliError{code: "forbidden", message: "the server shows this action's confirmation phrase to reviewers only", exit: exitForbidden}
	}
	describeForReview(g.stderr, a)
	typed, err := typedPhrase(g.stdin, tty, g.stderr, a.ConfirmationPhrase)
	if err != nil {
		return err
	}
	// A merge's diff or an exec's impact preview may have landed (or been
	// prepared again) while the phrase was typed: the server approves only
	// the preview shown, or refuses (409, exit 5).
	got, err := cl.ApproveShown(ctx, a, typed, c.Scope, c.Comment)
	if err != nil {
		return err
	}
	return printAction(g, got)
}

// typedPhrase asks for phrase to be typed and returns what was typed.
// isTerminal says whether in is a terminal: anything else (a pipe, a
// file, a here-document) is refused, so that the phrase is read by a
// person, not by a script.
func typedPhrase(in io.Reader, isTerminal bool, prompt io.Writer, phrase string) (string, error) {
	if !isTerminal {
		return "", errNotTerminal
	}
	fmt.Fprintf(prompt, "To approve, type the confirmation phrase: %s\n> ", safeText(phrase))
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		return "", &cliError{code: "usage", message: "nothing typed: not approved", exit: exitUsage}
	}
	typed := strings.TrimSpace(line)
	if typed == "" {
		return "", &cliError{code: "usage", message: "nothing typed: not approved", exit: exitUsage}
	}
	return typed, nil
}

// describeForReview prints what is being approved.
func describeForReview(w io.Writer, a *client.Action) {
	fields := [][2]string{
		{"action", a.ID}, {"agent", a.AgentID}, {"tool", a.Tool}, {"args", compactJSON(a.Args)},
		{"risk", riskText(a.Risk)}, {"reason", a.Reason},
		{"approvals", fmt.Sprintf("%d of %d", len(a.Approvals), a.RequiredApprovals)},
	}
	if len(a.Preview) > 0 {
		fields = append(fields, [2]string{"preview", string(a.Preview)})
	}
	_ = printFields(w, fields)
}

func riskText(r client.Risk) string {
	s := fmt.Sprintf("%s (%d)", r.Level, r.Score)
	if r.Injection {
		s += ", injection suspected"
	}
	if len(r.Reasons) > 0 {
		s += ": " + strings.Join(r.Reasons, "; ")
	}
	return s
}

type actionsDenyCmd struct {
	ID     string `arg:"" help:"The action's id."`
	Reason string `required:"" help:"Why (the agent sees it)."`
}

// Run denies the action.
func (c *actionsDenyCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	a, err := cl.Deny(ctx, c.ID, c.Reason)
	if err != nil {
		return err
	}
	return printAction(g, a)
}

type actionsCancelCmd struct {
	ID     string `arg:"" help:"The action's id."`
	Reason string `help:"Why."`
}

// Run cancels the action.
func (c *actionsCancelCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	a, err := cl.Stop(ctx, c.ID, c.Reason)
	if err != nil {
		return err
	}
	return printAction(g, a)
}

func printAction(g *globals, a *client.Action) error {
	if g.json() {
		return printJSON(g.stdout, a)
	}
	fields := [][2]string{
		{"id", a.ID}, {"status", a.Status}, {"tool", a.Tool}, {"agent", a.AgentID},
		{"conversation", a.ConversationID}, {"step", a.StepID}, {"args", compactJSON(a.Args)},
		{"reason", a.Reason}, {"risk", riskText(a.Risk)},
		{"decision", strings.TrimSpace(fmt.Sprintf("%s %s %s", a.Decision.Effect, a.Decision.By, a.Decision.Reason))},
		{"approvals", fmt.Sprintf("%d of %d", len(a.Approvals), a.RequiredApprovals)},
		{"created", when(a.CreatedAt)},
	}
	if a.ExpiresAt != nil {
		fields = append(fields, [2]string{"expires", when(*a.ExpiresAt)})
	}
	if len(a.Result) > 0 {
		fields = append(fields, [2]string{"result", string(a.Result)})
	}
	return printFields(g.stdout, fields)
}
