package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/hitl"
)

// actionColumns is the column list scanAction reads, in order.
const actionColumns = `id, agent_id, agent_instance, conversation_id, step_id, correlation_id, tool, args, reason,
	status, risk, decision, approvals, required_approvals, coalesce(phrase, ''), expires_at, result, preview,
	coalesce(idempotency_key, ''), request_hash, version, created_at, updated_at, coalesce(token_id, '')`

func scanAction(row pgx.Row) (*hitl.Action, error) {
	var a hitl.Action
	var args, riskJSON, decision, approvals, result, preview []byte
	err := row.Scan(&a.ID, &a.AgentID, &a.AgentInstance, &a.ConversationID, &a.StepID, &a.CorrelationID, &a.Tool,
		&args, &a.Reason, &a.Status, &riskJSON, &decision, &approvals, &a.RequiredApprovals, &a.Phrase, &a.ExpiresAt,
		&result, &preview, &a.IdempotencyKey, &a.RequestHash, &a.Version, &a.CreatedAt, &a.UpdatedAt, &a.TokenID)
	if err != nil {
		return nil, err
	}
	if err := audit.UnmarshalArgs(args, &a.Args); err != nil { // numbers exactly as stored
		return nil, fmt.Errorf("store: decoding action %s: %w", a.ID, err)
	}
	for _, f := range []struct {
		raw []byte
		dst any
	}{{riskJSON, &a.Risk}, {decision, &a.Decision}, {approvals, &a.Approvals}} {
		if err := json.Unmarshal(f.raw, f.dst); err != nil {
			return nil, fmt.Errorf("store: decoding action %s: %w", a.ID, err)
		}
	}
	if a.Risk.Reasons == nil {
		a.Risk.Reasons = []string{}
	}
	a.Result = nullRaw(result)
	a.Preview = nullRaw(preview)
	if a.ExpiresAt != nil {
		t := a.ExpiresAt.UTC()
		a.ExpiresAt = &t
	}
	a.CreatedAt = a.CreatedAt.UTC()
	a.UpdatedAt = a.UpdatedAt.UTC()
	return &a, nil
}

func nullRaw(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// jsonArg marshals v for a jsonb parameter.
func jsonArg(v any) ([]byte, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 {
			return nil, nil
		}
		return raw, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("store: encoding json: %w", err)
	}
	return b, nil
}

