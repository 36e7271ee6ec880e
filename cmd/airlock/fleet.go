package main

import (
	"context"
	"fmt"

	"github.com/airlockhq/airlock/client"
)

// fleetCmd holds the switches that hold for every agent at once.
type fleetCmd struct {
	PlanMode fleetPlanModeCmd `cmd:"" name:"plan-mode" help:"Show or turn plan mode on or off for the whole fleet (admin, reviewer): calls that are not reads are denied."`
	Suspend  fleetSuspendCmd  `cmd:"" help:"The emergency stop: suspend every agent at once (admin)."`
	Resume   fleetResumeCmd   `cmd:"" help:"Lift the emergency stop: resume the agents it suspended (admin)."`
	Status   fleetStatusCmd   `cmd:"" help:"Show the fleet's plan mode and emergency stop."`
}

type fleetPlanModeCmd struct {
	State  string `arg:"" enum:"on,off,show" default:"show" help:"on, off or show."`
	Reason string `help:"Why (audited)."`
}

// Run flips or shows the fleet's plan mode.
func (c *fleetPlanModeCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	var pm *client.PlanMode
	if c.State == "show" {
		pm, err = cl.FleetPlanMode(ctx)
	} else {
		pm, err = cl.SetFleetPlanMode(ctx, c.State == "on", c.Reason)
	}
	if err != nil {
		return err
	}
	if g.json() {
		return printJSON(g.stdout, pm)
	}
	fmt.Fprintf(g.stdout, "fleet: plan mode %s\n", planModeText(*pm))
	return nil
}

// agentPlanModeCmd is `airlock agents plan-mode ID on|off|show`.
type agentPlanModeCmd struct {
	ID     string `arg:"" help:"The agent's id."`
	State  string `arg:"" enum:"on,off,show" default:"show" help:"on, off or show."`
	Reason string `help:"Why (audited)."`
}

// Run flips or shows the agent's plan mode.
func (c *agentPlanModeCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	var pm *client.AgentPlanMode
	if c.State == "show" {
		pm, err = cl.AgentPlanModeOf(ctx, c.ID)
	} else {
		pm, err = cl.SetAgentPlanMode(ctx, c.ID, c.State == "on", c.Reason)
	}
	if err != nil {
		return err
	}
	if g.json() {
		return printJSON(g.stdout, pm)
	}
	fmt.Fprintf(g.stdout, "%s: plan mode %s\n", safeText(pm.AgentID), planModeText(pm.Agent))
	fmt.Fprintf(g.stdout, "fleet: plan mode %s\n", planModeText(pm.Fleet))
	return nil
}

func planModeText(pm client.PlanMode) string {
	if !pm.On {
		return "off"
	}
	s := "on"
	if pm.SetAt != nil {
		s += " since " + when(*pm.SetAt)
	}
	if pm.SetBy != "" {
		s += " by " + safeText(pm.SetBy)
	}
	if pm.Reason != "" {
		s += ": " + safeText(pm.Reason)
	}
	return s
}

type fleetSuspendCmd struct {
	Reason string `help:"Why (audited)."`
}

// Run stops the fleet.
func (c *fleetSuspendCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	st, err := cl.SuspendFleet(ctx, c.Reason)
	if err != nil {
		return err
	}
	return printFleetStop(g, st, "suspended")
}

type fleetResumeCmd struct{}

// Run lifts the fleet stop.
func (c *fleetResumeCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	st, err := cl.ResumeFleet(ctx)
	if err != nil {
		return err
	}
	return printFleetStop(g, st, "resumed")
}

type fleetStatusCmd struct{}

// Run shows the fleet's switches.
func (c *fleetStatusCmd) Run(ctx context.Context, g *globals) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	st, err := cl.FleetSuspension(ctx)
	if err != nil {
		return err
	}
	pm, err := cl.FleetPlanMode(ctx)
	if err != nil {
		return err
	}
	if g.json() {
		return printJSON(g.stdout, map[string]any{"suspension": st, "plan_mode": pm})
	}
	fmt.Fprintf(g.stdout, "fleet: plan mode %s\n", planModeText(*pm))
	return printFleetStop(g, st, "")
}

func printFleetStop(g *globals, st *client.FleetStop, verb string) error {
	if g.json() {
		return printJSON(g.stdout, st)
	}
	state := "running"
	if st.Stopped {
		state = "stopped"
		if st.StoppedAt != nil {
			state += " since " + when(*st.StoppedAt)
		}
		state += " by " + safeText(st.StoppedBy)
		if st.Reason != "" {
			state += ": " + safeText(st.Reason)
		}
	}
	fmt.Fprintf(g.stdout, "fleet: %s\n", state)
	for _, id := range st.Agents {
		fmt.Fprintf(g.stdout, "%s %s\n", verb, safeText(id))
	}
	for _, id := range st.Cancelled {
		fmt.Fprintf(g.stdout, "stopped %s\n", safeText(id))
	}
	return nil
}
