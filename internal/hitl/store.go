package hitl

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/policy"
)

// Errors a Store returns that the service acts on.
var (
	// ErrDuplicateKey: the agent already submitted with this idempotency key.
	ErrDuplicateKey = errors.New("hitl: idempotency key already used")
	// ErrPhraseTaken: another pending action has the same confirmation phrase.
	ErrPhraseTaken = errors.New("hitl: confirmation phrase in use")
	// ErrStale: the action changed since it was read (compare-and-set lost).
	ErrStale = errors.New("hitl: action changed concurrently")
	// ErrTooManyPending: the agent has settings.max_pending pending actions
	// already; nothing was written.
	ErrTooManyPending = errors.New("hitl: too many pending actions")
	// ErrPolicyMoved: the agent policy an "always" approval was computed on
	// got a newer version before the approval was written; nothing was
	// written, and the approval is computed again on the new version.
	ErrPolicyMoved = errors.New("hitl: agent policy moved during the approval")
	// ErrPolicyChanged: a cached policy the submit was decided on is no
	// longer current; the decision has to be made again.
	ErrPolicyChanged = errors.New("hitl: policy changed during the decision")
	// ErrGrantFound: the submit was made pending on the assumption that no
	// conversation grant covers it, and one does; it has to be decided again.
	ErrGrantFound = errors.New("hitl: a conversation grant covers the call")
	// ErrGrantRevoked: the conversation grant that approved the submit was
	// revoked (or ran out, or was replaced) before it was stored; it has to
	// be decided again.
	ErrGrantRevoked = errors.New("hitl: the conversation grant that approved the call is no longer active")
	// ErrAgentSuspended: the agent is suspended; only a denial is stored.
	ErrAgentSuspended = errors.New("hitl: the agent is suspended")
)

// Guard is what a submit's decision rested on that can change while it is
// made: the insert re-checks it in the same statement, so a decision on a
// cached policy, or by a token revoked meanwhile, is never stored. Whether
// the agent is suspended is checked always, in the same statement: for a
// suspended agent only a denial is stored (else ErrAgentSuspended).
type Guard struct {
	// TokenID must still be active ("" for a caller without a token).
	TokenID string
	// Cached says the policy came from the instance's cache, read at some
	// time before the request: FleetVersion and AgentVersion must then
	// still be the current policy versions (0: none). A policy read during
	// the request needs no re-check.
	Cached       bool
	FleetVersion int
	AgentVersion int
	// NoGrant says the action is pending because no conversation grant was
	// assumed to cover it: no active grant for its agent, tool and
	// conversation may exist.
	NoGrant bool
	// Grant, when set, is the conversation grant that approved the call:
	// it must still be active (else ErrGrantRevoked).
	Grant string
	// Worktree, when set, is the worktree the call names: it must belong to
	// the calling agent (else apperr not_found, nothing written).
	Worktree string
	// Read says the call only looks (IsRead): plan mode does not deny it.
	// Any other call that is not a denial is stored only while plan mode
	// is off for the agent and the fleet (else ErrPlanMode).
	Read bool
	// MaxPending bounds the agent's pending actions: a pending action is
	// stored only while the agent has fewer (else ErrTooManyPending); 0
	// sets no bound (Submit always sets the one of the settings).
	MaxPending int
	// Budgets are the budgets matching the call: the statement records the
	// call's amount under each (for any action but a denial), and with
	// EnforceBudgets stores the action only when every one fits under
	// what it has left (else *BudgetExceededError), read under the
	// agent's lock so that concurrent calls never both fit.
	Budgets        []BudgetCharge
	EnforceBudgets bool
	// RatePerMinute bounds the agent's submits in any sliding minute (else
	// *RateExceededError); 0 sets no bound.
	RatePerMinute int
	// Route, when set (only when a rule or the fleet configured
	// notifications, reviewers or escalation), is stored with a pending
	// action in the same statement: its steps and the outbox rows of
	// its targets. Nil adds nothing to the statement.
	Route *Route
}

// Agent is what the service needs to know about the calling agent.
type Agent struct {
	ID   string
	Name string
}

