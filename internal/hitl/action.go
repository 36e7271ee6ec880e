// Package hitl is the human-in-the-loop core: the action an agent submits,
// its lifecycle from pending to a final status, approvals with quorum and
// scope, confirmation phrases and expiry. It decides; internal/store persists
// each transition atomically with its audit event.
package hitl

import (
	"encoding/json"
	"fmt"
	"strings"
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

// transitions lists, for each status, the statuses it may move to. It is
// the only place a transition is allowed: the service checks every change
// it makes against it (mutate), and every status change the store makes on
// its own (jobs, expiry, stopping an agent's work) takes its from-statuses
// from the Moves below, which are derived from and checked against it.
var transitions = map[Status][]Status{
	StatusPending: {StatusApproved, StatusDenied, StatusExpired, StatusCancelled},
	// succeeded|failed: an agent reports the result of a tool it runs itself.
	// cancelled: a reviewer or admin stops it, or its agent is stopped.
	StatusApproved: {StatusRunning, StatusSucceeded, StatusFailed, StatusCancelled},
	// approved again: a retryable job whose lease expired (requeue);
	// failed also when interrupted; cancelled: stopped while it runs.
	StatusRunning:   {StatusSucceeded, StatusFailed, StatusApproved, StatusCancelled},
	StatusDenied:    nil,
	StatusExpired:   nil,
	StatusCancelled: nil,
	StatusSucceeded: nil,
	StatusFailed:    nil,
}

// Statuses returns every status, in lifecycle order.
func Statuses() []Status {
	return []Status{StatusPending, StatusApproved, StatusDenied, StatusExpired, StatusCancelled,
		StatusRunning, StatusSucceeded, StatusFailed}
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

// Move is a status change the store makes with a compare-and-set in SQL:
// an action in one of From moves to To. Every Move is built by newMove,
// which refuses a pair the transitions table does not allow, so SQL never
// decides on its own which transition is legal.
type Move struct {
	From []Status
	To   Status
}

// FromStrings returns m.From as strings (a text[] query parameter).
func (m Move) FromStrings() []string {
	out := make([]string, len(m.From))
	for i, s := range m.From {
		out[i] = string(s)
	}
	return out
}

// newMove returns the move to `to` from each of from; with no from, from
// every status the table lets reach `to`. A pair the table does not allow
// is a programming error: it panics at package initialisation.
func newMove(to Status, from ...Status) Move {
	if len(from) == 0 {
		for _, s := range Statuses() {
			if CanTransition(s, to) {
				from = append(from, s)
			}
		}
	}
	for _, f := range from {
		if !CanTransition(f, to) {
			panic("hitl: transition " + string(f) + " -> " + string(to) + " is not in the table")
		}
	}
	return Move{From: from, To: to}
}

// The moves the store makes in SQL (internal/store/jobs.go, actions.go).
var (
	// MoveLease: a worker leases an approved action's job.
	MoveLease = newMove(StatusRunning, StatusApproved)
	// MoveSucceed and MoveFail: a worker completes the job it runs.
	MoveSucceed = newMove(StatusSucceeded, StatusRunning)
	MoveFail    = newMove(StatusFailed, StatusRunning)
	// MoveRequeue: a retryable job's lease ran out; it runs again.
	MoveRequeue = newMove(StatusApproved, StatusRunning)
	// MoveInterrupt: a job's lease ran out with no attempts left.
	MoveInterrupt = newMove(StatusFailed, StatusRunning)
	// MoveExpire: nobody decided a pending action in time.
	MoveExpire = newMove(StatusExpired, StatusPending)
	// MoveStop: an action is stopped (its agent suspended, its token
	// revoked, a reviewer's cancel): from every status that may be cancelled.
	MoveStop = newMove(StatusCancelled)
)

// CompleteMove returns the move a worker's completion makes.
func CompleteMove(to Status) (Move, bool) {
	switch to {
	case StatusSucceeded:
		return MoveSucceed, true
	case StatusFailed:
		return MoveFail, true
	}
	return Move{}, false
}

// checkTransition refuses a change the table does not allow.
func checkTransition(from, to Status) error {
	if from == to || CanTransition(from, to) {
		return nil
	}
	return fmt.Errorf("hitl: transition %s -> %s is not allowed", from, to)
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
	Source        string `json:"source"`         // agent | fleet | default | risk | grant | validator | suspended
	Reason        string `json:"reason"`
	// Gate, when set, is what a call still waits for (GateCommands: an
	// approved command set; GatePreview: its impact preview).
	Gate string `json:"gate,omitempty"`
	// Rules are the approve rules that sent the call to review when more
	// than one did (the first is RuleID's), each with the reviewers it
	// names: every one holds it. Absent when one rule (or none) did, as
	// in every decision stored before it was recorded.
	Rules []HeldRule `json:"rules,omitempty"`
}

// HeldRule is one of the approve rules that sent a call to review.
type HeldRule struct {
	// Source is the policy the rule belongs to: agent or fleet.
	Source string `json:"source"`
	RuleID string `json:"rule_id"`
	// Reviewers are the groups the rule names (empty: it names none).
	Reviewers []string `json:"reviewers,omitempty"`
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
	// PreviewSHA256 names the preview as stored (ShownPin), for reviewers
	// while pending: an approval that sends it back approves only that
	// preview (ApproveRequest.Shown).
	PreviewSHA256 string `json:"preview_sha256,omitempty"`

	// Phrase is the confirmation phrase, kept even when not shown.
	Phrase string `json:"-"`
	// IdempotencyKey and RequestHash detect replays of a submit.
	IdempotencyKey string `json:"-"`
	RequestHash    []byte `json:"-"`
	// Version increases with every change; updates compare-and-set on it.
	Version int `json:"-"`
	// TokenID is the token the action was submitted with ("" before it was
	// recorded): revoking it stops the action.
	TokenID string `json:"-"`
}

// ApprovedBy reports whether user has already approved a.
func (a *Action) ApprovedBy(user string) bool {
	for _, ap := range a.Approvals {
		if strings.EqualFold(ap.By, user) {
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
// shown while the action is pending, and the preview with its status.
func (a Action) ForReviewer() Action {
	if a.Status == StatusPending {
		a.ConfirmationPhrase = a.Phrase
		a.PreviewSHA256 = ShownPin(&a) // of the preview as stored
	}
	return a.withPreviewStatus()
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