// insertActionSQL writes the action, its submit event and its job in one
// statement: one round trip, one implicit transaction (shared with other
// submits by the group commit). The statement first re-checks the guard
// (g): the agent's token is still active, and is the agent's own (without
// a token, the agent exists: actions has no foreign key to agents, whose
// KEY SHARE lock cost every submit, see migration 00031); for a decision
// made on the cached policy, the policies are still the versions it was
// made on; for a pending action that assumed no conversation grant ($32
// 'none'), none exists; for a call a grant approved ($32 its id), that
// grant is still active; a worktree the call names belongs to the agent;
// only a denial is stored for a suspended agent (read from the token's
// row, which the suspension marks: no lookup of its own; for a pending
// call, from the agent's row (l), locked first and read as last
// committed: a suspension locks that row before it cancels what the
// agent has open, so a pending submit it does not wait for is one it
// sees; then the token's row (lt, read as last committed, likewise for its
// revocation, which stops what was submitted with it); then the agent's
// pending count (lp), locked too, so concurrent submits never pass
// max_pending; agents, tokens, agent_pending, as a suspension takes them:
// the lock order, store.go); and only a denial or a read
// while plan mode is on for the agent or the fleet (plan_modes has rows
// only while a switch is on: one probe of an almost empty index). The
// event's JSON values are the action's jsonb ones and $23 as jsonb: the
// event's json columns keep jsonb's text (migration 00032). When
// the guard fails, or the idempotency key or the pending phrase is taken,
// nothing is written; the row it returns says which (a conflict is not an
// error, so it never fails the batch the statement shares).
const insertActionSQL = `
WITH t AS (
	SELECT revoked_at IS NULL AND expires_at > now() AND kind = 'agent' AND subject = $2 AS active, agent_suspended FROM tokens WHERE id = $28
), l AS (
	SELECT id, suspended_at IS NOT NULL AS suspended FROM agents WHERE id = $2 AND $10 = 'pending' FOR NO KEY UPDATE
), lt AS (
	SELECT id, subject, revoked_at IS NULL AND expires_at > now() AND kind = 'agent' AS live FROM tokens
	WHERE id = $28 AND (SELECT count(*) FROM l) > 0 FOR SHARE
), lp AS (
	SELECT pending FROM agent_pending WHERE agent_id = (SELECT id FROM l) AND (SELECT count(*) FROM lt) >= 0 FOR NO KEY UPDATE
), g AS (
	SELECT ($28 = '' OR coalesce(CASE WHEN $10 = 'pending' THEN (SELECT live AND subject = $2 FROM lt) ELSE (SELECT active FROM t) END, false)) AS token_ok,
		NOT $31 OR ((SELECT coalesce(max(version), 0) FROM policies WHERE scope = 'fleet') = $29
			AND (SELECT coalesce(max(version), 0) FROM policies WHERE scope = 'agent:' || $2) = $30) AS policy_ok,
		CASE $32 WHEN '' THEN true
			WHEN 'none' THEN NOT EXISTS (SELECT FROM grants
				WHERE agent_id = $2 AND tool = $7 AND conversation_id = $4 AND source = $12::jsonb->>'source'
					AND rule_id = $12::jsonb->>'rule_id' AND policy_version = ($12::jsonb->>'policy_version')::integer
					AND revoked_at IS NULL AND expires_at > now())
			ELSE EXISTS (SELECT FROM grants WHERE id = $32::uuid AND agent_id = $2 AND revoked_at IS NULL AND expires_at > now())
		END AS grant_ok,
		$33 = '' AS worktree_ok,
		CASE WHEN $10 = 'pending' THEN NOT coalesce((SELECT suspended FROM l), true)
			WHEN $28 = '' THEN coalesce((SELECT $10 = 'denied' OR suspended_at IS NULL FROM agents WHERE id = $2), false)
			ELSE $10 = 'denied' OR NOT coalesce((SELECT agent_suspended FROM t), false) END AS agent_ok,
		$10 <> 'pending' OR $35 <= 0 OR coalesce((SELECT pending FROM lp), 0) < $35 AS room_ok,
		$10 = 'denied' OR $36 OR NOT EXISTS (SELECT FROM plan_modes WHERE scope IN ('fleet', 'agent:' || $2)) AS plan_ok
), a AS (
	INSERT INTO actions (id, agent_id, agent_instance, conversation_id, step_id, correlation_id, tool, args, reason,
		status, risk, decision, approvals, required_approvals, phrase, expires_at, idempotency_key, request_hash,
		version, created_at, updated_at, token_id)
	SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $20, nullif($34, '')
	FROM g WHERE g.token_ok AND g.policy_ok AND g.grant_ok AND g.worktree_ok AND g.agent_ok AND g.room_ok AND g.plan_ok
	ON CONFLICT DO NOTHING -- the idempotency key or the phrase: InsertAction tells which
	RETURNING id
), p AS (
	UPDATE agent_pending SET pending = pending + 1 FROM a WHERE agent_id = $2 AND $10 = 'pending'
), j AS (
	INSERT INTO jobs (id, action_id, kind, target, max_attempts)
	SELECT $27, a.id, $24, $25, $26 FROM a WHERE $24 <> ''
), e AS (
	INSERT INTO audit_events (kind, actor, agent_id, agent_instance, conversation_id, step_id, correlation_id,
		action_id, tool, args, risk, decision, data, digest)
	SELECT $21, $22, $2, $3, $4, $5, $6, a.id, $7, $8, $11, $12, $23::jsonb, $37 FROM a
)
SELECT g.token_ok, g.policy_ok, g.grant_ok, g.worktree_ok, g.agent_ok, g.room_ok, g.plan_ok, EXISTS (SELECT FROM a) FROM g`

