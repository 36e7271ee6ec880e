package hitl

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
	"unicode"

	"github.com/google/uuid"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/eventbus"
	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/risk"
)

// Publisher announces a committed change to every server instance.
type Publisher interface {
	Publish(ev eventbus.Event)
}

// Metrics observes the lifecycle; a nil Metrics is allowed.
type Metrics interface {
	// Submitted counts a new action by tool, policy effect and risk level.
	Submitted(a *Action)
	// Finished counts an action reaching a status by tool; latency is the
	// time from submission to a human or timeout decision (0 if none).
	Finished(a *Action, latency time.Duration)
}

// Service runs the action lifecycle.
type Service struct {
	store   Store
	bus     *eventbus.Bus
	pub     Publisher
	metrics Metrics
	log     *slog.Logger
	now     func() time.Time

	refuse   func(ctx context.Context, tool string, args map[string]any) string
	leaseFor time.Duration

	draining  chan struct{}
	drainOnce sync.Once

	hard *hardPaths

	rateHolds rateHolds
}

// Config wires a Service.
type Config struct {
	Store     Store
	Bus       *eventbus.Bus // local waiters; required
	Publisher Publisher     // cross-instance fan-out; nil publishes locally only
	Metrics   Metrics
	Logger    *slog.Logger
	Now       func() time.Time
	// Refuse validates a built-in call (exec, worktree.*) at submit and
	// returns why it must not run, or "". A refused call is denied at once:
	// no reviewer ever sees it.
	Refuse func(ctx context.Context, tool string, args map[string]any) string
	// LeaseTTL is how long a worker's lease lasts without a heartbeat
	// (default DefaultLeaseTTL).
	LeaseTTL time.Duration
	// DenyPaths are deny entries beyond pathrule.BuiltinDeny that no
	// setting can remove: Airlock's own data directory and key files.
	DenyPaths []string
	// Home is the server's home directory, which "~" entries also cover
	// ("" for none).
	Home string
	// ExecOperands returns the paths an exec call names, as the sandbox's
	// command validators read them (false when they refuse the command).
	// Nil: only what the arguments alone show.
	ExecOperands func(args map[string]any) ([]PathOperand, bool)
}

// NewService returns a Service.
func NewService(c Config) *Service {
	s := &Service{store: c.Store, bus: c.Bus, pub: c.Publisher, metrics: c.Metrics, log: c.Logger, now: c.Now,
		refuse: c.Refuse, leaseFor: c.LeaseTTL, draining: make(chan struct{}),
		hard: &hardPaths{home: c.Home, extra: c.DenyPaths, operands: c.ExecOperands}}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// Drain makes every long poll, current and future, answer at once with the
// action as it is: the server is shutting down.
func (s *Service) Drain() { s.drainOnce.Do(func() { close(s.draining) }) }

// SubmitRequest is an agent's request to make a tool call.
type SubmitRequest struct {
	Tool           string         `json:"tool"`
	Args           map[string]any `json:"args"`
	AgentInstance  string         `json:"agent_instance,omitempty"`
	ConversationID string         `json:"conversation_id,omitempty"`
	StepID         string         `json:"step_id,omitempty"`
	CorrelationID  string         `json:"correlation_id,omitempty"`
	Reason         string         `json:"reason,omitempty"`
	IdempotencyKey string         `json:"idempotency_key,omitempty"`

	// BodyBytes, when positive, is the size of the encoded request the
	// surface decoded this from: args cannot be larger, which spares
	// measuring them when it is within the limit.
	BodyBytes int `json:"-"`
}

const (
	maxIDLen     = 128
	maxReasonLen = 4096
)

// Validate checks the request's shape and puts its tool name in canonical
// form (CanonicalToolName).
func (r *SubmitRequest) Validate() error {
	tool, err := CanonicalToolName(r.Tool)
	if err != nil {
		return err
	}
	r.Tool = tool
	if r.Args == nil {
		return apperr.Invalid("args is required and must be a JSON object")
	}
	for name, v := range map[string]string{
		"agent_instance": r.AgentInstance, "conversation_id": r.ConversationID, "step_id": r.StepID,
		"correlation_id": r.CorrelationID, "idempotency_key": r.IdempotencyKey,
	} {
		if err := checkID(name, v); err != nil {
			return err
		}
	}
	if len(r.Reason) > maxReasonLen {
		return apperr.Invalid("reason is longer than %d bytes", maxReasonLen)
	}
	return nil
}

func checkID(name, v string) error {
	if len(v) > maxIDLen {
		return apperr.Invalid("%s is longer than %d bytes", name, maxIDLen)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return apperr.Invalid("%s contains control characters", name)
		}
	}
	return nil
}

