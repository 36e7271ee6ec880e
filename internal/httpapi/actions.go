package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
)

// view returns the action as the caller may see it: reviewers see the
// confirmation phrase while it is pending, nobody else ever does; the
// agent sees of an exec's impact preview only its status (hitl.ForAgent).
func view(p *auth.Principal, a *hitl.Action) hitl.Action {
	switch {
	case p.Has(auth.RoleReviewer):
		return a.ForReviewer()
	case p.HasAny(auth.RoleAuditor, auth.RoleAdmin):
		return a.ForAuditor()
	}
	return a.ForAgent()
}

func (s *Server) submitAction(w http.ResponseWriter, r *http.Request) {
	p := auth.FromContext(r.Context())
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	// An agent past its rate is refused before its body is decoded (the
	// Service checks again, for the other callers).
	if err := s.svc.RateHeld(p.Subject); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var req hitl.SubmitRequest
	if err := decodeJSON(body, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	req.BodyBytes = len(body)
	// The token's revocation check rides on the policy lookup (see routes).
	a, created, err := s.svc.Submit(r.Context(), p.Subject, p.TokenID, req)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	writeJSON(w, status, view(p, a))
}

// canRead applies "agent (own), reviewer, auditor". Another agent's action
// is reported as missing, so agents cannot probe for IDs.
func canRead(p *auth.Principal, a *hitl.Action) error {
	switch {
	case p.HasAny(auth.RoleReviewer, auth.RoleAuditor):
		return nil
	case p.Has(auth.RoleAgent) && p.Kind == auth.KindAgent && a.AgentID == p.Subject:
		return nil
	case p.Has(auth.RoleAgent):
		return apperr.NotFound("no action %s", a.ID)
	}
	return apperr.Forbidden("this needs the reviewer or auditor role, or the agent that submitted the action")
}

func (s *Server) getAction(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
	p := auth.FromContext(r.Context())
	if !p.HasAny(auth.RoleAgent, auth.RoleReviewer, auth.RoleAuditor) {
		writeError(w, r, s.log, apperr.Forbidden("this needs the agent, reviewer or auditor role"))
		return
	}
	q, err := queryValues(r, []string{"wait"})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			writeError(w, r, s.log, apperr.Invalid("wait must be a non-negative duration such as 30s"))
			return
		}
		wait = min(d, hitl.MaxWait)
	}
	// A caller holding as many long polls as it may on this instance is
	// refused (429 with Retry-After), not answered at once as if it had
	// not asked to wait: a client looping on Wait would spin.
	release := func() {}
	if wait > 0 {
		if release, err = s.longPolls.Enter(p); err != nil {
			writeError(w, r, s.log, err)
			return
		}
		defer release()
	}
	check := func(a *hitl.Action) error { return canRead(p, a) }
	a, err := s.svc.Wait(r.Context(), id, wait, check)
	release() // before answering: a caller that read the answer may poll again at once
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, view(p, a))
}

func (s *Server) listActions(w http.ResponseWriter, r *http.Request) {
	q, err := queryValues(r, []string{"status", "agent", "risk", "tool", "decided_by", "can_approve", "since", "until", "limit", "cursor"})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	f := hitl.ListFilter{Status: hitl.Status(q.Get("status")), AgentID: q.Get("agent"), Risk: q.Get("risk"), Tool: q.Get("tool"),
		DecidedBy: q.Get("decided_by"), Cursor: q.Get("cursor")}
	if v := q.Get("can_approve"); v != "" { // the queue's "actions I can approve" (hitl.ApprovalProblem)
		if v != "me" {
			writeError(w, r, s.log, apperr.Invalid(`can_approve must be "me" (the actions the caller may approve)`))
			return
		}
		f.CanApprove = auth.FromContext(r.Context()).Subject
	}
	for name, at := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				writeError(w, r, s.log, apperr.Invalid("%s must be an RFC 3339 time, e.g. 2026-12-01T09:00:00Z", name))
				return
			}
			*at = t
		}
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			writeError(w, r, s.log, apperr.Invalid("limit must be a positive integer"))
			return
		}
		f.Limit = n
	}
	actions, next, err := s.svc.List(r.Context(), f)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	p := auth.FromContext(r.Context())
	out := make([]hitl.Action, len(actions))
	for i, a := range actions {
		out[i] = view(p, a)
	}
	writeJSON(w, http.StatusOK, map[string]any{"actions": out, "next_cursor": next})
}

func (s *Server) reportResult(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
	var req hitl.ResultRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	p := auth.FromContext(r.Context())
	a, err := s.svc.Result(r.Context(), id, p.Subject, req)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, view(p, a))
}

func (s *Server) approveAction(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
	var req hitl.ApproveRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	p := auth.FromContext(r.Context())
	a, err := s.svc.Approve(r.Context(), id, p.Subject, req)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, view(p, a))
}

func (s *Server) denyAction(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
	var req hitl.DenyRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	p := auth.FromContext(r.Context())
	a, err := s.svc.Deny(r.Context(), id, p.Subject, req)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, view(p, a))
}