// insertShape is what decides which guards can refuse a call's insert.
type insertShape struct {
	pending  bool // only a pending action counts against max_pending
	read     bool // plan mode never refuses a read
	worktree bool // the call names a worktree: it must be the agent's
	budgeted bool // budgets.go: a budget or a rate applies
	routed   bool // routes.go: a pending action with notifications, reviewers or escalation
}

// plain reports whether insertManySQL can stand for the shape's statement
// in a batch: no worktree, budget, rate or route.
func (sh insertShape) plain() bool { return !sh.worktree && !sh.budgeted && !sh.routed }

// insertStatements holds insertActionSQL specialised for every shape. The
// statement runs with a generic plan, which keeps every guard it names
// (and sets up every data-modifying CTE) whatever the parameters say:
// leaving out what cannot refuse a shape's call (the pending count and its
// update for a decided call, the plan-mode probe for a read, the worktree
// lookup for a call naming none) keeps those costs off the calls they
// cannot refuse. The parameters stay numbered as in insertActionSQL.
var insertStatements = func() map[insertShape]string {
	out := make(map[insertShape]string, 24)
	for _, pending := range []bool{false, true} {
		for _, read := range []bool{false, true} {
			for _, worktree := range []bool{false, true} {
				for _, budgeted := range []bool{false, true} {
					for _, routed := range []bool{false, pending} { // only a pending action is routed
						sh := insertShape{pending: pending, read: read, worktree: worktree, budgeted: budgeted, routed: routed}
						out[sh] = specialise(sh)
					}
				}
			}
		}
	}
	return out
}()

// patchStatement replaces the marker from in the insert statement q with
// to; a marker the statement no longer holds stops the server at start
// (the variants are built when the package loads), never a submit.
func patchStatement(who, q, from, to string) string {
	if !strings.Contains(q, from) {
		panic("store: " + who + ": the insert statement no longer holds " + strconv.Quote(from))
	}
	return strings.Replace(q, from, to, 1)
}

