package hitl

import (
	"context"
	"maps"
	"time"

	"github.com/airlockhq/airlock/internal/audit"
)

// SourceGrant is the Decision.Source of a call a conversation grant
// approved.
const SourceGrant = "grant"

// GrantKey is what a conversation grant covers: later calls of the same
// agent, tool and conversation that the same rule of the same policy
// version sends to review.
type GrantKey struct {
	AgentID        string `json:"agent_id"`
	Tool           string `json:"tool"`
	ConversationID string `json:"conversation_id"`
	// Source is the policy the rule belongs to: agent or fleet.
	Source        string `json:"source"`
	RuleID        string `json:"rule_id"`
	PolicyVersion int    `json:"policy_version"`
}

// GrantKeyOf returns the key of a grant made by approving a, and of the
// grant that would cover a.
func GrantKeyOf(a *Action) GrantKey {
	return GrantKey{AgentID: a.AgentID, Tool: a.Tool, ConversationID: a.ConversationID,
		Source: a.Decision.Source, RuleID: a.Decision.RuleID, PolicyVersion: a.Decision.PolicyVersion}
}

// Grant is a conversation-scoped approval. Its JSON form is part of the API.
type Grant struct {
	ID string `json:"id"`
	GrantKey
	// ActionID is the approved action that made the grant.
	ActionID  string     `json:"action_id"`
	GrantedBy string     `json:"granted_by"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at"`
	RevokedBy string     `json:"revoked_by,omitempty"`
}

func (g *Grant) auditData() map[string]any {
	return map[string]any{"grant_id": g.ID, "rule_id": g.RuleID, "source": g.Source,
		"policy_version": g.PolicyVersion, "expires_at": g.ExpiresAt}
}

// GrantFilter selects grants; empty fields select all.
type GrantFilter struct {
	AgentID        string
	ConversationID string
	// All includes revoked and expired grants.
	All bool
}

// Grants lists the active conversation grants (all with f.All).
func (s *Service) Grants(ctx context.Context, f GrantFilter) ([]Grant, error) {
	if err := checkID("agent", f.AgentID); err != nil {
		return nil, err
	}
	if err := checkID("conversation_id", f.ConversationID); err != nil {
		return nil, err
	}
	return s.store.Grants(ctx, f)
}

// RevokeGrant ends a conversation grant at once: later calls go to a
// reviewer again. The revocation is audited.
func (s *Service) RevokeGrant(ctx context.Context, id, actor string) (Grant, error) {
	return s.store.RevokeGrant(ctx, id, actor, func(g Grant) audit.Event { return GrantRevoked(g, actor, nil) })
}

// GrantRevoked is the grant.revoked audit event of g revoked by actor;
// extra adds to its data (why: action_stopped, agent_suspended,
// token_revoked).
func GrantRevoked(g Grant, actor string, extra map[string]any) audit.Event {
	data := map[string]any{"grant_id": g.ID, "rule_id": g.RuleID, "source": g.Source, "policy_version": g.PolicyVersion}
	maps.Copy(data, extra)
	return audit.Event{Kind: audit.KindGrantRevoked, Actor: actor, AgentID: g.AgentID,
		ConversationID: g.ConversationID, ActionID: g.ActionID, Tool: g.Tool, Data: data}
}
