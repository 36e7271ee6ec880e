package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/audit"
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
	Key         string `placeholder:"KEY" help:"Offline: the audit public key (base64) the kept checkpoint must be signed with."`
	From        int64  `placeholder:"SEQ" help:"Start after the checkpoint at SEQ (the events up to it archived): the stored one, or offline the kept one in --checkpoints."`
}

// Run verifies the chain and prints the report.
func (c *auditVerifyCmd) Run(ctx context.Context, g *globals) error {
	if c.Key != "" && c.Offline == "" {
		return usageError("--key pins the kept checkpoint's key offline: use it with --offline")
	}
	report, err := audittool.Verify(ctx, g.client, audittool.VerifyOptions{Offline: c.Offline, Checkpoints: c.Checkpoints, Key: c.Key, From: c.From})
	if errors.Is(err, audittool.ErrBadFrom) {
		return usageError("--%v", err)
	}
	if errors.Is(err, audittool.ErrWrongKey) {
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
		printVerifyReport(g, report)
	}
	if errors.Is(err, audittool.ErrNotIntact) {
		return &cliError{code: "not_intact", message: "the audit chain is not intact", exit: exitNotIntact}
	}
	return err
}

func printVerifyReport(g *globals, report any) {
	var ok bool
	var checked, head, bad, from int64
	var reason string
	switch r := report.(type) {
	case *client.VerifyReport:
		ok, checked, head, bad, reason, from = r.OK, r.Checked, r.Head.Seq, r.FirstBadSeq, r.Reason, r.From
	case audit.Report:
		ok, checked, head, bad, reason, from = r.OK, r.Checked, r.Head.Seq, r.FirstBadSeq, r.Reason, r.From
	}
	if ok && from > 0 {
		fmt.Fprintf(g.stdout, "intact after the checkpoint at seq %d: %d events checked, head seq %d\n", from, checked, head)
		return
	}
	if ok {
		fmt.Fprintf(g.stdout, "intact: %d events checked, head seq %d\n", checked, head)
		return
	}
	fmt.Fprintf(g.stdout, "NOT INTACT: first bad seq %d: %s (%d events checked)\n", bad, safeText(reason), checked)
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