// specialise builds the statement of one shape from insertActionSQL.
func specialise(sh insertShape) string {
	q := insertActionSQL
	edit := func(from, to string) { q = patchStatement("specialise", q, from, to) }
	if sh.worktree {
		edit(`$33 = '' AS worktree_ok`, `EXISTS (SELECT FROM worktrees WHERE name = $33 AND agent_id = $2) AS worktree_ok`)
	}
	if sh.pending {
		// Read under the locks, whoever the caller.
		edit(`coalesce(CASE WHEN $10 = 'pending' THEN (SELECT live AND subject = $2 FROM lt) ELSE (SELECT active FROM t) END, false)`,
			`coalesce((SELECT live AND subject = $2 FROM lt), false)`)
		edit(`CASE WHEN $10 = 'pending' THEN NOT coalesce((SELECT suspended FROM l), true)
			WHEN $28 = '' THEN coalesce((SELECT $10 = 'denied' OR suspended_at IS NULL FROM agents WHERE id = $2), false)
			ELSE $10 = 'denied' OR NOT coalesce((SELECT agent_suspended FROM t), false) END AS agent_ok`,
			`NOT coalesce((SELECT suspended FROM l), true) AS agent_ok`)
	} else {
		lock := ``
		if sh.budgeted {
			// airlock_admit locks agent_pending: the agent's row first, as
			// every statement that locks agent_pending takes them (the
			// lock order, store.go; a batch may hold this statement and a
			// pending one of the same agent).
			lock = `), l AS (
	SELECT id FROM agents WHERE id = $2 FOR NO KEY UPDATE
`
		}
		edit(`), l AS (
	SELECT id, suspended_at IS NOT NULL AS suspended FROM agents WHERE id = $2 AND $10 = 'pending' FOR NO KEY UPDATE
), lt AS (
	SELECT id, subject, revoked_at IS NULL AND expires_at > now() AND kind = 'agent' AS live FROM tokens
	WHERE id = $28 AND (SELECT count(*) FROM l) > 0 FOR SHARE
), lp AS (
	SELECT pending FROM agent_pending WHERE agent_id = (SELECT id FROM l) AND (SELECT count(*) FROM lt) >= 0 FOR NO KEY UPDATE
`, lock)
		edit(`coalesce(CASE WHEN $10 = 'pending' THEN (SELECT live AND subject = $2 FROM lt) ELSE (SELECT active FROM t) END, false)`,
			`coalesce((SELECT active FROM t), false)`)
		edit(`CASE WHEN $10 = 'pending' THEN NOT coalesce((SELECT suspended FROM l), true)
			WHEN $28 = ''`, `CASE WHEN $28 = ''`)
		// $35 keeps its type without the probe.
		edit(`$10 <> 'pending' OR $35 <= 0 OR coalesce((SELECT pending FROM lp), 0) < $35 AS room_ok`,
			`$10 <> 'pending' OR $35::integer <= 0 AS room_ok`)
		edit(`), p AS (
	UPDATE agent_pending SET pending = pending + 1 FROM a WHERE agent_id = $2 AND $10 = 'pending'
`, ``)
	}
	if sh.read {
		edit(`$10 = 'denied' OR $36 OR NOT EXISTS (SELECT FROM plan_modes WHERE scope IN ('fleet', 'agent:' || $2)) AS plan_ok`,
			`$10 = 'denied' OR $36 AS plan_ok`)
	}
	if sh.budgeted {
		q = budgetVariant(q)
		// airlock_admit locks agent_pending: only once the agent's row is
		// locked (its argument reads l first).
		edit(`airlock_admit($2,`, `airlock_admit(coalesce((SELECT id FROM l), $2),`)
	}
	if sh.routed {
		first := 38 // after the base statement's parameters, or the budget variant's
		if sh.budgeted {
			first = 44
		}
		q = routeVariant(q, first)
	}
	return q
}