// checkArgsSize refuses args whose JSON encoding is larger than limit
// (settings.max_args_bytes).
func checkArgsSize(req *SubmitRequest, limit int) error {
	if req.BodyBytes > 0 && req.BodyBytes <= limit {
		return nil
	}
	b, err := json.Marshal(req.Args)
	if err != nil {
		return apperr.Invalid("args cannot be encoded: %v", err)
	}
	if len(b) > limit {
		return apperr.New(apperr.CodeTooLarge, "args are %d bytes as JSON; this agent's limit (settings.max_args_bytes) is %d", len(b), limit)
	}
	return nil
}

// hash identifies a request for idempotent replay: same key and same hash
// is the same request.
func (r *SubmitRequest) hash() []byte {
	b, _ := json.Marshal(r) // map keys are sorted: stable
	h := sha256.Sum256(b)
	return h[:]
}

// Submit decides on an agent's request and records it. It returns the
// action and whether it was created now (false: idempotent replay).
// tokenID, when not empty, is the caller's token: the statement that stores
// the action checks that it is still active.
//
// The decision is made on the agent's policy as this instance cached it,
// and stored only if those policy versions are still current when it is
// written (Guard). Otherwise it is made again on the policy read now,
// during this request, which needs no such check: a policy changed while
// the request is in flight may apply to it or not, as with any two
// concurrent calls, but a policy changed before it began always applies.
// A call that needs approval is likewise made pending on the assumption
// that no conversation grant covers it, which the insert checks; when one
// does, the grant is looked up and the call decided again.
func (s *Service) Submit(ctx context.Context, agentID, tokenID string, req SubmitRequest) (*Action, bool, error) {
	if err := s.RateHeld(agentID); err != nil {
		return nil, false, err
	}
	if err := req.Validate(); err != nil {
		return nil, false, err
	}
	if IsBuiltin(req.Tool) {
		if _, err := TargetOf(req.Tool, req.Args); err != nil {
			return nil, false, err
		}
	}
	agent, set, err := s.store.CachedAgentPolicy(ctx, agentID)
	if err != nil {
		return nil, false, err
	}
	// Each way an attempt can be refused moves to a setting that cannot
	// be refused that way: at most four attempts.
	try := submitTry{cached: true}
	var a *Action
	for {
		a, err = s.submit(ctx, agent, set, tokenID, try, req)
		if errors.Is(err, ErrPolicyChanged) && try.cached {
			if agent, set, err = s.store.AgentPolicy(ctx, agentID); err != nil {
				return nil, false, err
			}
			try.cached = false
			continue
		}
		if errors.Is(err, ErrGrantFound) && !try.lookUpGrant {
			try.lookUpGrant = true
			continue
		}
		if errors.Is(err, ErrGrantRevoked) && !try.noGrants {
			// The grant went while the call was decided: a reviewer decides.
			try.noGrants = true
			continue
		}
		break
	}
	switch {
	case errors.Is(err, ErrDuplicateKey):
		return s.replay(ctx, agent.ID, req)
	case err != nil:
		return nil, false, err
	}
	return a, true, nil
}

// submitTry is how one attempt of Submit decides.
type submitTry struct {
	cached      bool // the policy came from the cache: the insert re-checks its versions
	lookUpGrant bool // look conversation grants up (else assume none, and the insert checks)
	noGrants    bool // no grant approves the call (the one that did was revoked meanwhile)
}

// maxHiddenReasons bounds the risk reasons hiddenReasons lists.
const maxHiddenReasons = 5

