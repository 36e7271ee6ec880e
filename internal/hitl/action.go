// Package hitl is the human-in-the-loop core: the action an agent submits,
// its lifecycle from pending to a final status, approvals with quorum and
// scope, confirmation phrases and expiry. It decides; internal/store persists
// each transition atomically with its audit event.
package hitl

import (
	"encoding/json"
	"time"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/risk"
)

// Status is where an action is in its lifecycle.
type Status string

// The statuses of an action (DESIGN.md "Action lifecycle").
const (
	StatusPending   Status = "pending"
	StatusApproved  Status = "approved"
	StatusDenied    Status = "denied"
	StatusExpired   Status = "expired"
	StatusCancelled Status = "cancelled"
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
)

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	_, ok := transitions[s]
	return ok
}

// transitions lists, for each status, the statuses it may move to.
var transitions = map[Status][]Status{
	StatusPending:   {StatusApproved, StatusDenied, StatusExpired, StatusCancelled},
	StatusApproved:  {StatusRunning, StatusSucceeded, StatusFailed},
	StatusRunning:   {StatusSucceeded, StatusFailed, StatusApproved}, // approved again: a retryable job whose lease expired
	StatusDenied:    nil,
	StatusExpired:   nil,
	StatusCancelled: nil,
	StatusSucceeded: nil,
	StatusFailed:    nil,
}

// CanTransition reports whether an action may move from one status to another.
func CanTransition(from, to Status) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Final reports whether s is a status nothing leaves.
func (s Status) Final() bool { return s.Valid() && len(transitions[s]) == 0 }

// Decided reports whether a decision has been made (anything but pending).
func (s Status) Decided() bool { return s != StatusPending }

// Decision records who or what decided an action and why.
type Decision struct {
	Effect        string `json:"effect"`         // allow | approve | deny
	By            string `json:"by"`             // "policy" or the reviewer's username
	RuleID        string `json:"rule_id"`        // the policy rule that decided or sent it to review
	PolicyVersion int    `json:"policy_version"` // version of the policy that rule belongs to
	Source        string `json:"source"`         // agent | fleet | default | risk | grant
	Reason        string `json:"reason"`
}

// Approval is one reviewer's approval.
type Approval struct {
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Scope   Scope     `json:"scope"`
	Comment string    `json:"comment,omitempty"`
}

// Action is a tool call an agent asked to make. Its JSON form is the action
// object of the HTTP API.
type Action struct {
	ID                 string          `json:"id"`
	AgentID            string          `json:"agent_id"`
	AgentInstance      string          `json:"agent_instance"`
	ConversationID     string          `json:"conversation_id"`
	StepID             string          `json:"step_id"`
	CorrelationID      string          `json:"correlation_id"`
	Tool               string          `json:"tool"`
	Args               map[string]any  `json:"args"`
	Reason             string          `json:"reason"`
	Status             Status          `json:"status"`
	Risk               risk.Assessment `json:"risk"`
	Decision           Decision        `json:"decision"`
	Approvals          []Approval      `json:"approvals"`
	RequiredApprovals  int             `json:"required_approvals"`
	ConfirmationPhrase string          `json:"confirmation_phrase,omitempty"`
	ExpiresAt          *time.Time      `json:"expires_at"`
	CreatedAt          time.Time       `json:"created_at"`
	UpdatedAt          time.Time       `json:"updated_at"`
	Result             json.RawMessage `json:"result,omitempty"`
	Preview            json.RawMessage `json:"preview,omitempty"`

	// Phrase is the confirmation phrase, kept even when not shown.
	Phrase string `json:"-"`
	// IdempotencyKey and RequestHash detect replays of a submit.
	IdempotencyKey string `json:"-"`
	RequestHash    []byte `json:"-"`
	// Version increases with every change; updates compare-and-set on it.
	Version int `json:"-"`
}

// ApprovedBy reports whether user has already approved a.
func (a *Action) ApprovedBy(user string) bool {
	for _, ap := range a.Approvals {
		if ap.By == user {
			return true
		}
	}
	return false
}

// Expired reports whether a pending action's time is up at now.
func (a *Action) Expired(now time.Time) bool {
	return a.Status == StatusPending && a.ExpiresAt != nil && !now.Before(*a.ExpiresAt)
}

// AuditEvent returns the audit event recording kind about a, by actor. The
// args are already redacted (actions store redacted args).
func (a *Action) AuditEvent(kind audit.Kind, actor string, data map[string]any) audit.Event {
	riskJSON, _ := json.Marshal(a.Risk)
	decisionJSON, _ := json.Marshal(a.Decision)
	return audit.Event{
		Kind: kind, Actor: actor, AgentID: a.AgentID, AgentInstance: a.AgentInstance,
		ConversationID: a.ConversationID, StepID: a.StepID, CorrelationID: a.CorrelationID,
		ActionID: a.ID, Tool: a.Tool, Args: a.Args, Risk: riskJSON, Decision: decisionJSON, Data: data,
	}
}

// ForReviewer returns the view of a for reviewers: the confirmation phrase is
// shown while the action is pending.
func (a Action) ForReviewer() Action {
	if a.Status == StatusPending {
		a.ConfirmationPhrase = a.Phrase
	}
	return a
}

// Scope is how far an approval reaches.
type Scope string

// Approval scopes (DESIGN.md "Policy").
const (
	ScopeOnce         Scope = "once"
	ScopeConversation Scope = "conversation"
	ScopeAlways       Scope = "always"
)

// ConversationGrantTTL is how long a conversation-scoped approval lasts.
const ConversationGrantTTL = 24 * time.Hour
