package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/identity"
)

// defaultWorkerTokenTTL is a worker token's lifetime when the request
// names none (identity.TokenLifetime bounds the rest).
const defaultWorkerTokenTTL = 90 * 24 * time.Hour

type issueWorkerTokenRequest struct {
	Targets    []string `json:"targets"`
	TTLSeconds int64    `json:"ttl_seconds,omitempty"`
}

type issueWorkerTokenResponse struct {
	issueTokenResponse
	Targets []string `json:"targets"`
}

// issueWorkerToken issues a worker-role token named after the worker host,
// for the targets it may serve.
func (s *Server) issueWorkerToken(w http.ResponseWriter, r *http.Request) {
	name, ok := s.pathParam(w, r, "name")
	if !ok {
		return
	}
	var req issueWorkerTokenRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	ttl, err := identity.TokenLifetime(identity.SecondsTTL(req.TTLSeconds), defaultWorkerTokenTTL)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	tok, err := s.IssueWorkerToken(r.Context(), auth.FromContext(r.Context()).Subject, name, req.Targets, ttl)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, issueWorkerTokenResponse{
		issueTokenResponse: issueTokenResponse{Token: tok.Raw, TokenID: tok.ID, ExpiresAt: tok.ExpiresAt}, Targets: tok.Targets})
}

// IssueWorkerToken issues and records a worker token for the targets the
// worker may serve (hitl.ValidateTargets); the embedded worker gets its
// token through it too.
func (s *Server) IssueWorkerToken(ctx context.Context, actor, name string, targets []string, ttl time.Duration) (auth.Token, error) {
	if err := (hitl.Worker{Name: name, Kinds: []string{hitl.ToolExec}, Targets: []string{"x"}}).Validate(); err != nil {
		return auth.Token{}, err
	}
	targets, err := hitl.ValidateTargets(targets)
	if err != nil {
		return auth.Token{}, err
	}
	tok, err := s.signer.Issue(auth.KindWorker, name, []auth.Role{auth.RoleWorker}, ttl, time.Now())
	if err != nil {
		return auth.Token{}, err
	}
	tok.Targets = targets
	ev := audit.Event{Kind: audit.KindTokenIssued, Actor: actor,
		Data: map[string]any{"token_id": tok.ID, "kind": tok.Kind, "worker": name, "targets": targets, "expires_at": tok.ExpiresAt}}
	return tok, s.store.RecordToken(ctx, tok, actor, ev)
}

// caller is the worker host calling: its name and its token.
func caller(r *http.Request) (hitl.Worker, error) {
	p := auth.FromContext(r.Context())
	if p.Kind != auth.KindWorker {
		return hitl.Worker{}, apperr.Forbidden("this needs a worker token")
	}
	return hitl.Worker{Name: p.Subject, TokenID: p.TokenID}, nil
}

type leaseRequest struct {
	Kinds   []string `json:"kinds"`
	Targets []string `json:"targets"`
	Wait    string   `json:"wait,omitempty"`
}

func (s *Server) leaseJob(w http.ResponseWriter, r *http.Request) {
	wk, err := caller(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var req leaseRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var wait time.Duration
	if req.Wait != "" {
		if wait, err = time.ParseDuration(req.Wait); err != nil || wait < 0 {
			writeError(w, r, s.log, apperr.Invalid("wait must be a non-negative duration such as 30s"))
			return
		}
	}
	wk.Kinds, wk.Targets = req.Kinds, req.Targets
	release := func() {}
	if wait > 0 { // a lease that waits is a long poll of the worker's
		if release, err = s.longPolls.Enter(auth.FromContext(r.Context())); err != nil {
			writeError(w, r, s.log, err)
			return
		}
		defer release()
	}
	l, err := s.svc.Lease(r.Context(), wk, wait)
	release()
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if l == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"job": l})
}

type heartbeatRequest struct {
	Fence int64 `json:"fence"`
}

func (s *Server) heartbeatJob(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
	wk, err := caller(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var req heartbeatRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	ans, err := s.svc.Heartbeat(r.Context(), wk, id, req.Fence)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

type completeRequest struct {
	Fence  int64          `json:"fence"`
	Result hitl.JobResult `json:"result"`
}

func (s *Server) completeJob(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
	wk, err := caller(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var req completeRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	a, err := s.svc.Complete(r.Context(), wk, id, req.Fence, req.Result)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}
