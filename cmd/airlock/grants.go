package main

import (
	"context"
	"fmt"
)

type grantsCmd struct {
	List   grantsListCmd   `cmd:"" help:"List active conversation grants (reviewer, admin)."`
	Revoke grantsRevokeCmd `cmd:"" help:"Revoke a grant at once (reviewer, admin)."`
}

type grantsListCmd struct {
	Agent        string `placeholder:"ID" help:"Only this agent's."`
	Conversation string `placeholder:"ID" help:"Only this conversation's."`
}

// Run lists the grants.
func (c *grantsListCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	grants, err := cl.Grants(ctx, c.Agent, c.Conversation)
	if err != nil {
		return err
	}
	if g.json() {
		return printJSON(g.stdout, map[string]any{"grants": grants})
	}
	rows := make([][]string, 0, len(grants))
	for _, gr := range grants {
		rows = append(rows, []string{gr.ID, gr.AgentID, gr.Tool, gr.ConversationID, gr.GrantedBy, when(gr.ExpiresAt)})
	}
	return printTable(g.stdout, []string{"ID", "AGENT", "TOOL", "CONVERSATION", "GRANTED BY", "EXPIRES"}, rows)
}

type grantsRevokeCmd struct {
	ID string `arg:"" help:"The grant's id."`
}

// Run revokes the grant.
func (c *grantsRevokeCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	if err := cl.RevokeGrant(ctx, c.ID); err != nil {
		return err
	}
	if g.json() {
		return printJSON(g.stdout, map[string]any{"revoked": c.ID})
	}
	fmt.Fprintf(g.stdout, "revoked %s\n", safeText(c.ID))
	return nil
}
