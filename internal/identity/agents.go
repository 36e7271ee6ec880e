package identity

import (
	"context"
	"math"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
)

// NewAgent is a request to register an agent.
type NewAgent struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Owner names the user answerable for the agent (any case); empty: the
	// admin who registers it.
	Owner string `json:"owner,omitempty"`
}

// Agent field bounds.
const (
	maxAgentName        = 200
	maxAgentDescription = 4096
)

// CreateAgent registers an agent (admin), owned by req.Owner or else by the
// admin registering it.
func (s *Service) CreateAgent(ctx context.Context, actor *auth.Principal, req NewAgent) (Agent, error) {
	if err := requireRole(actor, auth.RoleAdmin); err != nil {
		return Agent{}, err
	}
	if req.ID == "" || req.Name == "" {
		return Agent{}, apperr.Invalid("id and name are required")
	}
	if len(req.Name) > maxAgentName || len(req.Description) > maxAgentDescription {
		return Agent{}, apperr.Invalid("name must be at most %d bytes and description at most %d", maxAgentName, maxAgentDescription)
	}
	owner := actor.Subject
	if req.Owner != "" {
		u, err := s.store.UserByName(ctx, req.Owner)
		if apperr.CodeOf(err) == apperr.CodeNotFound {
			return Agent{}, apperr.Invalid("owner %q is not a user", req.Owner)
		}
		if err != nil {
			return Agent{}, err
		}
		owner = u.Username
	}
	return s.store.CreateAgent(ctx, Agent{ID: req.ID, Name: req.Name, Description: req.Description,
		Owner: owner, CreatedBy: actor.Subject})
}

// staff may read agents.
var staff = []auth.Role{auth.RoleAdmin, auth.RoleReviewer, auth.RoleAuditor}

// Agents lists the agents (admin, reviewer, auditor).
func (s *Service) Agents(ctx context.Context, actor *auth.Principal) ([]Agent, error) {
	if err := requireRole(actor, staff...); err != nil {
		return nil, err
	}
	return s.store.Agents(ctx)
}

// Agent returns one agent (admin, reviewer, auditor).
func (s *Service) Agent(ctx context.Context, actor *auth.Principal, id string) (Agent, error) {
	if err := requireRole(actor, staff...); err != nil {
		return Agent{}, err
	}
	return s.store.Agent(ctx, id)
}

// AgentOwner returns the user answerable for an agent ("" when it has
// none); not_found for an unknown agent.
func (s *Service) AgentOwner(ctx context.Context, agentID string) (string, error) {
	a, err := s.store.Agent(ctx, agentID)
	return a.Owner, err
}

// TokenIssuer returns the user (or "system") who issued a token; not_found
// for an unknown token.
func (s *Service) TokenIssuer(ctx context.Context, tokenID string) (string, error) {
	return s.store.TokenIssuer(ctx, tokenID)
}

// Agent token lifetimes: the one rule for the API and the console.
const (
	DefaultAgentTokenTTL = 30 * 24 * time.Hour
	MinAgentTokenTTL     = time.Second
	MaxAgentTokenTTL     = 366 * 24 * time.Hour
)

// TokenLifetime is the one rule for how long an issued agent or worker
// token lasts: ttl, or def when ttl is 0, between MinAgentTokenTTL and
// MaxAgentTokenTTL.
func TokenLifetime(ttl, def time.Duration) (time.Duration, error) {
	if ttl == 0 {
		ttl = def
	}
	if ttl < MinAgentTokenTTL || ttl > MaxAgentTokenTTL {
		return 0, apperr.Invalid("a token lifetime (ttl_seconds) must be between 1 second and 366 days (%d seconds)",
			int64(MaxAgentTokenTTL/time.Second))
	}
	return ttl, nil
}

// SecondsTTL turns a request's ttl_seconds into a duration without
// overflowing: a value past any lifetime stays past it (and is refused by
// TokenLifetime), a negative one stays negative.
func SecondsTTL(n int64) time.Duration {
	switch {
	case n > math.MaxInt64/int64(time.Second):
		return math.MaxInt64
	case n < 0:
		return -1
	}
	return time.Duration(n) * time.Second
}

// IssueAgentToken issues a token for an agent (admin) valid for ttl (0:
// DefaultAgentTokenTTL). The token's secret is in the result only.
func (s *Service) IssueAgentToken(ctx context.Context, actor *auth.Principal, agentID string, ttl time.Duration) (auth.Token, error) {
	if err := requireRole(actor, auth.RoleAdmin); err != nil {
		return auth.Token{}, err
	}
	ttl, err := TokenLifetime(ttl, DefaultAgentTokenTTL)
	if err != nil {
		return auth.Token{}, err
	}
	ag, err := s.store.Agent(ctx, agentID)
	if err != nil {
		return auth.Token{}, err
	}
	tok, err := s.signer.Issue(auth.KindAgent, ag.ID, []auth.Role{auth.RoleAgent}, ttl, s.now())
	if err != nil {
		return auth.Token{}, err
	}
	ev := audit.Event{Kind: audit.KindTokenIssued, Actor: actor.Subject, AgentID: ag.ID,
		Data: map[string]any{"token_id": tok.ID, "kind": tok.Kind, "expires_at": tok.ExpiresAt}}
	if err := s.store.RecordToken(ctx, tok, actor.Subject, ev); err != nil {
		return auth.Token{}, err
	}
	return tok, nil
}

// AgentTokens lists an agent's tokens (admin).
func (s *Service) AgentTokens(ctx context.Context, actor *auth.Principal, agentID string) ([]TokenInfo, error) {
	if err := requireRole(actor, auth.RoleAdmin); err != nil {
		return nil, err
	}
	return s.store.AgentTokens(ctx, agentID)
}

// RevokeToken revokes any token by id (admin); it stops working at once on
// every instance, its open streams included: every open stream checks its
// session again (the store does not say whose token it was, and only the
// revoked token's streams end).
func (s *Service) RevokeToken(ctx context.Context, actor *auth.Principal, tokenID string) error {
	if err := requireRole(actor, auth.RoleAdmin); err != nil {
		return err
	}
	if err := s.store.RevokeToken(ctx, tokenID, actor.Subject); err != nil {
		return err
	}
	s.announce("")
	return nil
}

// RevokeAgentToken revokes one of an agent's tokens (admin); not_found
// when the agent has no such token.
func (s *Service) RevokeAgentToken(ctx context.Context, actor *auth.Principal, agentID, tokenID string) error {
	tokens, err := s.AgentTokens(ctx, actor, agentID)
	if err != nil {
		return err
	}
	for _, t := range tokens {
		if t.ID == tokenID {
			return s.store.RevokeToken(ctx, tokenID, actor.Subject)
		}
	}
	return apperr.NotFound("agent %s has no token %s", agentID, tokenID)
}
