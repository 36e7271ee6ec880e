package hitl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
)

// Audit kinds of batch decisions. The approvals themselves are the
// actions' own events (action.approved or action.approval), each naming
// the batch in its data.
const (
	KindBatchCreated  audit.Kind = "batch.created"  // a reviewer selected actions and got the batch's phrase
	KindBatchApproved audit.Kind = "batch.approved" // the reviewer typed the batch's phrase; each action was then approved on its own
)

// Bounds on a batch: it is a selection of several actions, small enough
// that every one's arguments are read before the phrase is typed.
const (
	MinBatch = 2
	MaxBatch = 50
)

// Batch is a reviewer's selection of pending actions of one tool and one
// rule, approved with one phrase that names the count. Its JSON form is
// part of the API.
type Batch struct {
	ID   string   `json:"id"`
	IDs  []string `json:"ids"`
	Tool string   `json:"tool"`
	// ConfirmationPhrase is what the reviewer types: "approve <count>
	// <tool> <code>".
	ConfirmationPhrase string     `json:"confirmation_phrase"`
	CreatedBy          string     `json:"created_by"`
	CreatedAt          time.Time  `json:"created_at"`
	ApprovedAt         *time.Time `json:"approved_at"`
}

// BatchRequest selects the actions of a batch.
type BatchRequest struct {
	IDs []string `json:"ids"`
}

// BatchApproveRequest approves a batch.
type BatchApproveRequest struct {
	Confirmation string `json:"confirmation"`
	Comment      string `json:"comment,omitempty"`
}

// Outcomes of one action of an approved batch.
const (
	// BatchApproved: the approval decided the action (it is approved).
	BatchApproved = "approved"
	// BatchApprovalRecorded: the approval counts towards a quorum that
	// is not reached yet; the action is still pending.
	BatchApprovalRecorded = "approval_recorded"
	// BatchRefused: the single approval path refused this action (it is
	// no longer pending, the reviewer may not approve it, ...); Error
	// says why. The other actions are not affected.
	BatchRefused = "refused"
)

// BatchOutcome is what approving a batch did to one of its actions.
type BatchOutcome struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
	// Action is the action after the approval (nil when refused).
	Action *Action `json:"action,omitempty"`
	// Error is why the action was refused (nil otherwise).
	Error *BatchError `json:"error,omitempty"`
}

// BatchError is the error one action of a batch was refused with: the
// code and message a single approval would have answered.
type BatchError struct {
	Code    apperr.Code `json:"code"`
	Message string      `json:"message"`
}

// BatchStore persists batches.
type BatchStore interface {
	// InsertBatch stores a new batch with its audit event.
	InsertBatch(ctx context.Context, b *Batch, ev audit.Event) error
	// Batch returns one batch; apperr not_found when there is none.
	Batch(ctx context.Context, id string) (*Batch, error)
	// UseBatch sets the batch's approved_at to at if it is still unset,
	// with its audit event, in one transaction; apperr conflict when the
	// batch was used already.
	UseBatch(ctx context.Context, id string, at time.Time, ev audit.Event) error
}

// ruleKey is what makes two actions "of one rule": the rule that sent them
// to review, of the same policy version, as for conversation grants
// (GrantKeyOf), and the same other approve rules holding them with it
// (Decision.Rules). An agent policy's rule is the agent's own.
type ruleKey struct {
	source, ruleID string
	version        int
	agentID        string
	others         string
}

func ruleKeyOf(a *Action) ruleKey {
	k := ruleKey{source: a.Decision.Source, ruleID: a.Decision.RuleID, version: a.Decision.PolicyVersion, others: otherRules(a)}
	if k.source != "fleet" {
		k.agentID = a.AgentID
	}
	return k
}

// otherRules names the approve rules that hold a besides the first, or "".
func otherRules(a *Action) string {
	if len(a.Decision.Rules) < 2 {
		return ""
	}
	names := make([]string, 0, len(a.Decision.Rules)-1)
	for _, r := range a.Decision.Rules[1:] {
		names = append(names, fmt.Sprintf("%s rule %q", r.Source, r.RuleID))
	}
	return " together with " + strings.Join(names, ", ")
}