// InsertAction implements hitl.Store.
func (s *Store) InsertAction(ctx context.Context, a *hitl.Action, job *hitl.Job, ev audit.Event, g hitl.Guard) error {
	var jobID *string
	var jobKind, jobTarget string
	jobAttempts := 1
	if job != nil {
		jobID, jobKind, jobTarget, jobAttempts = &job.ID, job.Kind, job.Target, job.MaxAttempts
	}
	args, err := jsonArg(a.Args)
	if err != nil {
		return err
	}
	riskJSON, err := jsonArg(a.Risk)
	if err != nil {
		return err
	}
	decision, err := jsonArg(a.Decision)
	if err != nil {
		return err
	}
	approvals, err := jsonArg(a.Approvals)
	if err != nil {
		return err
	}
	data, err := jsonArg(ev.Data)
	if err != nil {
		return err
	}
	var tokenOK, policyOK, grantOK, worktreeOK, agentOK, roomOK, planOK, inserted bool
	budgeted := len(g.Budgets) > 0 || g.RatePerMinute > 0
	pending := a.Status == hitl.StatusPending
	routed := g.Route != nil && pending
	shape := insertShape{pending: pending, read: g.Read, worktree: g.Worktree != "", budgeted: budgeted, routed: routed}
	q := insertStatements[shape]
	params := []any{
		a.ID, a.AgentID, a.AgentInstance, a.ConversationID, a.StepID, a.CorrelationID, a.Tool, args, a.Reason,
		a.Status, riskJSON, decision, approvals, a.RequiredApprovals, nullString(a.Phrase), a.ExpiresAt,
		nullString(a.IdempotencyKey), a.RequestHash, a.Version, a.CreatedAt,
		ev.Kind, ev.Actor, data, jobKind, jobTarget, jobAttempts, jobID,
		g.TokenID, g.FleetVersion, g.AgentVersion, g.Cached, grantGuard(g), g.Worktree, a.TokenID, g.MaxPending, g.Read,
	}
	dest := []any{&tokenOK, &policyOK, &grantOK, &worktreeOK, &agentOK, &roomOK, &planOK, &inserted}
	rateOK, budgetOK := true, true
	var admitted []string
	var reason *string
	if budgeted { // budgets.go: only calls under a budget or a rate pay for it
		params = append(params, budgetArgs(g)...)
		dest = append(dest, &rateOK, &budgetOK, &admitted, &reason)
	} else { // $37: the event's digest; a budget variant composes the decision it audits, and stores none
		params = append(params, eventDigest(&audit.Record{Kind: string(ev.Kind), Actor: ev.Actor, AgentID: a.AgentID,
			AgentInstance: a.AgentInstance, ConversationID: a.ConversationID, StepID: a.StepID, CorrelationID: a.CorrelationID,
			ActionID: a.ID, Tool: a.Tool, Args: args, Risk: riskJSON, Decision: decision, Data: data}))
	}
	if routed { // routes.go: only a configured route pays for it
		ra, err := routeArgs(g.Route)
		if err != nil {
			return err
		}
		params = append(params, ra...)
	}
	if shape.plain() {
		err = s.submits.queryRowMergeable(ctx, a.AgentID, q, params, insertManySQL, manyRow(params), dest...)
	} else {
		err = s.submits.queryRowKeyed(ctx, a.AgentID, q, params, dest...)
	}
	if err != nil {
		switch code, constraint := pgCode(err); {
		case code == uniqueViolation && constraint == "actions_pending_phrase":
			return hitl.ErrPhraseTaken
		}
		return fmt.Errorf("store: inserting action: %w", err)
	}
	switch {
	case !tokenOK:
		return errTokenInactive
	case !worktreeOK:
		return apperr.NotFound("no worktree %q", g.Worktree)
	case !policyOK:
		s.agents.Delete(a.AgentID)
		return hitl.ErrPolicyChanged
	case !agentOK && g.TokenID == "":
		return s.suspendedOrUnknown(ctx, a.AgentID)
	case !agentOK:
		return hitl.ErrAgentSuspended
	case !planOK:
		return hitl.ErrPlanMode // before a grant: none applies while plan mode is on
	case !rateOK || !budgetOK:
		return admitResult(rateOK, budgetOK, admitted)
	case !grantOK && g.Grant != "":
		return hitl.ErrGrantRevoked
	case !grantOK:
		return hitl.ErrGrantFound
	case !roomOK:
		return hitl.ErrTooManyPending
	case !inserted && a.IdempotencyKey == "":
		return hitl.ErrPhraseTaken // the only other unique key a new action can hit
	case !inserted && a.Phrase == "":
		return hitl.ErrDuplicateKey
	case !inserted:
		var used bool
		err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM actions WHERE agent_id = $1 AND idempotency_key = $2)`,
			a.AgentID, a.IdempotencyKey).Scan(&used)
		if err != nil {
			return fmt.Errorf("store: checking idempotency key: %w", err)
		}
		if used {
			return hitl.ErrDuplicateKey
		}
		return hitl.ErrPhraseTaken
	}
	if reason != nil {
		a.Decision.Reason = *reason // what the budgets have left, as stored
	}
	return nil
}

// grantGuard is the statement's $32: what it checks of conversation grants
// ("" nothing, "none" that none covers the call, else that the grant with
// this id, which approved it, is still active).
func grantGuard(g hitl.Guard) string {
	switch {
	case g.Grant != "":
		return g.Grant
	case g.NoGrant:
		return "none"
	}
	return ""
}

// suspendedOrUnknown tells why the guard refused a call made without a
// token for agentID: the agent is suspended, or there is no such agent.
func (s *Store) suspendedOrUnknown(ctx context.Context, agentID string) error {
	var known bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM agents WHERE id = $1)`, agentID).Scan(&known); err != nil {
		return fmt.Errorf("store: looking the agent up: %w", err)
	}
	if !known {
		return apperr.NotFound("unknown agent %q", agentID)
	}
	return hitl.ErrAgentSuspended
}

