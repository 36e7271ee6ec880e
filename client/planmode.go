package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// PlanMode is one plan mode switch (the fleet's or an agent's); SetBy,
// SetAt and Reason are set while it is on.
type PlanMode struct {
	Scope  string     `json:"scope"`
	On     bool       `json:"on"`
	SetBy  string     `json:"set_by,omitempty"`
	SetAt  *time.Time `json:"set_at,omitempty"`
	Reason string     `json:"reason,omitempty"`
}

// AgentPlanMode is the plan mode that holds for an agent: its own switch,
// the fleet's, and whether either is on.
type AgentPlanMode struct {
	AgentID string   `json:"agent_id"`
	Agent   PlanMode `json:"agent"`
	Fleet   PlanMode `json:"fleet"`
	On      bool     `json:"on"`
}

// FleetStop is the fleet emergency stop's state; Agents and Cancelled
// list what a stop or resume call suspended or resumed and cancelled.
type FleetStop struct {
	Stopped   bool       `json:"stopped"`
	StoppedBy string     `json:"stopped_by,omitempty"`
	StoppedAt *time.Time `json:"stopped_at,omitempty"`
	Reason    string     `json:"reason,omitempty"`
	Agents    []string   `json:"agents,omitempty"`
	Cancelled []string   `json:"cancelled,omitempty"`
}

type planModeRequest struct {
	On     bool   `json:"on"`
	Reason string `json:"reason,omitempty"`
}

// AgentPlanModeOf returns the plan mode that holds for an agent (admin,
// reviewer, auditor).
func (c *Client) AgentPlanModeOf(ctx context.Context, agentID string) (*AgentPlanMode, error) {
	var out AgentPlanMode
	if _, err := c.Do(ctx, http.MethodGet, "/api/v1/agents/"+url.PathEscape(agentID)+"/plan-mode", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetAgentPlanMode turns an agent's plan mode on or off (admin,
// reviewer), with a reason for the audit log ("" for none).
func (c *Client) SetAgentPlanMode(ctx context.Context, agentID string, on bool, reason string) (*AgentPlanMode, error) {
	var out AgentPlanMode
	if _, err := c.Do(ctx, http.MethodPut, "/api/v1/agents/"+url.PathEscape(agentID)+"/plan-mode", planModeRequest{on, reason}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// FleetPlanMode returns the fleet-wide plan mode switch.
func (c *Client) FleetPlanMode(ctx context.Context) (*PlanMode, error) {
	var out PlanMode
	if _, err := c.Do(ctx, http.MethodGet, "/api/v1/fleet/plan-mode", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetFleetPlanMode turns plan mode on or off for every agent (admin,
// reviewer).
func (c *Client) SetFleetPlanMode(ctx context.Context, on bool, reason string) (*PlanMode, error) {
	var out PlanMode
	if _, err := c.Do(ctx, http.MethodPut, "/api/v1/fleet/plan-mode", planModeRequest{on, reason}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// FleetSuspension returns whether the fleet emergency stop is on.
func (c *Client) FleetSuspension(ctx context.Context) (*FleetStop, error) {
	var out FleetStop
	if _, err := c.Do(ctx, http.MethodGet, "/api/v1/fleet/suspension", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SuspendFleet is the fleet emergency stop (admin): every agent is
// suspended at once.
func (c *Client) SuspendFleet(ctx context.Context, reason string) (*FleetStop, error) {
	var out FleetStop
	body := map[string]string{}
	if reason != "" {
		body["reason"] = reason
	}
	if _, err := c.Do(ctx, http.MethodPost, "/api/v1/fleet/suspend", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResumeFleet lifts the fleet stop (admin): the agents it suspended are
// resumed; agents suspended on their own stay suspended.
func (c *Client) ResumeFleet(ctx context.Context) (*FleetStop, error) {
	var out FleetStop
	if _, err := c.Do(ctx, http.MethodPost, "/api/v1/fleet/resume", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