// hiddenReasons are the risk reasons of what redaction hid of a call's
// args although it is not shaped like a secret (audit.Hidden).
func hiddenReasons(hidden []audit.Hidden) []string {
	out := make([]string, 0, min(len(hidden), maxHiddenReasons)+1)
	for i, h := range hidden {
		if i == maxHiddenReasons {
			out = append(out, fmt.Sprintf("%d more values hidden by redaction not listed", len(hidden)-i))
			break
		}
		out = append(out, h.Reason())
	}
	return out
}

// submit decides on req under set and stores the action if the guard its
// try implies holds.
func (s *Service) submit(ctx context.Context, agent Agent, set policy.Set, tokenID string, try submitTry, req SubmitRequest) (*Action, error) {
	settings := set.EffectiveSettings()
	if err := checkArgsSize(&req, settings.MaxArgsBytes); err != nil {
		return nil, err
	}
	stored, hidden := audit.RedactNoting(req.Args) // what is kept, and what plan mode judges (IsRead)
	guard := Guard{TokenID: tokenID, Cached: try.cached, Worktree: WorktreeOf(req.Tool, req.Args), Read: IsRead(req.Tool, stored)}
	var err error
	assessment := risk.Classify(req.Tool, req.Args, risk.Config{AmountCap: &settings.AmountCap, AllowedHosts: settings.AllowedHosts})
	if r := reasonInjection(req.Reason); r != "" {
		assessment.Reasons = append(slices.Clip(assessment.Reasons), r) // resultscan.go
	}
	if len(hidden) > 0 {
		// Reviewers read the stored args, but a hook's or the MCP
		// gateway's agent runs the call as it wrote it: what redaction
		// hid that no secret looks like makes the call at least high,
		// which escalates an allow by default.
		assessment = assessment.Raise(hiddenReasons(hidden), risk.High)
	}
	var d policy.Decision
	in := policy.Input{
		Tool:  req.Tool,
		Args:  req.Args,
		Agent: policy.AgentInfo{ID: agent.ID, Name: agent.Name},
		Risk:  policy.RiskInfo{Level: string(assessment.Level), Score: assessment.Score, Reasons: assessment.Reasons, Injection: assessment.Injection},
	}
	if hard := s.hard.check(req.Tool, req.Args, settings); hard != nil {
		// The hard tier, before policy, grants, "always" rules and any
		// reviewer: a denial no one can approve.
		d = policy.Decision{Effect: policy.Deny, Source: hard.source, Reason: hard.reason,
			PolicyVersion: set.Agent.Version(), FleetVersion: set.Fleet.Version()}
	} else {
		d = set.Decide(in)
	}

	now := s.now().UTC().Truncate(time.Microsecond)
	a := &Action{
		ID:                uuid.Must(uuid.NewV7()).String(),
		AgentID:           agent.ID,
		AgentInstance:     req.AgentInstance,
		ConversationID:    req.ConversationID,
		StepID:            req.StepID,
		CorrelationID:     req.CorrelationID,
		Tool:              req.Tool,
		Args:              stored,
		Reason:            req.Reason,
		Risk:              assessment,
		RequiredApprovals: 1,
		Approvals:         []Approval{},
		IdempotencyKey:    req.IdempotencyKey,
		TokenID:           tokenID,
		CreatedAt:         now,
		UpdatedAt:         now,
		Version:           1,
		Decision: Decision{
			Effect: string(d.Effect), By: "policy", RuleID: d.RuleID,
			PolicyVersion: d.PolicyVersion, Source: d.Source, Reason: d.Reason, Rules: heldRules(d),
		},
	}
	if d.Source == "fleet" {
		a.Decision.PolicyVersion = d.FleetVersion
	}
	if d.Effect == policy.Allow && req.Tool == ToolWorktreeMerge {
		// A merge always waits for a reviewer who has seen its diff.
		d.Effect = policy.Approve
		d.Approvals = max(d.Approvals, 1)
		if d.Timeout <= 0 {
			d.Timeout = settings.DefaultTimeout
		}
		a.Decision.Effect = string(policy.Approve)
		a.Decision.Reason += "; a merge always needs a reviewer"
	}
	gateRun(a, &d, settings)
	if d.Effect != policy.Deny && IsBuiltin(req.Tool) && s.refuse != nil {
		if why := s.refuse(ctx, req.Tool, req.Args); why != "" {
			d.Effect = policy.Deny
			a.Decision = Decision{Effect: string(policy.Deny), By: "policy", RuleID: d.RuleID,
				PolicyVersion: a.Decision.PolicyVersion, Source: "validator", Reason: why}
		}
	}
	budgetEffects, budgetDenied := applyBudgets(a, set, in, &guard)
	if budgetDenied {
		d.Effect = policy.Deny
	}
	if a.CorrelationID == "" {
		a.CorrelationID = a.ID
	}
	if req.IdempotencyKey != "" {
		a.RequestHash = req.hash() // only replays compare it
	}
	submitData := make(map[string]any, 8)
	switch d.Effect {
	case policy.Allow:
		a.Status = StatusApproved
	case policy.Deny:
		a.Status = StatusDenied
	case policy.Approve:
		a.Status = StatusPending
		a.RequiredApprovals = max(d.Approvals, 1)
		grantID := ""
		// A grant could cover the call only if its shape allows one. Then
		// the insert checks that none exists; only when one does is the
		// call looked at whole (its arguments scanned for targets that run
		// code later, which no grant may approve) and the grant used.
		if conversationShapeProblem(a) == "" && !try.noGrants {
			if !try.lookUpGrant {
				guard.NoGrant = true
			} else if conversationProblem(a) == "" {
				if grantID, err = s.store.ActiveGrant(ctx, GrantKeyOf(a)); err != nil {
					return nil, err
				}
			}
		}
		if grantID != "" {
			a.Status = StatusApproved
			a.RequiredApprovals = 1
			a.Decision = Decision{Effect: string(policy.Allow), By: "policy", RuleID: d.RuleID, PolicyVersion: a.Decision.PolicyVersion,
				Source: SourceGrant, Reason: "approved earlier for this conversation under the same rule (scope conversation, grant " + grantID + ")"}
			submitData["grant_id"] = grantID
			submitData["grant_source"] = d.Source
			guard.Grant = grantID // the insert checks it is still active
			break
		}
		exp := now.Add(d.Timeout)
		a.ExpiresAt = &exp
	default:
		// An effect the service does not know must never run: fail closed.
		a.Status = StatusDenied
		a.Decision.Effect = string(policy.Deny)
		a.Decision.Reason = fmt.Sprintf("unknown policy effect %q: denied", d.Effect)
	}

	submitData["status"], submitData["fleet_version"], submitData["agent_policy_version"] = a.Status, d.FleetVersion, d.PolicyVersion
	submitData["required_approvals"], submitData["expires_at"], submitData["reason"] = a.RequiredApprovals, a.ExpiresAt, a.Reason
	previewing := a.Status == StatusPending && wantsExecPreview(a, settings)
	if previewing {
		a.Decision.Gate = GatePreview // impact.go: approvable once its preview is ready
	}
	ev := a.AuditEvent(audit.KindActionSubmitted, "agent:"+agent.ID, submitData)
	var job *Job
	switch {
	case a.Status == StatusApproved:
		job = JobFor(a)
	case a.Status == StatusPending && HasPreview(a.Tool):
		job = previewJob(a)
	case previewing:
		job = execPreviewJob(a)
	}
	guard.FleetVersion, guard.AgentVersion = set.Fleet.Version(), set.Agent.Version()
	guard.MaxPending = settings.MaxPending
	insert := func() error {
		// Whatever made the action pending (its rules, or a budget over
		// what a grant or an allow rule approved), it carries its route.
		guard.Route = pendingRoute(a, d, settings, now)
		for attempt := 0; ; attempt++ {
			if a.Status == StatusPending {
				a.Phrase = phraseFor(a.Tool, attempt)
			}
			err := s.store.InsertAction(ctx, a, job, ev, guard)
			if errors.Is(err, ErrPhraseTaken) && attempt < len(phraseLens)-1 {
				continue
			}
			return err
		}
	}
	err = insert()
	if over := (*BudgetExceededError)(nil); errors.As(err, &over) {
		// budget.go: the call does not fit under what a budget has left.
		timeout := settings.DefaultTimeout
		if d.Effect == policy.Approve && d.Timeout > 0 {
			timeout = d.Timeout // a call a grant approved waits as its rule says
		}
		ev = overBudget(a, &guard, budgetEffects, over.Spent, timeout, now)
		if a.Status != StatusPending || job == nil || !IsPreviewJob(job.Kind) {
			job = nil // only a preview job stays, for a pending action
		}
		if a.Status == StatusPending && wantsExecPreview(a, settings) {
			// Pending now (or still): an exec in a worktree waits for its
			// impact preview, whatever it was before the budget spoke.
			a.Decision.Gate = GatePreview
			if job == nil {
				job = execPreviewJob(a)
			}
		}
		err = insert()
	}
	if rate := (*RateExceededError)(nil); errors.As(err, &rate) {
		s.rateHolds.hold(a.AgentID, s.now().Add(rate.RetryAfter))
		return nil, apperr.RateLimited(rate.RetryAfter, "agent %s submitted %d calls in the last minute, its limit (settings.rate.per_minute); retry later",
			a.AgentID, guard.RatePerMinute)
	}
	if errors.Is(err, ErrAgentSuspended) {
		// The statement found the agent suspended: what is stored is a
		// denial saying so (the suspension is read there, never cached).
		job = nil
		ev = denySuspended(a)
		guard.NoGrant, guard.Grant = false, ""
		err = s.store.InsertAction(ctx, a, nil, ev, guard)
	}
	if errors.Is(err, ErrPlanMode) {
		// Plan mode is on and the call is not a read: whatever policy, a
		// grant or an "always" rule said, what is stored is a denial.
		job = nil
		ev = denyPlanMode(a)
		guard.NoGrant, guard.Grant = false, ""
		err = s.store.InsertAction(ctx, a, nil, ev, guard)
	}
	if errors.Is(err, ErrTooManyPending) {
		return nil, apperr.RateLimited(10*time.Second, "agent %s has %d pending actions, its limit (settings.max_pending); wait for decisions",
			a.AgentID, settings.MaxPending)
	}
	if errors.Is(err, ErrPhraseTaken) {
		return nil, apperr.New(apperr.CodeUnavailable, "no free confirmation phrase for %s after %d tries; try again", a.Tool, len(phraseLens))
	}
	if err != nil {
		return nil, err
	}
	if s.metrics != nil {
		s.metrics.Submitted(a)
		if a.Status != StatusPending {
			s.metrics.Finished(a, 0)
		}
	}
	switch {
	case a.Status == StatusPending:
		s.publish(eventbus.Created, a.ID)
	case job != nil:
		s.publish(eventbus.Updated, a.ID) // wakes workers waiting for a lease
	}
	if a.Status == StatusPending && job != nil {
		s.publish(eventbus.Updated, a.ID) // the preview job
	}
	return a, nil
}