// notBatchable refuses (validation) an action whose approval says that the
// reviewer saw what only its own page shows: a merge's diff, a run's
// command set (whose approval stands for the repository), an exec's
// impact preview, the diff an fs.write or fs.patch makes to the files as
// they are. The approval pins what was shown, so it is never made in a
// batch, whose reviewer saw the calls' args only. nil: batchable.
func notBatchable(a *Action) *apperr.Error {
	if a.Tool == ToolWorktreeMerge || a.Tool == ToolWorktreeRun || a.Tool == ToolFSWrite || a.Tool == ToolFSPatch ||
		(a.Tool == ToolExec && a.Decision.Gate == GatePreview) {
		return apperr.Validation("action %s is a %s: approve it on its own, where its preview is shown", a.ID, a.Tool)
	}
	return nil
}

// batchPhrase is the phrase of a batch of n actions of tool.
func batchPhrase(n int, tool string) string {
	return fmt.Sprintf("approve %d %s", n, newPhrase(tool, PhraseCodeLen))
}

// CreateBatch selects pending actions for one approval by reviewer. The
// actions must be distinct, all pending, of one tool and sent to review by
// one policy rule (same source, rule id and policy version, and the same
// other rules holding them with it; ruleDecided):
// else apperr validation (422), naming the action that does not fit.
func (s *Service) CreateBatch(ctx context.Context, reviewer string, req BatchRequest) (*Batch, error) {
	bs, err := s.batches()
	if err != nil {
		return nil, err
	}
	n := len(req.IDs)
	if n < MinBatch || n > MaxBatch {
		return nil, apperr.Validation("a batch has %d to %d actions, not %d", MinBatch, MaxBatch, n)
	}
	ids := make([]string, n)
	now := s.now().UTC().Truncate(time.Microsecond)
	var first *Action
	for i, id := range req.IDs {
		u, err := uuid.Parse(id)
		if err != nil || len(id) != 36 {
			return nil, withField(apperr.Validation("no action %q", id), i)
		}
		id = u.String()
		if slices.Contains(ids[:i], id) {
			return nil, withField(apperr.Validation("action %s is in the batch twice", id), i)
		}
		ids[i] = id
		a, err := s.store.Action(ctx, id)
		if apperr.CodeOf(err) == apperr.CodeNotFound {
			return nil, withField(apperr.Validation("no action %s", id), i)
		}
		if err != nil {
			return nil, err
		}
		status := a.Status
		if a.Expired(now) {
			status = StatusExpired // the sweep has not moved it yet
		}
		own := notBatchable(a)
		switch {
		case status != StatusPending:
			return nil, withField(apperr.Validation("action %s is %s, not pending", id, status), i)
		case !ruleDecided(a):
			return nil, withField(apperr.Validation("action %s was sent to review by the %s, not by a policy rule: approve it on its own", id, a.Decision.Source), i)
		case own != nil:
			return nil, withField(own, i)
		case first == nil:
			first = a
		case a.Tool != first.Tool:
			return nil, withField(apperr.Validation("action %s is a %s call; the batch is of %s", id, a.Tool, first.Tool), i)
		case ruleKeyOf(a) != ruleKeyOf(first):
			return nil, withField(apperr.Validation("action %s was sent to review by %s rule %q (version %d)%s; the batch is of %s rule %q (version %d)%s",
				id, a.Decision.Source, a.Decision.RuleID, a.Decision.PolicyVersion, otherRules(a),
				first.Decision.Source, first.Decision.RuleID, first.Decision.PolicyVersion, otherRules(first)), i)
		}
	}
	b := &Batch{ID: uuid.Must(uuid.NewV7()).String(), IDs: ids, Tool: first.Tool, ConfirmationPhrase: batchPhrase(n, first.Tool),
		CreatedBy: reviewer, CreatedAt: now}
	ev := audit.Event{Kind: KindBatchCreated, Actor: reviewer, Tool: b.Tool,
		Data: map[string]any{"batch_id": b.ID, "ids": ids, "rule_id": first.Decision.RuleID, "source": first.Decision.Source,
			"policy_version": first.Decision.PolicyVersion}}
	if err := bs.InsertBatch(ctx, b, ev); err != nil {
		return nil, err
	}
	return b, nil
}

func withField(e *apperr.Error, i int) *apperr.Error {
	e.Details = map[string]any{"field": fmt.Sprintf("ids[%d]", i)}
	return e
}

