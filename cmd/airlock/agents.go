package main

import (
	"context"
	"fmt"
	"time"

	"github.com/airlockhq/airlock/client"
)

type agentsCmd struct {
	Create  agentsCreateCmd  `cmd:"" help:"Register an agent (admin)."`
	List    agentsListCmd    `cmd:"" help:"List agents."`
	Get     agentsGetCmd     `cmd:"" help:"Show one agent."`
	Suspend agentsSuspendCmd `cmd:"" help:"Suspend an agent: its submits are denied, its unfinished actions stopped (admin)."`
	Resume  agentsResumeCmd  `cmd:"" help:"Lift an agent's suspension (admin)."`
	Plan    agentPlanModeCmd `cmd:"" name:"plan-mode" help:"Show or turn an agent's plan mode on or off (admin, reviewer)."`
}

type agentsCreateCmd struct {
	ID          string `arg:"" help:"The agent's id."`
	Name        string `help:"A display name (default: the id)."`
	Description string `help:"What the agent does."`
	Owner       string `help:"The user answerable for it (default: you)."`
}

// Run registers the agent.
func (c *agentsCreateCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	name := c.Name
	if name == "" {
		name = c.ID
	}
	a, err := cl.RegisterAgent(ctx, client.NewAgent{ID: c.ID, Name: name, Description: c.Description, Owner: c.Owner})
	if err != nil {
		return err
	}
	return printAgent(g, a)
}

type agentsListCmd struct{}

// Run lists the agents.
func (c *agentsListCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	agents, err := cl.ListAgents(ctx)
	if err != nil {
		return err
	}
	if g.json() {
		return printJSON(g.stdout, client.AgentList{Agents: agents})
	}
	rows := make([][]string, 0, len(agents))
	for _, a := range agents {
		rows = append(rows, []string{a.ID, a.Name, a.Owner, agentState(a.SuspendedAt), when(a.CreatedAt)})
	}
	return printTable(g.stdout, []string{"ID", "NAME", "OWNER", "STATE", "CREATED"}, rows)
}

type agentsGetCmd struct {
	ID string `arg:"" help:"The agent's id."`
}

// Run shows the agent.
func (c *agentsGetCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	a, err := cl.Agent(ctx, c.ID)
	if err != nil {
		return err
	}
	return printAgent(g, a)
}

type agentsSuspendCmd struct {
	ID string `arg:"" help:"The agent's id."`
}

// Run suspends the agent.
func (c *agentsSuspendCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	s, err := cl.SuspendAgent(ctx, c.ID)
	if err != nil {
		return err
	}
	return printSuspension(g, s)
}

type agentsResumeCmd struct {
	ID string `arg:"" help:"The agent's id."`
}

// Run resumes the agent.
func (c *agentsResumeCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	s, err := cl.ResumeAgent(ctx, c.ID)
	if err != nil {
		return err
	}
	return printSuspension(g, s)
}

func printAgent(g *globals, a *client.Agent) error {
	if g.json() {
		return printJSON(g.stdout, a)
	}
	return printFields(g.stdout, [][2]string{
		{"id", a.ID}, {"name", a.Name}, {"description", a.Description}, {"owner", a.Owner},
		{"state", agentState(a.SuspendedAt)}, {"created_by", a.CreatedBy}, {"created_at", when(a.CreatedAt)},
	})
}

func printSuspension(g *globals, s *client.Suspension) error {
	if g.json() {
		return printJSON(g.stdout, s)
	}
	state := "active"
	if s.Suspended {
		state = "suspended"
	}
	fmt.Fprintf(g.stdout, "%s: %s\n", safeText(s.AgentID), state)
	for _, id := range s.Cancelled {
		fmt.Fprintf(g.stdout, "stopped %s\n", safeText(id))
	}
	return nil
}

func agentState(suspendedAt *time.Time) string {
	if suspendedAt != nil {
		return "suspended since " + when(*suspendedAt)
	}
	return "active"
}

type tokensCmd struct {
	Issue  tokensIssueCmd  `cmd:"" help:"Issue a token for an agent (admin); it is printed once."`
	Revoke tokensRevokeCmd `cmd:"" help:"Revoke a token by its id (admin)."`
}

type tokensIssueCmd struct {
	Agent string        `arg:"" help:"The agent's id."`
	TTL   time.Duration `name:"ttl" help:"How long the token lives (default: the server's)."`
}

// Run issues the token.
func (c *tokensIssueCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	if c.TTL < 0 || (c.TTL > 0 && c.TTL < time.Second) {
		return usageError("--ttl must be at least 1s")
	}
	t, err := cl.IssueAgentToken(ctx, c.Agent, c.TTL)
	if err != nil {
		return err
	}
	if g.json() {
		return printJSON(g.stdout, t)
	}
	return printFields(g.stdout, [][2]string{{"token", t.Token}, {"token_id", t.TokenID}, {"expires_at", when(t.ExpiresAt)}})
}

type tokensRevokeCmd struct {
	ID string `arg:"" help:"The token's id (token_id when it was issued)."`
}

// Run revokes the token.
func (c *tokensRevokeCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	if err := cl.RevokeToken(ctx, c.ID); err != nil {
		return err
	}
	if g.json() {
		return printJSON(g.stdout, map[string]any{"revoked": c.ID})
	}
	fmt.Fprintf(g.stdout, "revoked %s\n", safeText(c.ID))
	return nil
}
