package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
)

// Worker token lifetimes.
const (
	defaultWorkerTokenTTL = 90 * 24 * time.Hour
	maxWorkerTokenTTL     = 366 * 24 * time.Hour
)

// issueWorkerToken issues a worker-role token named after the worker host.
func (s *Server) issueWorkerToken(w http.ResponseWriter, r *http.Request) {
	ttl, err := readTTL(w, r, defaultWorkerTokenTTL, maxWorkerTokenTTL)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	name := chi.URLParam(r, "name")
	if err := (hitl.Worker{Name: name, Kinds: []string{hitl.ToolExec}, Targets: []string{"x"}}).Validate(); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	tok, err := s.IssueWorkerToken(r.Context(), auth.FromContext(r.Context()).Subject, name, ttl)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, issueTokenResponse{Token: tok.Raw, TokenID: tok.ID, ExpiresAt: tok.ExpiresAt})
}

// IssueWorkerToken issues and records a worker token; the embedded worker
// gets its token through it too.
func (s *Server) IssueWorkerToken(ctx context.Context, actor, name string, ttl time.Duration) (auth.Token, error) {
	tok, err := s.signer.Issue(auth.KindWorker, name, []auth.Role{auth.RoleWorker}, ttl, time.Now())
	if err != nil {
		return auth.Token{}, err
	}
	ev := audit.Event{Kind: audit.KindTokenIssued, Actor: actor,
		Data: map[string]any{"token_id": tok.ID, "kind": tok.Kind, "worker": name, "expires_at": tok.ExpiresAt}}
	return tok, s.store.RecordToken(ctx, tok, actor, ev)
}

func workerName(r *http.Request) (string, error) {
	p := auth.FromContext(r.Context())
	if p.Kind != auth.KindWorker {
		return "", apperr.Forbidden("this needs a worker token")
	}
	return p.Subject, nil
}

type leaseRequest struct {
	Kinds   []string `json:"kinds"`
	Targets []string `json:"targets"`
	Wait    string   `json:"wait,omitempty"`
}

func (s *Server) leaseJob(w http.ResponseWriter, r *http.Request) {
	name, err := workerName(r)
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
	l, err := s.svc.Lease(r.Context(), hitl.Worker{Name: name, Kinds: req.Kinds, Targets: req.Targets}, wait)
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
	name, err := workerName(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var req heartbeatRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	until, err := s.svc.Heartbeat(r.Context(), name, chi.URLParam(r, "id"), req.Fence)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"lease_expires_at": until})
}

type completeRequest struct {
	Fence  int64          `json:"fence"`
	Result hitl.JobResult `json:"result"`
}

func (s *Server) completeJob(w http.ResponseWriter, r *http.Request) {
	name, err := workerName(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var req completeRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	a, err := s.svc.Complete(r.Context(), name, chi.URLParam(r, "id"), req.Fence, req.Result)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}
