package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/policy"
)

// FleetScope is the scope of the fleet policy.
const FleetScope = "fleet"

func agentScope(agentID string) string { return "agent:" + agentID }

// PolicyVersion is one stored version of a policy.
type PolicyVersion struct {
	Scope     string          `json:"scope"`
	Version   int             `json:"version"`
	Document  policy.Document `json:"document"`
	CreatedBy string          `json:"created_by"`
	CreatedAt time.Time       `json:"created_at"`
}

// AnyVersion is PutPolicyIf's base for "whatever version is current": the
// write is not conditional.
const AnyVersion = -1

// PutPolicy validates doc and stores it as the next version of scope
// ("fleet" or an agent id through AgentScope), with its audit event. It
// writes on whatever version is current; PutPolicyIf is the
// compare-and-set form.
func (s *Store) PutPolicy(ctx context.Context, scope string, doc policy.Document, actor string) (PolicyVersion, error) {
	return s.PutPolicyIf(ctx, scope, doc, actor, AnyVersion)
}

// errStalePolicy is PutPolicyIf's lost compare-and-set inside the
// transaction; it becomes a precondition_failed naming the current version.
var errStalePolicy = errors.New("store: policy version is not the expected one")

// PutPolicyIf is PutPolicy as a compare-and-set: it writes doc as version
// base+1 only if base is still the current version of scope (0: no policy
// yet), checked in the transaction that inserts it. Otherwise nothing is
// written and the error is precondition_failed with details
// {"current_version": N}. base AnyVersion writes on whatever is current.
func (s *Store) PutPolicyIf(ctx context.Context, scope string, doc policy.Document, actor string, base int) (PolicyVersion, error) {
	if base < AnyVersion {
		return PolicyVersion{}, apperr.Invalid("a policy version is 0 or more")
	}
	for range 5 {
		var pv PolicyVersion
		err := s.inTx(ctx, func(tx pgx.Tx) error {
			var current int
			if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM policies WHERE scope = $1`, scope).Scan(&current); err != nil {
				return fmt.Errorf("store: reading policy version: %w", err)
			}
			if base != AnyVersion && current != base {
				return errStalePolicy
			}
			if _, err := policy.Compile(doc, current+1); err != nil {
				return err
			}
			if err := checkReferences(ctx, tx, doc); err != nil {
				return err
			}
			ev, err := s.insertPolicyVersion(ctx, tx, scope, current, doc, actor)
			if err != nil {
				// insertPolicyVersion loses to a concurrent writer either as
				// errPolicyRace or, for an agent's policy past version 0, as a
				// conflict; for a conditional write both mean "stale".
				if base != AnyVersion && (errors.Is(err, errPolicyRace) || apperr.CodeOf(err) == apperr.CodeConflict) {
					return errStalePolicy
				}
				return err
			}
			if id, ok := agentOfScope(scope); ok {
				ev.AgentID = id
			}
			pv = PolicyVersion{Scope: scope, Version: current + 1, Document: doc, CreatedBy: actor, CreatedAt: time.Now().UTC()}
			return insertEvents(ctx, tx, ev)
		})
		if errors.Is(err, errStalePolicy) {
			return PolicyVersion{}, s.stalePolicy(ctx, scope, base)
		}
		if errors.Is(err, errPolicyRace) {
			continue
		}
		return pv, err
	}
	return PolicyVersion{}, apperr.Conflict("the policy is being changed concurrently; try again")
}

// stalePolicy is the precondition_failed answer to a write based on a
// version that is no longer current.
func (s *Store) stalePolicy(ctx context.Context, scope string, base int) error {
	var current int
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM policies WHERE scope = $1`, scope).Scan(&current); err != nil {
		return fmt.Errorf("store: reading policy version: %w", err)
	}
	return &apperr.Error{Code: apperr.CodePrecondition,
		Message: fmt.Sprintf("the policy is at version %d, not %d: it was changed since you read it; read it again and reapply your change", current, base),
		Details: map[string]any{"current_version": current}}
}

// AgentScope returns the policy scope of an agent.
func AgentScope(agentID string) string { return agentScope(agentID) }

func agentOfScope(scope string) (string, bool) {
	if len(scope) > 6 && scope[:6] == "agent:" {
		return scope[6:], true
	}
	return "", false
}

var errPolicyRace = errors.New("store: policy version taken")

// insertPolicyVersion writes doc as version base+1 of scope. It fails if
// another version was written since base.
func (s *Store) insertPolicyVersion(ctx context.Context, tx pgx.Tx, scope string, base int, doc policy.Document, actor string) (audit.Event, error) {
	body, err := json.Marshal(doc)
	if err != nil {
		return audit.Event{}, fmt.Errorf("store: encoding policy: %w", err)
	}
	tag, err := tx.Exec(ctx, `
		INSERT INTO policies (scope, version, document, created_by)
		SELECT $1, $2 + 1, $3, $4
		WHERE (SELECT coalesce(max(version), 0) FROM policies WHERE scope = $1) = $2`,
		scope, base, body, actor)
	if code, _ := pgCode(err); code == uniqueViolation {
		return audit.Event{}, errPolicyRace
	}
	if err != nil {
		return audit.Event{}, fmt.Errorf("store: writing policy: %w", err)
	}
	if tag.RowsAffected() == 0 {
		if _, ok := agentOfScope(scope); ok && base > 0 {
			return audit.Event{}, apperr.Conflict("the agent's policy changed since this action was evaluated; reload and decide again")
		}
		return audit.Event{}, errPolicyRace
	}
	var docMap map[string]any
	_ = audit.UnmarshalArgs(body, &docMap) // numbers kept exact
	return audit.Event{Kind: audit.KindPolicyUpdated, Actor: actor,
		Data: map[string]any{"scope": scope, "version": base + 1, "document": docMap}}, nil
}

// Policy returns the current version of scope; not_found when none exists.
func (s *Store) Policy(ctx context.Context, scope string) (PolicyVersion, error) {
	pv := PolicyVersion{Scope: scope}
	var body []byte
	err := s.pool.QueryRow(ctx, `SELECT version, document, created_by, created_at FROM policies
		WHERE scope = $1 ORDER BY version DESC LIMIT 1`, scope).Scan(&pv.Version, &body, &pv.CreatedBy, &pv.CreatedAt)
	if err != nil {
		return pv, notFound(err, "no policy for %s", scope)
	}
	if err := policy.DecodeStored(body, &pv.Document); err != nil {
		return pv, fmt.Errorf("store: decoding policy %s v%d: %w", scope, pv.Version, err)
	}
	pv.CreatedAt = pv.CreatedAt.UTC()
	return pv, nil
}

// compiledPolicy returns the compiled policy of scope at version (nil for
// version 0, meaning none), compiling it on first use.
func (s *Store) compiledPolicy(ctx context.Context, scope string, version int) (*policy.Compiled, error) {
	if version == 0 {
		return nil, nil
	}
	key := policyKey{scope, version}
	if c, ok := s.compiled.Load(key); ok {
		return c.(*policy.Compiled), nil
	}
	var body []byte
	err := s.pool.QueryRow(ctx, `SELECT document FROM policies WHERE scope = $1 AND version = $2`, scope, version).Scan(&body)
	if err != nil {
		return nil, fmt.Errorf("store: loading policy %s v%d: %w", scope, version, err)
	}
	var doc policy.Document
	if err := policy.DecodeStored(body, &doc); err != nil {
		return nil, fmt.Errorf("store: decoding policy %s v%d: %w", scope, version, err)
	}
	c, err := policy.Compile(doc, version)
	if err != nil {
		// A stored policy that no longer compiles must not decide anything.
		return nil, fmt.Errorf("store: compiling stored policy %s v%d: %w", scope, version, err)
	}
	s.compiled.Store(key, c)
	return c, nil
}

// agentEntry is a cached AgentPolicy result.
type agentEntry struct {
	agent hitl.Agent
	set   policy.Set
}

// AgentPolicy implements hitl.Store: the agent and its current compiled
// policies in one round trip (plus one per policy version not compiled
// yet). It refreshes the cache CachedAgentPolicy reads.
func (s *Store) AgentPolicy(ctx context.Context, agentID string) (hitl.Agent, policy.Set, error) {
	var a hitl.Agent
	var fleetV, agentV int
	err := s.pool.QueryRow(ctx, `
		SELECT a.id, a.name,
			(SELECT coalesce(max(version), 0) FROM policies WHERE scope = 'fleet'),
			(SELECT coalesce(max(version), 0) FROM policies WHERE scope = 'agent:' || a.id)
		FROM agents a WHERE a.id = $1`, agentID).Scan(&a.ID, &a.Name, &fleetV, &agentV)
	if err != nil {
		return a, policy.Set{}, notFound(err, "unknown agent %q", agentID)
	}
	fleet, err := s.compiledPolicy(ctx, FleetScope, fleetV)
	if err != nil {
		return a, policy.Set{}, err
	}
	own, err := s.compiledPolicy(ctx, agentScope(agentID), agentV)
	if err != nil {
		return a, policy.Set{}, err
	}
	set := policy.Set{Fleet: fleet, Agent: own}
	s.agents.Store(agentID, agentEntry{agent: a, set: set})
	return a, set, nil
}

// CachedAgentPolicy implements hitl.Store: AgentPolicy as last read by this
// instance, with no round trip. It can be stale (a policy changed since, on
// any instance); InsertAction's guard refuses a decision made on it.
func (s *Store) CachedAgentPolicy(ctx context.Context, agentID string) (hitl.Agent, policy.Set, error) {
	if e, ok := s.agents.Load(agentID); ok {
		e := e.(agentEntry)
		return e.agent, e.set, nil
	}
	return s.AgentPolicy(ctx, agentID)
}

// AgentPolicyAt implements hitl.Store.
func (s *Store) AgentPolicyAt(ctx context.Context, agentID string, version int) (*policy.Compiled, error) {
	return s.compiledPolicy(ctx, agentScope(agentID), version)
}

// PolicyVersions lists every version of scope, newest first.
func (s *Store) PolicyVersions(ctx context.Context, scope string) ([]PolicyVersion, error) {
	rows, err := s.pool.Query(ctx, `SELECT scope, version, document, created_by, created_at FROM policies
		WHERE scope = $1 ORDER BY version DESC`, scope)
	if err != nil {
		return nil, fmt.Errorf("store: listing policy versions: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (PolicyVersion, error) {
		var pv PolicyVersion
		var body []byte
		if err := r.Scan(&pv.Scope, &pv.Version, &body, &pv.CreatedBy, &pv.CreatedAt); err != nil {
			return pv, err
		}
		pv.CreatedAt = pv.CreatedAt.UTC()
		return pv, policy.DecodeStored(body, &pv.Document)
	})
}

// checkReferences refuses (422) a document naming a notification target
// or a reviewer group that does not exist: a typo would silently tell no
// one, or let no one approve.
func checkReferences(ctx context.Context, tx pgx.Tx, doc policy.Document) error {
	refs := doc.References()
	for _, c := range []struct {
		table, what, field string
		names              []string
	}{{"notify_targets", "notification target", "notify", refs.Targets}, {"reviewer_groups", "reviewer group", "reviewers", refs.Groups}} {
		missing, err := missingNames(ctx, tx, c.table, c.names)
		if err != nil {
			return err
		}
		if len(missing) > 0 {
			return &apperr.Error{Code: apperr.CodeValidation,
				Message: fmt.Sprintf("unknown %s %s: create it first", c.what, strings.Join(missing, ", ")),
				Details: map[string]any{"field": c.field, "unknown": missing}}
		}
	}
	return nil
}

// PolicyWrittenBy implements hitl.Store: the version its policy.updated
// event names (an "always" approval writes the event with the action's id,
// in its transaction).
func (s *Store) PolicyWrittenBy(ctx context.Context, actionID string) (int, error) {
	if !isUUID(actionID) {
		return 0, nil
	}
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT data FROM audit_events WHERE action_id = $1 AND kind = $2 ORDER BY id DESC LIMIT 1`,
		actionID, audit.KindPolicyUpdated).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: reading the policy version action %s wrote: %w", actionID, err)
	}
	var d struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return 0, fmt.Errorf("store: reading the policy version action %s wrote: %w", actionID, err)
	}
	return d.Version, nil
}