// ActionByIdempotencyKey implements hitl.Store.
func (s *Store) ActionByIdempotencyKey(ctx context.Context, agentID, key string) (*hitl.Action, error) {
	a, err := scanAction(s.pool.QueryRow(ctx,
		`SELECT `+actionColumns+` FROM actions WHERE agent_id = $1 AND idempotency_key = $2`, agentID, key))
	if err != nil {
		return nil, notFound(err, "no action with idempotency key %q", key)
	}
	return a, nil
}

// Action implements hitl.Store.
func (s *Store) Action(ctx context.Context, id string) (*hitl.Action, error) {
	if !isUUID(id) {
		return nil, apperr.NotFound("no action %q", id)
	}
	a, err := scanAction(s.pool.QueryRow(ctx, `SELECT `+actionColumns+` FROM actions WHERE id = $1`, id))
	if err != nil {
		return nil, notFound(err, "no action %s", id)
	}
	return a, nil
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'):
		default:
			return false
		}
	}
	return true
}

// updateActionSQL is the compare-and-set: it changes the row only if nobody
// else did since it was read, and never moves a pending action whose time is
// up (by the database clock) anywhere but to expired.
const updateActionSQL = `
UPDATE actions SET status = $3, decision = $4, approvals = $5, result = $6, preview = $7, version = $8, updated_at = $9
WHERE id = $1 AND version = $2
  AND (status <> 'pending' OR $3 = 'expired' OR expires_at IS NULL OR expires_at > now())`

// UpdateAction implements hitl.Store.
func (s *Store) UpdateAction(ctx context.Context, a *hitl.Action, prevVersion int, fx hitl.Effects, events ...audit.Event) error {
	decision, err := jsonArg(a.Decision)
	if err != nil {
		return err
	}
	approvals, err := jsonArg(a.Approvals)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if fx.NotInPlanMode {
			if err := refuseInPlanMode(ctx, tx, a.AgentID); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, updateActionSQL, a.ID, prevVersion, a.Status, decision, approvals,
			[]byte(a.Result), []byte(a.Preview), a.Version, a.UpdatedAt)
		if err != nil {
			return fmt.Errorf("store: updating action: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return hitl.ErrStale
		}
		if len(fx.Budgets) > 0 {
			if err := approvalFits(ctx, tx, a, fx.Budgets); err != nil {
				return err
			}
		}
		if g := fx.Grant; g != nil {
			if err := insertGrant(ctx, tx, g); err != nil {
				return err
			}
		}
		if fx.CommandSet != nil {
			if err := insertCommandSet(ctx, tx, fx.CommandSet); err != nil {
				return err
			}
		}
		if fx.Job != nil {
			if err := insertJob(ctx, tx, fx.Job); err != nil {
				return err
			}
		}
		if fx.Stop != "" {
			if err := stopJobs(ctx, tx, a.ID, fx.Stop); err != nil {
				return err
			}
		}
		if r := fx.RevokeGrants; r != nil {
			// agent_id lets the statement use the agent's grant index.
			cond, args := "action_id = $2 AND agent_id = $3", []any{a.ID, a.AgentID}
			if k := r.Covering; k != nil {
				cond = `agent_id = $3 AND (action_id = $2 OR (tool = $4 AND conversation_id = $5 AND rule_id = $6 AND policy_version = $7))`
				args = append(args, k.Tool, k.ConversationID, k.RuleID, k.PolicyVersion)
			}
			_, revoked, err := revokeGrants(ctx, tx, cond, args, r.Actor, r.Event)
			if err != nil {
				return err
			}
			events = append(events, revoked...)
		}
		if fx.Decided {
			if _, err := tx.Exec(ctx, decidedOutboxSQL, a.ID); err != nil {
				return fmt.Errorf("store: queueing decided notifications: %w", err)
			}
			if a.Status == hitl.StatusApproved {
				// What a call spends counts from its approval: dated at the
				// submit, a call that waited for a reviewer would leave a
				// budget's window early and its amount be spent again.
				if _, err := tx.Exec(ctx, `UPDATE budget_spends SET created_at = $2 WHERE action_id = $1`, a.ID, a.UpdatedAt); err != nil {
					return fmt.Errorf("store: dating the approval's spend: %w", err)
				}
			}
		}
		if pc := fx.Policy; pc != nil {
			ev, err := s.insertPolicyVersion(ctx, tx, agentScope(pc.AgentID), pc.BaseVersion, pc.Document, actorOf(events))
			if errors.Is(err, errPolicyRace) || apperr.CodeOf(err) == apperr.CodeConflict {
				return hitl.ErrPolicyMoved // another version landed first: compute the change again
			}
			if err != nil {
				return err
			}
			ev.AgentID = pc.AgentID
			ev.ActionID = a.ID
			ev.CorrelationID = a.CorrelationID
			events = append(events, ev)
		}
		return insertEvents(ctx, tx, events...)
	})
}

