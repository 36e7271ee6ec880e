package client

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// LoginResponse is the answer to Login.
type LoginResponse struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	User      struct {
		Username string   `json:"username"`
		Roles    []string `json:"roles"`
	} `json:"user"`
}

// Login exchanges a username and password for a user token and returns a
// client that uses it.
func (c *Client) Login(ctx context.Context, username, password string) (*Client, *LoginResponse, error) {
	var lr LoginResponse
	body := map[string]string{"username": username, "password": password}
	if _, err := c.WithToken("").Do(ctx, http.MethodPost, "/api/v1/auth/login", body, &lr); err != nil {
		return nil, nil, err
	}
	return c.WithToken(lr.Token), &lr, nil
}

// CreateUser creates a user (admin).
func (c *Client) CreateUser(ctx context.Context, username, password string, roles ...string) error {
	_, err := c.Do(ctx, http.MethodPost, "/api/v1/users", map[string]any{"username": username, "password": password, "roles": roles}, nil)
	return err
}

// CreateAgent registers an agent (admin).
func (c *Client) CreateAgent(ctx context.Context, id, name string) error {
	_, err := c.Do(ctx, http.MethodPost, "/api/v1/agents", map[string]string{"id": id, "name": name}, nil)
	return err
}

// AgentToken is an issued agent token.
type AgentToken struct {
	Token     string    `json:"token"`
	TokenID   string    `json:"token_id"`
	ExpiresAt time.Time `json:"expires_at"`
	// Targets are a worker token's targets (workspace:NAME, repo:NAME).
	Targets []string `json:"targets,omitempty"`
}

