// Package audit defines Airlock's audit trail: the events every state change
// writes in the same transaction as the change, the redaction applied to
// anything an agent sent before it is stored, and the filters auditors query
// the trail with. Storage lives in internal/store.
package audit

import (
	"encoding/json"
	"time"
)

// Kind names what an event records.
type Kind string

// The event kinds Airlock writes.
const (
	KindActionSubmitted   Kind = "action.submitted"      // an agent's request and the policy decision made on it
	KindActionApproval    Kind = "action.approval"       // one reviewer's approval towards a quorum not yet met
	KindPhraseRefused     Kind = "action.phrase_refused" // a reviewer typed a wrong confirmation phrase
	KindActionApproved    Kind = "action.approved"       // the approval that decided the action
	KindActionDenied      Kind = "action.denied"         // a reviewer denied the action
	KindActionExpired     Kind = "action.expired"        // nobody decided before expires_at
	KindActionCancelled   Kind = "action.cancelled"      // the agent withdrew the request
	KindActionResult      Kind = "action.result"         // the executor reported the outcome
	KindActionRunning     Kind = "action.running"        // a worker leased the action's job
	KindActionPreviewing  Kind = "action.previewing"     // a worker leased a pending merge's preview job
	KindActionPreview     Kind = "action.preview"        // a pending merge's preview (commit and diff) was recorded
	KindActionRequeued    Kind = "action.requeued"       // a retryable job's lease expired; it runs again
	KindActionInterrupted Kind = "action.interrupted"    // a job's lease expired with no attempts left: failed
	KindPolicyUpdated     Kind = "policy.updated"        // a new policy version was written
	KindTokenIssued       Kind = "token.issued"          // an agent or worker token was issued
	KindTokenRevoked      Kind = "token.revoked"         // a token was revoked (or a session logged out)
	KindLogin             Kind = "auth.login"            // a user logged in
	KindLoginFailed       Kind = "auth.login_failed"
	KindUserCreated       Kind = "user.created"
	KindUserUpdated       Kind = "user.updated" // roles, disabled or password changed (data says which)
	KindUserDeleted       Kind = "user.deleted" // the user is a tombstone; its sessions ended
	KindAgentCreated      Kind = "agent.created"
	KindGrantCreated      Kind = "grant.created" // a conversation-scoped approval
	KindGrantRevoked      Kind = "grant.revoked" // a conversation grant ended by a reviewer or admin
)

// Event kinds of stopping work: an action.cancelled event is also written
// when a reviewer or admin stops an action, or a suspension or a revoked
// token does (actor and data.reason say which).
const (
	KindAgentSuspended Kind = "agent.suspended" // an admin suspended the agent: its work is stopped
	KindAgentResumed   Kind = "agent.resumed"   // an admin lifted the suspension
)

// Event is one audit record. Args are always redacted before an Event is
// built (see Redact).
type Event struct {
	ID             int64           `json:"id"`
	At             time.Time       `json:"at"`
	Kind           Kind            `json:"kind"`
	Actor          string          `json:"actor"`
	AgentID        string          `json:"agent_id,omitempty"`
	AgentInstance  string          `json:"agent_instance,omitempty"`
	ConversationID string          `json:"conversation_id,omitempty"`
	StepID         string          `json:"step_id,omitempty"`
	CorrelationID  string          `json:"correlation_id,omitempty"`
	ActionID       string          `json:"action_id,omitempty"`
	Tool           string          `json:"tool,omitempty"`
	Args           map[string]any  `json:"args,omitempty"`
	Risk           json.RawMessage `json:"risk,omitempty"`
	Decision       json.RawMessage `json:"decision,omitempty"`
	Data           map[string]any  `json:"data,omitempty"`
}

// Filter selects events for an auditor's query. Zero fields do not filter.
type Filter struct {
	CorrelationID  string
	AgentID        string
	ConversationID string
	ActionID       string
	Kind           Kind
	Since, Until   time.Time
	// After is the cursor: only events with ID greater than After.
	After int64
	Limit int
}

// MaxLimit bounds one page of events.
const MaxLimit = 1000

// DefaultLimit is the page size when none is asked for.
const DefaultLimit = 100

// Event kinds of the MCP server registry (data: name, version and, but for
// a deletion, the registration with env values withheld).
const (
	KindMCPServerCreated Kind = "mcp_server.created" // a registration's first version (or first after a deletion)
	KindMCPServerUpdated Kind = "mcp_server.updated" // a registration's next version
	KindMCPServerDeleted Kind = "mcp_server.deleted" // a tombstone version: the name is no longer reachable
)

// Event kinds of notifications, escalation and reviewer groups (issue 13).
const (
	// KindActionEscalated: an escalation step (or the fleet's reminder) of
	// a pending action fired (data: rule_id, step, notify, reviewers,
	// reminder).
	KindActionEscalated     Kind = "action.escalated"
	KindNotifyTargetCreated Kind = "notify_target.created" // data: the target, secret redacted
	KindNotifyTargetDeleted Kind = "notify_target.deleted"
	KindGroupCreated        Kind = "group.created" // data: name, members
	KindGroupUpdated        Kind = "group.updated" // data: name, members (and source for an identity provider's sync)
	KindGroupDeleted        Kind = "group.deleted"
)