func actorOf(events []audit.Event) string {
	if len(events) > 0 {
		return events[0].Actor
	}
	return "system"
}

// The expiry sweep's statuses, from hitl.MoveExpire, are written into its
// statement as literals so that the partial index on pending actions
// (actions_pending_expiry) serves it.
var expireFrom, expireTo = statusList(hitl.MoveExpire.From), statusList([]hitl.Status{hitl.MoveExpire.To})

// statusList renders statuses as SQL literals. Statuses are known words
// (hitl.Status.Valid); anything else panics at package initialisation.
func statusList(list []hitl.Status) string {
	out := make([]string, len(list))
	for i, st := range list {
		if !st.Valid() {
			panic("store: unknown status " + string(st))
		}
		out[i] = "'" + string(st) + "'"
	}
	return strings.Join(out, ", ")
}

// ExpireDue implements hitl.Store. SKIP LOCKED lets several instances sweep
// at once without waiting on each other; the status predicate and the row
// lock make each expiry happen once, with one audit event. The preview
// jobs of what expires are stopped in the same statement.
//
// The pending counts of the agents whose actions expire are locked in id
// order (lc) before any action moves: the trigger that takes one off each
// count would otherwise lock them in the order the actions expire, and a
// sweep over several agents deadlocked with a batch of submits (or
// another sweep) locking them in id order.
func (s *Store) ExpireDue(ctx context.Context, limit int) ([]*hitl.Action, error) {
	rows, err := s.pool.Query(ctx, `
WITH due AS (
	SELECT id, agent_id FROM actions
	WHERE status IN (`+expireFrom+`) AND expires_at <= now()
	ORDER BY expires_at
	LIMIT $1
	FOR UPDATE SKIP LOCKED
), lc AS (
	SELECT agent_id FROM agent_pending WHERE agent_id IN (SELECT agent_id FROM due)
	ORDER BY agent_id COLLATE "C" FOR NO KEY UPDATE
), u AS (
	UPDATE actions a SET status = `+expireTo+`, version = a.version + 1, updated_at = now()
	FROM due WHERE a.id = due.id AND (SELECT count(*) FROM lc) >= 0
	RETURNING a.*
), j AS (
	-- a preview still being prepared is stopped (its worker kills the run)
	UPDATE jobs SET state = 'done', stop_reason = 'expired', updated_at = now()
	FROM u WHERE jobs.action_id = u.id AND jobs.state <> 'done'
), e AS (
	INSERT INTO audit_events (kind, actor, agent_id, agent_instance, conversation_id, step_id, correlation_id,
		action_id, tool, args, risk, decision, data)
	SELECT 'action.expired', 'system', agent_id, agent_instance, conversation_id, step_id, correlation_id,
		id, tool, args, risk, decision, jsonb_build_object('expires_at', expires_at)
	FROM u
), o AS (
	INSERT INTO notify_outbox (action_id, target, event)
	SELECT DISTINCT n.action_id, n.target, 'action.decided' FROM notify_outbox n JOIN u ON n.action_id = u.id
	WHERE n.event <> 'action.decided'
), r AS (
	DELETE FROM action_routes r USING u WHERE r.action_id = u.id AND r.fired_at IS NULL
)
SELECT `+actionColumns+` FROM u`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: expiring actions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*hitl.Action, error) { return scanAction(r) })
	if err != nil {
		return nil, fmt.Errorf("store: expiring actions: %w", err)
	}
	return out, nil
}