// Effects are the side effects an update makes in the same transaction.
type Effects struct {
	// Grant, when set, is stored (replacing an older grant for the same key).
	Grant *Grant
	// Policy, when set, is written as the agent's next policy version; the
	// update fails with ErrPolicyMoved if the agent's policy moved past
	// BaseVersion.
	Policy *PolicyChange
	// Job, when set, is queued for a worker host.
	Job *Job
	// NotInPlanMode, when set, makes the update fail with ErrPlanMode if
	// plan mode is on for the action's agent or the fleet, read under a
	// lock that a concurrent switch waits for.
	NotInPlanMode bool
	// Budgets, when set, are the hard (effect deny) budgets the action's
	// approval must fit under: with the agent's pending count locked (as
	// budgeted submits lock it), what each spent in its window without
	// this action, plus its Amount, must not pass its Limit (else
	// *BudgetExceededError, nothing written); the action's amounts are
	// recorded under each budget it was not charged to at submit.
	Budgets []BudgetCharge
	// CommandSet, when set, records a command set approval (replacing an
	// older one of the same repository and hash).
	CommandSet *CommandSetApproval
	// Stop, when set, retires the action's jobs: a worker running one is
	// told to stop (its next heartbeat answers stop, with this reason).
	Stop string
	// RevokeGrants, when set, revokes every active conversation grant
	// whose ActionID is the action's (the grant its approval made, unless
	// a later approval replaced it), and those its Covering names, each
	// audited, as RevokeGrant revokes one.
	RevokeGrants *GrantRevocation
	// Decided marks the update that takes the action out of pending: every
	// target told of it gets an action.decided notification, in the same
	// transaction.
	Decided bool
}

// GrantRevocation is who revokes grants (Effects.RevokeGrants) and the
// grant.revoked audit event of each.
type GrantRevocation struct {
	Actor string
	Event func(Grant) audit.Event
	// Covering, when set, also revokes the active grants of its agent,
	// tool, conversation, rule and policy version, whatever their Source:
	// the grant that approved the action (or the one that replaced it),
	// which would approve the next call like it.
	Covering *GrantKey
}

// PolicyChange is a new agent policy version written by an "always" approval.
type PolicyChange struct {
	AgentID     string
	BaseVersion int
	Document    policy.Document
}

// ListFilter selects actions for the queue and for auditors.
type ListFilter struct {
	// Status is one status or several, comma-separated ("pending,approved");
	// List moves them to Statuses.
	Status   Status
	Statuses []Status
	AgentID  string
	Risk     string
	Tool     string // any spelling: List canonicalises it
	// DecidedBy: only actions this reviewer approved or denied.
	DecidedBy string
	// CanApprove: only pending actions this reviewer may approve now (not
	// yet approved by them, inside the rule's reviewer groups; the service
	// then applies the rest of ApprovalProblem).
	CanApprove string
	// Since and Until bound created_at: at or after Since, before Until
	// (zero: unbounded).
	Since, Until time.Time
	Limit        int
	Cursor       string
}

