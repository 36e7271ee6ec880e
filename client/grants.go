package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Grant is a conversation-scoped approval: later calls of the same agent,
// tool and conversation that the same rule of the same policy version
// sends to review are approved without asking, until it expires or is
// revoked.
type Grant struct {
	ID             string     `json:"id"`
	AgentID        string     `json:"agent_id"`
	Tool           string     `json:"tool"`
	ConversationID string     `json:"conversation_id"`
	Source         string     `json:"source"`
	RuleID         string     `json:"rule_id"`
	PolicyVersion  int        `json:"policy_version"`
	ActionID       string     `json:"action_id"`
	GrantedBy      string     `json:"granted_by"`
	CreatedAt      time.Time  `json:"created_at"`
	ExpiresAt      time.Time  `json:"expires_at"`
	RevokedAt      *time.Time `json:"revoked_at"`
	RevokedBy      string     `json:"revoked_by,omitempty"`
}

// Grants lists the active grants (reviewer, admin), filtered by agent and
// conversation when they are not empty.
func (c *Client) Grants(ctx context.Context, agentID, conversationID string) ([]Grant, error) {
	q := url.Values{}
	if agentID != "" {
		q.Set("agent", agentID)
	}
	if conversationID != "" {
		q.Set("conversation_id", conversationID)
	}
	var out struct {
		Grants []Grant `json:"grants"`
	}
	if _, err := c.Do(ctx, http.MethodGet, "/api/v1/grants?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return out.Grants, nil
}

// RevokeGrant ends a grant at once (reviewer, admin).
func (c *Client) RevokeGrant(ctx context.Context, id string) error {
	_, err := c.Do(ctx, http.MethodDelete, "/api/v1/grants/"+url.PathEscape(id), nil, nil)
	return err
}