// ListActions implements hitl.Store.
func (s *Store) ListActions(ctx context.Context, f hitl.ListFilter) ([]*hitl.Action, string, error) {
	where := []string{"true"}
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if len(f.Statuses) > 0 { // the service moved Status here
		add("status = ANY($%d)", f.Statuses)
	}
	if f.AgentID != "" {
		add("agent_id = $%d", f.AgentID)
	}
	if f.Risk != "" {
		add("risk->>'level' = $%d", f.Risk)
	}
	if f.Tool != "" {
		add("tool = $%d", f.Tool)
	}
	if f.DecidedBy != "" {
		args = append(args, f.DecidedBy)
		n := len(args)
		where = append(where, fmt.Sprintf("(decision->>'by' = $%d OR approvals @> jsonb_build_array(jsonb_build_object('by', $%d::text)))", n, n))
	}
	if f.CanApprove != "" {
		args = append(args, f.CanApprove)
		where = append(where, fmt.Sprintf(canApproveSQL, len(args)))
	}
	if !f.Since.IsZero() {
		add("created_at >= $%d", f.Since)
	}
	if !f.Until.IsZero() {
		add("created_at < $%d", f.Until)
	}
	if f.Cursor != "" {
		at, id, err := decodeActionCursor(f.Cursor)
		if err != nil {
			return nil, "", err
		}
		args = append(args, at, id)
		where = append(where, fmt.Sprintf("(created_at, id) < ($%d, $%d)", len(args)-1, len(args)))
	}
	args = append(args, f.Limit+1)
	q := `SELECT ` + actionColumns + ` FROM actions WHERE ` + strings.Join(where, " AND ") +
		fmt.Sprintf(` ORDER BY created_at DESC, id DESC LIMIT $%d`, len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("store: listing actions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*hitl.Action, error) { return scanAction(r) })
	if err != nil {
		return nil, "", fmt.Errorf("store: listing actions: %w", err)
	}
	next := ""
	if len(out) > f.Limit {
		out = out[:f.Limit]
		last := out[len(out)-1]
		next = encodeActionCursor(last.CreatedAt, last.ID)
	}
	return out, next, nil
}

func encodeActionCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixMicro(), 10) + "/" + id))
}

// maxCursorMicros is 9999-12-31T23:59:59.999999Z in Unix microseconds.
const maxCursorMicros = 253402300799999999

func decodeActionCursor(c string) (time.Time, string, error) {
	bad := apperr.Invalid("invalid cursor")
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", bad
	}
	ts, id, ok := strings.Cut(string(raw), "/")
	micros, err := strconv.ParseInt(ts, 10, 64)
	// A time PostgreSQL cannot hold (a forged cursor) would fail the
	// query: no action was created before 1970 or after 9999.
	if !ok || err != nil || !isUUID(id) || micros < 0 || micros > maxCursorMicros {
		return time.Time{}, "", bad
	}
	return time.UnixMicro(micros).UTC(), id, nil
}

// CountPending returns how many actions wait for a decision.
func (s *Store) CountPending(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM actions WHERE status = 'pending'`).Scan(&n)
	return n, err
}