// Store persists actions. Every method that changes an action writes its
// audit events in the same transaction, or nothing at all.
type Store interface {
	PlanModeStore
	CommandSetStore

	// AgentPolicy returns the agent and its current compiled policy set.
	AgentPolicy(ctx context.Context, agentID string) (Agent, policy.Set, error)
	// CachedAgentPolicy is AgentPolicy as this instance last read it: no
	// round trip, possibly stale. Only decisions that InsertAction guards
	// may rest on it.
	CachedAgentPolicy(ctx context.Context, agentID string) (Agent, policy.Set, error)
	// AgentPolicyAt returns the agent's own policy at version (nil for 0,
	// none).
	AgentPolicyAt(ctx context.Context, agentID string, version int) (*policy.Compiled, error)
	// InsertAction stores a new action, its event and (for an approved
	// built-in action) its job if g still holds. ErrDuplicateKey,
	// ErrPhraseTaken, ErrPolicyChanged, ErrGrantFound and apperr
	// unauthorized (the token is no longer active) leave nothing written.
	InsertAction(ctx context.Context, a *Action, job *Job, ev audit.Event, g Guard) error
	// ActionByIdempotencyKey returns the action an agent submitted with key.
	ActionByIdempotencyKey(ctx context.Context, agentID, key string) (*Action, error)
	// Action returns one action; apperr not_found when there is none.
	Action(ctx context.Context, id string) (*Action, error)
	// UpdateAction writes a if its stored version is still prevVersion, with
	// fx and events, atomically; ErrStale when it lost the race.
	UpdateAction(ctx context.Context, a *Action, prevVersion int, fx Effects, events ...audit.Event) error
	// ListActions returns a page of actions, newest first, and the cursor of
	// the next page ("" at the end).
	ListActions(ctx context.Context, f ListFilter) ([]*Action, string, error)
	// ExpireDue moves up to limit pending actions whose expires_at has passed
	// to expired, each with its audit event, and returns them. Safe to run
	// from several instances at once.
	ExpireDue(ctx context.Context, limit int) ([]*Action, error)
	// ActiveGrant returns the id of the active conversation grant with key,
	// or "" when there is none.
	ActiveGrant(ctx context.Context, key GrantKey) (string, error)
	// PhraseFailures returns how many wrong confirmation phrases reviewer
	// typed for an action, and when the last one was.
	PhraseFailures(ctx context.Context, actionID, reviewer string) (int, time.Time, error)
	// RecordPhraseFailure counts one more wrong phrase of reviewer for
	// actionID and writes the audit event ev makes of the new count, in one
	// transaction; it returns the new count.
	RecordPhraseFailure(ctx context.Context, actionID, reviewer string, at time.Time, ev func(failures int) audit.Event) (int, error)
	// Answerable returns who answers for an action of agentID submitted
	// with tokenID: the agent's owner and the token's issuer ("" for what
	// is not known).
	Answerable(ctx context.Context, agentID, tokenID string) (owner, issuer string, err error)
	// Grants lists grants, newest first.
	Grants(ctx context.Context, f GrantFilter) ([]Grant, error)
	// RevokeGrant revokes an active grant with its audit event built by ev;
	// not_found when there is no active grant id.
	RevokeGrant(ctx context.Context, id, actor string, ev func(Grant) audit.Event) (Grant, error)
	// PolicyWrittenBy returns the agent policy version that the approval
	// of an action with scope always wrote (its policy.updated event), or
	// 0 when none did.
	PolicyWrittenBy(ctx context.Context, actionID string) (int, error)

	// ReviewerAccess says whether the action's rule restricts who may
	// approve it, the groups that may, and whether reviewer is in one.
	ReviewerAccess(ctx context.Context, actionID, reviewer string) (ReviewerAccess, error)
	// RouteSteps returns an action's route steps, by step.
	RouteSteps(ctx context.Context, actionID string) ([]RouteStep, error)
	// Deliveries returns an action's notifications with their attempts.
	Deliveries(ctx context.Context, actionID string) ([]Delivery, error)
	// FireEscalations fires up to limit due, unfired steps of pending
	// actions, each with its action.escalated audit event and outbox rows,
	// and returns the actions' ids. Safe from several instances at once.
	FireEscalations(ctx context.Context, limit int) ([]string, error)

	// LeaseJob claims a queued job of one of kinds for one of targets that
	// w's token (w.TokenID) may also serve, moving its action to running;
	// nil when there is none. Jobs of suspended agents, or of actions whose
	// token was revoked, are never leased.
	LeaseJob(ctx context.Context, w Worker, ttl time.Duration) (*Lease, error)
	// HeartbeatJob extends a current lease held by w's token; conflict when
	// it is not current. A lease whose action was stopped answers Stop.
	HeartbeatJob(ctx context.Context, id string, fence int64, w Worker, ttl time.Duration) (HeartbeatAnswer, error)
	// CompleteJob records a job's result under its current lease held by
	// w's token: the action makes move m with result, or, for a preview
	// job, stays pending with preview. A successful worktree.create records
	// the worktree as the agent's.
	CompleteJob(ctx context.Context, id string, fence int64, w Worker, m Move, result, preview json.RawMessage) (*Action, error)
	// JobAgent returns the agent whose action job id runs; apperr
	// not_found when there is no such job.
	JobAgent(ctx context.Context, id string) (string, error)
	// ExpireLeases requeues or fails jobs whose lease ran out.
	ExpireLeases(ctx context.Context, limit int) ([]*Action, error)

	// SuspendAgent marks the agent suspended and stops (MoveStop) every
	// action of it that is not final, each audited, in one transaction,
	// and returns them; not_found for an unknown agent.
	SuspendAgent(ctx context.Context, agentID, actor, reason string) ([]*Action, error)
	// ResumeAgent lifts a suspension; not_found for an unknown agent. In
	// the same transaction it stops (reason why) whatever is still open:
	// only a submit that raced the suspension can have left something, and
	// it must not run now.
	ResumeAgent(ctx context.Context, agentID, actor, why string) ([]*Action, error)
}