// IssueAgentToken issues a token for an agent (admin); ttl 0 = default.
func (c *Client) IssueAgentToken(ctx context.Context, agentID string, ttl time.Duration) (*AgentToken, error) {
	var t AgentToken
	body := map[string]any{}
	if ttl > 0 {
		body["ttl_seconds"] = int64(ttl / time.Second)
	}
	if _, err := c.Do(ctx, http.MethodPost, "/api/v1/agents/"+url.PathEscape(agentID)+"/tokens", body, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// RevokeToken revokes a token (admin).
func (c *Client) RevokeToken(ctx context.Context, tokenID string) error {
	_, err := c.Do(ctx, http.MethodDelete, "/api/v1/tokens/"+url.PathEscape(tokenID), nil, nil)
	return err
}

// PolicyVersion is a stored policy version.
type PolicyVersion struct {
	Scope     string         `json:"scope"`
	Version   int            `json:"version"`
	Document  map[string]any `json:"document"`
	CreatedBy string         `json:"created_by"`
	CreatedAt time.Time      `json:"created_at"`
	// Overrides lists, for an agent's policy, the fleet settings it overrides.
	Overrides []Override `json:"overrides,omitempty"`
}

// Override is a fleet setting an agent's policy overrides.
type Override struct {
	Setting    string `json:"setting"`
	FleetValue string `json:"fleet_value"`
	AgentValue string `json:"agent_value"`
	// Loosens is true when the agent's value is looser than the fleet's.
	Loosens bool `json:"loosens,omitempty"`
}

// PutAgentPolicy writes an agent's policy document (admin).
func (c *Client) PutAgentPolicy(ctx context.Context, agentID string, doc any) (*PolicyVersion, error) {
	var pv PolicyVersion
	if _, err := c.Do(ctx, http.MethodPut, "/api/v1/agents/"+url.PathEscape(agentID)+"/policy", doc, &pv); err != nil {
		return nil, err
	}
	return &pv, nil
}

// PutAgentPolicyIf writes an agent's policy only if version is still its
// current version (0: it has none yet), compared by the server in the
// transaction that writes. A stale version fails with a 412 *Error whose
// Details["current_version"] is the current one.
func (c *Client) PutAgentPolicyIf(ctx context.Context, agentID string, doc any, version int) (*PolicyVersion, error) {
	return c.putPolicyIf(ctx, "/api/v1/agents/"+url.PathEscape(agentID)+"/policy", doc, version)
}

// PutFleetPolicyIf is PutAgentPolicyIf for the fleet policy.
func (c *Client) PutFleetPolicyIf(ctx context.Context, doc any, version int) (*PolicyVersion, error) {
	return c.putPolicyIf(ctx, "/api/v1/fleet/policy", doc, version)
}

func (c *Client) putPolicyIf(ctx context.Context, path string, doc any, version int) (*PolicyVersion, error) {
	var pv PolicyVersion
	h := http.Header{"If-Match": {strconv.Quote(strconv.Itoa(version))}}
	if _, err := c.do(ctx, http.MethodPut, path, h, doc, &pv); err != nil {
		return nil, err
	}
	return &pv, nil
}

// AgentPolicy returns an agent's current policy (404 when it has none).
func (c *Client) AgentPolicy(ctx context.Context, agentID string) (*PolicyVersion, error) {
	var pv PolicyVersion
	if _, err := c.Do(ctx, http.MethodGet, "/api/v1/agents/"+url.PathEscape(agentID)+"/policy", nil, &pv); err != nil {
		return nil, err
	}
	return &pv, nil
}

// FleetPolicy returns the current fleet policy (version 0 when none was
// written).
func (c *Client) FleetPolicy(ctx context.Context) (*PolicyVersion, error) {
	var pv PolicyVersion
	if _, err := c.Do(ctx, http.MethodGet, "/api/v1/fleet/policy", nil, &pv); err != nil {
		return nil, err
	}
	return &pv, nil
}

// PutFleetPolicy writes the fleet policy (admin).
func (c *Client) PutFleetPolicy(ctx context.Context, doc any) (*PolicyVersion, error) {
	var pv PolicyVersion
	if _, err := c.Do(ctx, http.MethodPut, "/api/v1/fleet/policy", doc, &pv); err != nil {
		return nil, err
	}
	return &pv, nil
}

// Approve approves a pending action (reviewer); scope "" means once.
func (c *Client) Approve(ctx context.Context, id, confirmation, scope string) (*Action, error) {
	return c.ApproveWith(ctx, id, confirmation, scope, "")
}

// Deny denies a pending action (reviewer).
func (c *Client) Deny(ctx context.Context, id, reason string) (*Action, error) {
	var a Action
	if _, err := c.Do(ctx, http.MethodPost, "/api/v1/actions/"+url.PathEscape(id)+"/deny", map[string]string{"reason": reason}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// ActionPage is one page of a listing.
type ActionPage struct {
	Actions    []Action `json:"actions"`
	NextCursor string   `json:"next_cursor"`
}

// ListActions lists actions (reviewer, auditor) with query filters such as
// status, agent, risk, limit and cursor.
func (c *Client) ListActions(ctx context.Context, query url.Values) (*ActionPage, error) {
	var p ActionPage
	if _, err := c.Do(ctx, http.MethodGet, "/api/v1/actions?"+query.Encode(), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Event is one audit event.
type Event struct {
	ID             int64          `json:"id"`
	At             time.Time      `json:"at"`
	Kind           string         `json:"kind"`
	Actor          string         `json:"actor"`
	AgentID        string         `json:"agent_id"`
	AgentInstance  string         `json:"agent_instance"`
	ConversationID string         `json:"conversation_id"`
	StepID         string         `json:"step_id"`
	CorrelationID  string         `json:"correlation_id"`
	ActionID       string         `json:"action_id"`
	Tool           string         `json:"tool"`
	Args           map[string]any `json:"args"`
	Risk           map[string]any `json:"risk"`
	Decision       map[string]any `json:"decision"`
	Data           map[string]any `json:"data"`
}

// EventPage is one page of audit events.
type EventPage struct {
	Events     []Event `json:"events"`
	NextCursor string  `json:"next_cursor"`
}

// Audit queries the audit trail (auditor).
func (c *Client) Audit(ctx context.Context, query url.Values) (*EventPage, error) {
	var p EventPage
	if _, err := c.Do(ctx, http.MethodGet, "/api/v1/audit?"+query.Encode(), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Suspension is an agent's suspension state.
type Suspension struct {
	AgentID     string     `json:"agent_id"`
	Suspended   bool       `json:"suspended"`
	SuspendedAt *time.Time `json:"suspended_at,omitempty"`
	// Cancelled lists the actions a suspension stopped.
	Cancelled []string `json:"cancelled,omitempty"`
}

// SuspendAgent suspends an agent (admin): its submits are denied and its
// unfinished actions are cancelled, running ones stopped.
func (c *Client) SuspendAgent(ctx context.Context, agentID string) (*Suspension, error) {
	var out Suspension
	if _, err := c.Do(ctx, http.MethodPost, "/api/v1/agents/"+url.PathEscape(agentID)+"/suspend", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResumeAgent lifts an agent's suspension (admin).
func (c *Client) ResumeAgent(ctx context.Context, agentID string) (*Suspension, error) {
	var out Suspension
	if _, err := c.Do(ctx, http.MethodPost, "/api/v1/agents/"+url.PathEscape(agentID)+"/resume", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Stop cancels a pending, approved or running action (reviewer, admin);
// a running one's worker kills it on its next heartbeat.
func (c *Client) Stop(ctx context.Context, id, reason string) (*Action, error) {
	var a Action
	body := map[string]any{}
	if reason != "" {
		body["reason"] = reason
	}
	if _, err := c.Do(ctx, http.MethodPost, "/api/v1/actions/"+url.PathEscape(id)+"/cancel", body, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// UnmarshalJSON decodes a policy version with the numbers in its document
// kept exactly as the server holds them (json.Number), as Action does.
func (pv *PolicyVersion) UnmarshalJSON(b []byte) error {
	type plain PolicyVersion // without this method
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode((*plain)(pv))
}
