package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock/internal/audittool"
)

type auditCmd struct {
	Query       auditQueryCmd       `cmd:"" help:"Query the audit trail, oldest first (auditor)."`
	Verify      auditVerifyCmd      `cmd:"" help:"Verify the hash chain: through the server, or offline from an export (exit 6 when broken)."`
	Export      auditExportCmd      `cmd:"" help:"Export events as NDJSON (--order seq for offline verification)."`
	Checkpoints auditCheckpointsCmd `cmd:"" help:"Print the signed checkpoints, or keep the new ones in a file."`
}

// auditFilters are the audit query's filters.
type auditFilters struct {
	CorrelationID  string `name:"correlation-id" placeholder:"ID" help:"Only this correlation id."`
	Agent          string `placeholder:"ID" help:"Only this agent's events."`
	ConversationID string `name:"conversation-id" placeholder:"ID" help:"Only this conversation's."`
	ActionID       string `name:"action-id" placeholder:"ID" help:"Only this action's."`
	Kind           string `help:"Only this kind (action.approved, ...)."`
	Since          string `placeholder:"TIME" help:"At or after (RFC 3339)."`
	Until          string `placeholder:"TIME" help:"Before (RFC 3339)."`
	Limit          int    `help:"At most this many."`
	Cursor         string `help:"The next_cursor of the previous page."`
}

func (f auditFilters) query() url.Values {
	q := url.Values{}
	for name, v := range map[string]string{"correlation_id": f.CorrelationID, "agent": f.Agent,
		"conversation_id": f.ConversationID, "action_id": f.ActionID, "kind": f.Kind, "since": f.Since,
		"until": f.Until, "cursor": f.Cursor} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q
}

type auditQueryCmd struct {
	auditFilters
}

// Run prints one page of events.
func (c *auditQueryCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	page, err := cl.Audit(ctx, c.query())
	if err != nil {
		return err
	}
	if g.json() {
		return printJSON(g.stdout, page)
	}
	rows := make([][]string, 0, len(page.Events))
	for _, e := range page.Events {
		rows = append(rows, []string{strconv.FormatInt(e.ID, 10), when(e.At), e.Kind, e.Actor, e.AgentID, e.Tool, e.ActionID})
	}
	if err := printTable(g.stdout, []string{"ID", "AT", "KIND", "ACTOR", "AGENT", "TOOL", "ACTION"}, rows); err != nil {
		return err
	}
	if page.NextCursor != "" {
		fmt.Fprintf(g.stderr, "more: --cursor %s\n", safeText(page.NextCursor))
	}
	return nil
}

type auditVerifyCmd struct {
	Offline     string `type:"existingfile" placeholder:"EXPORT" help:"Verify this export (made with audit export --order seq) here, trusting no server."`
	Checkpoints string `type:"existingfile" placeholder:"FILE" help:"Checkpoints kept elsewhere (NDJSON, from audit checkpoints --append); each one is held against the chain."`
	Key         string `placeholder:"KEY" help:"With --checkpoints: the audit public key (base64) the kept checkpoints must be signed with (from its first on)."`
	From        int64  `placeholder:"SEQ" help:"Start after the checkpoint at SEQ (the events up to it archived): the stored one, or offline the kept one in --checkpoints."`
}

// Run verifies the chain and prints the report.
func (c *auditVerifyCmd) Run(ctx context.Context, g *globals) error {
	report, err := audittool.Verify(ctx, g.client, audittool.VerifyOptions{Offline: c.Offline, Checkpoints: c.Checkpoints, Key: c.Key, From: c.From})
	switch {
	case errors.Is(err, audittool.ErrBadFrom):
		return usageError("--%v", err)
	case errors.Is(err, audittool.ErrKeyWithoutCheckpoints):
		return usageError("--key pins the key of the kept checkpoints: name their file (--checkpoints)")
	case errors.Is(err, audittool.ErrWrongKey):
		return &cliError{code: "wrong_key", message: "the kept checkpoints are not signed by --key" + strings.TrimPrefix(err.Error(), audittool.ErrWrongKey.Error()), exit: exitNotIntact}
	}
	if report == nil {
		return err
	}
	if g.json() {
		if perr := printJSON(g.stdout, report); perr != nil {
			return perr
		}
	} else {
		printVerifyReport(g, report, c.Offline != "")
	}
	if err == nil && c.Offline != "" && !report.Anchored {
		fmt.Fprintln(g.stderr, "no kept checkpoint anchors the export: it is consistent, as anyone can make one (hold it against the kept checkpoints: --checkpoints)")
	}
	if errors.Is(err, audittool.ErrNotIntact) {
		return &cliError{code: "not_intact", message: "the audit chain is not intact", exit: exitNotIntact}
	}
	return err
}

func printVerifyReport(g *globals, r *audittool.Report, offline bool) {
	if !r.OK {
		if r.FirstBadSeq == 0 { // the chain is whole; events it should hold are not in it (unsealed)
			fmt.Fprintf(g.stdout, "NOT INTACT: %s (%d events checked)\n", safeText(r.Reason), r.Checked)
			return
		}
		fmt.Fprintf(g.stdout, "NOT INTACT: first bad seq %d: %s (%d events checked)\n", r.FirstBadSeq, safeText(r.Reason), r.Checked)
		return
	}
	verdict := "intact"
	if offline && !r.Anchored {
		verdict = "consistent, but not anchored"
	}
	if r.From > 0 {
		verdict += fmt.Sprintf(" after the checkpoint at seq %d", r.From)
	}
	fmt.Fprintf(g.stdout, "%s: %d events checked, head seq %d", verdict, r.Checked, r.Head.Seq)
	if r.Anchored {
		fmt.Fprintf(g.stdout, "; %d kept checkpoints held, through seq %d", r.Kept, r.CoveredThrough)
	}
	fmt.Fprintln(g.stdout)
}

type auditExportCmd struct {
	auditFilters
	Order string `enum:"id,seq" default:"id" help:"id (arrival) or seq (chain order, for offline verification)."`
	File  string `type:"path" placeholder:"FILE" help:"Write to this file instead of stdout."`
}

// Run writes the NDJSON export.
func (c *auditExportCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	q := c.query()
	q.Set("order", c.Order)
	return audittool.Export(ctx, cl, q, c.File, g.stdout)
}

type auditCheckpointsCmd struct {
	Append    string `type:"path" placeholder:"FILE" help:"Add the checkpoints after FILE's newest to it, checked: signed by the same key, and the chain leading from FILE's newest to them."`
	AcceptKey string `placeholder:"KEY" help:"With --append, after a rotation of the server's audit key: the new key's public half (base64); the kept checkpoints change to it."`
}

// Run prints or keeps the checkpoints.
func (c *auditCheckpointsCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	err = audittool.Checkpoints(ctx, cl, c.Append, c.AcceptKey, g.stdout)
	if errors.Is(err, audittool.ErrBadKey) {
		return usageError("--accept-key: %v", err)
	}
	return err
}