// Batch returns a batch reviewer made; not_found for anyone else's: the
// phrase is shown only to the reviewer who selected the actions.
func (s *Service) Batch(ctx context.Context, id, reviewer string) (*Batch, error) {
	bs, err := s.batches()
	if err != nil {
		return nil, err
	}
	if u, err := uuid.Parse(id); err != nil || len(id) != 36 {
		return nil, apperr.NotFound("no batch %q", id)
	} else {
		id = u.String()
	}
	b, err := bs.Batch(ctx, id)
	if err != nil {
		return nil, err
	}
	if !strings.EqualFold(b.CreatedBy, reviewer) {
		return nil, apperr.NotFound("no batch %s", id)
	}
	return b, nil
}

// ApproveBatch approves every action of reviewer's batch with one phrase.
//
// A confirmation that is not the batch's phrase (another batch's, or one
// naming another count) is refused with apperr wrong_confirmation (422)
// and counts as a wrong phrase for every action of the batch, as a wrong
// phrase typed on each would: the same bound on guessing applies. A batch
// is used once (conflict after).
//
// With the right phrase each action is approved through Approve, as if the
// reviewer had typed its own phrase: quorum, separation of duties, scope
// rules, plan mode and the wrong-phrase cooling-off all apply, and each is
// audited on its own (naming the batch). An action that is no longer
// pending, or that Approve refuses for any other reason, is reported as
// refused with the error a single approval would have got; the others are
// approved regardless. The batch is not one transaction: each approval is.
func (s *Service) ApproveBatch(ctx context.Context, id, reviewer string, req BatchApproveRequest) (*Batch, []BatchOutcome, error) {
	if len(req.Comment) > maxReasonLen {
		return nil, nil, apperr.Invalid("comment is longer than %d bytes", maxReasonLen)
	}
	b, err := s.Batch(ctx, id, reviewer)
	if err != nil {
		return nil, nil, err
	}
	if b.ApprovedAt != nil {
		return nil, nil, apperr.Conflict("batch %s was approved already; select the actions again", b.ID)
	}
	if !PhraseMatches(b.ConfirmationPhrase, req.Confirmation) {
		for _, aid := range b.IDs {
			if err := s.wrongPhrase(ctx, aid, reviewer); apperr.CodeOf(err) != apperr.CodeWrongPhrase {
				return nil, nil, err
			}
		}
		return nil, nil, &apperr.Error{Code: apperr.CodeWrongPhrase, Message: fmt.Sprintf(
			"the confirmation does not match this batch's phrase (it names the batch's %d actions); it counts as a wrong phrase for each", len(b.IDs)),
			Details: map[string]any{"field": "confirmation"}}
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	bs, _ := s.batches()
	ev := audit.Event{Kind: KindBatchApproved, Actor: reviewer, Tool: b.Tool,
		Data: map[string]any{"batch_id": b.ID, "ids": b.IDs, "comment": req.Comment}}
	if err := bs.UseBatch(ctx, b.ID, now, ev); err != nil {
		return nil, nil, err
	}
	b.ApprovedAt = &now
	out := make([]BatchOutcome, len(b.IDs))
	for i, aid := range b.IDs {
		out[i] = s.approveInBatch(ctx, b, aid, reviewer, req.Comment)
	}
	return b, out, nil
}

// approveInBatch approves one action of a batch through Approve.
func (s *Service) approveInBatch(ctx context.Context, b *Batch, id, reviewer, comment string) BatchOutcome {
	o := BatchOutcome{ID: id, Outcome: BatchRefused}
	a, err := s.store.Action(ctx, id)
	if err == nil {
		// The batch's phrase stood for each action's own: Approve then
		// checks everything else exactly as for a single approval.
		a, err = s.Approve(ctx, id, reviewer, ApproveRequest{Confirmation: a.Phrase, Scope: ScopeOnce, Comment: comment, batch: b.ID})
	}
	if err != nil {
		e, ok := apperr.As(err)
		if !ok || e.Code == apperr.CodeInternal {
			s.log.Error("hitl: approving an action of a batch", "batch", b.ID, "action", id, "err", err)
			e = &apperr.Error{Code: apperr.CodeInternal, Message: "internal error"}
		}
		o.Error = &BatchError{Code: e.Code, Message: e.Message}
		return o
	}
	o.Action = a
	o.Outcome = BatchApprovalRecorded
	if a.Status != StatusPending {
		o.Outcome = BatchApproved
	}
	return o
}

// errNoBatches: the store does not keep batches.
var errNoBatches = errors.New("hitl: the store does not keep batches")

func (s *Service) batches() (BatchStore, error) {
	bs, ok := s.store.(BatchStore)
	if !ok {
		return nil, errNoBatches
	}
	return bs, nil
}
