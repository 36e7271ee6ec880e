package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Agent is a registered agent.
type Agent struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	// Owner is the user answerable for the agent.
	Owner string `json:"owner"`
	// SuspendedAt is when an admin suspended the agent; nil while active.
	SuspendedAt *time.Time `json:"suspended_at"`
	CreatedBy   string     `json:"created_by"`
	CreatedAt   time.Time  `json:"created_at"`
}

// AgentList is the answer of ListAgents.
type AgentList struct {
	Agents []Agent `json:"agents"`
}

// NewAgent is what registering an agent takes; Owner defaults to the
// admin who registers it.
type NewAgent struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Owner       string `json:"owner,omitempty"`
}

// RegisterAgent registers an agent (admin) and returns it as stored.
func (c *Client) RegisterAgent(ctx context.Context, a NewAgent) (*Agent, error) {
	var out Agent
	if _, err := c.Do(ctx, http.MethodPost, "/api/v1/agents", a, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListAgents lists every agent (admin, reviewer, auditor).
func (c *Client) ListAgents(ctx context.Context) ([]Agent, error) {
	var out AgentList
	if _, err := c.Do(ctx, http.MethodGet, "/api/v1/agents", nil, &out); err != nil {
		return nil, err
	}
	return out.Agents, nil
}

// Agent returns one agent (admin, reviewer, auditor).
func (c *Client) Agent(ctx context.Context, id string) (*Agent, error) {
	var out Agent
	if _, err := c.Do(ctx, http.MethodGet, "/api/v1/agents/"+url.PathEscape(id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ApproveWith approves a pending action (reviewer) with a scope ("" is
// once) and a comment ("" for none), whatever its preview now is.
func (c *Client) ApproveWith(ctx context.Context, id, confirmation, scope, comment string) (*Action, error) {
	return c.approve(ctx, id, map[string]string{"confirmation": confirmation}, scope, comment)
}

// ApproveShown approves the pending action shown, as ApproveWith, bound
// to the preview shown: the server refuses the approval (409, conflict)
// when the action's preview is now another (a merge's diff, an exec's
// impact that landed or was prepared again after it was read).
func (c *Client) ApproveShown(ctx context.Context, shown *Action, confirmation, scope, comment string) (*Action, error) {
	return c.approve(ctx, shown.ID, map[string]string{"confirmation": confirmation, "preview_sha256": shown.PreviewSHA256}, scope, comment)
}

func (c *Client) approve(ctx context.Context, id string, body map[string]string, scope, comment string) (*Action, error) {
	if scope != "" {
		body["scope"] = scope
	}
	if comment != "" {
		body["comment"] = comment
	}
	var a Action
	if _, err := c.Do(ctx, http.MethodPost, "/api/v1/actions/"+url.PathEscape(id)+"/approve", body, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Logout ends the session of the user token c holds.
func (c *Client) Logout(ctx context.Context) error {
	_, err := c.Do(ctx, http.MethodPost, "/api/v1/auth/logout", nil, nil)
	return err
}