// denySuspended turns a into the denial of a suspended agent's call and
// returns its submit event.
func denySuspended(a *Action) audit.Event {
	a.Status = StatusDenied
	a.Phrase, a.ExpiresAt, a.RequiredApprovals = "", nil, 1
	a.Decision = Decision{Effect: string(policy.Deny), By: "policy", RuleID: "", PolicyVersion: a.Decision.PolicyVersion,
		Source: "suspended", Reason: fmt.Sprintf("agent %s is suspended: its calls are denied until an admin resumes it", a.AgentID)}
	return a.AuditEvent(audit.KindActionSubmitted, "agent:"+a.AgentID, map[string]any{
		"status": a.Status, "required_approvals": a.RequiredApprovals, "reason": a.Reason, "suspended": true,
	})
}

func (s *Service) replay(ctx context.Context, agentID string, req SubmitRequest) (*Action, bool, error) {
	prev, err := s.store.ActionByIdempotencyKey(ctx, agentID, req.IdempotencyKey)
	if err != nil {
		return nil, false, err
	}
	if string(prev.RequestHash) != string(req.hash()) {
		return nil, false, apperr.Conflict("idempotency key %q was already used with a different request", req.IdempotencyKey)
	}
	return prev, false, nil
}

func (s *Service) publish(kind eventbus.Kind, id string) {
	ev := eventbus.Event{Kind: kind, ActionID: id}
	s.bus.Publish(ev) // local waiters at once
	if s.pub != nil {
		s.pub.Publish(ev) // other instances
	}
}
