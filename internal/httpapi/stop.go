package httpapi

import (
	"net/http"
	"time"

	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
)

// cancelAction: an agent withdraws its own pending action; a reviewer or
// admin stops any pending, approved or running one (optional {reason}).
func (s *Server) cancelAction(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
	p := auth.FromContext(r.Context())
	var req hitl.StopRequest
	if err := decodeOptional(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var a *hitl.Action
	var err error
	if p.Kind == auth.KindAgent {
		a, err = s.svc.Cancel(r.Context(), id, p.Subject)
	} else {
		a, err = s.svc.Stop(r.Context(), id, p.Subject, req)
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, view(p, a))
}

// suspensionView is the answer to a suspend or resume.
type suspensionView struct {
	AgentID     string     `json:"agent_id"`
	Suspended   bool       `json:"suspended"`
	SuspendedAt *time.Time `json:"suspended_at,omitempty"`
	// Cancelled lists the actions the suspension stopped.
	Cancelled []string `json:"cancelled,omitempty"`
}

// suspendAgent: POST /api/v1/agents/{id}/suspend (admin), no body or {}.
func (s *Server) suspendAgent(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
	if err := decodeOptional(w, r, &struct{}{}); err != nil { // takes no field
		writeError(w, r, s.log, err)
		return
	}
	stopped, err := s.svc.SuspendAgent(r.Context(), id, auth.FromContext(r.Context()).Subject)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	at, err := s.store.AgentSuspendedAt(r.Context(), id)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	ids := make([]string, len(stopped))
	for i, a := range stopped {
		ids[i] = a.ID
	}
	writeJSON(w, http.StatusOK, suspensionView{AgentID: id, Suspended: at != nil, SuspendedAt: at, Cancelled: ids})
}

// resumeAgent: POST /api/v1/agents/{id}/resume (admin), no body or {}.
func (s *Server) resumeAgent(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
	if err := decodeOptional(w, r, &struct{}{}); err != nil { // takes no field
		writeError(w, r, s.log, err)
		return
	}
	if err := s.svc.ResumeAgent(r.Context(), id, auth.FromContext(r.Context()).Subject); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	at, err := s.store.AgentSuspendedAt(r.Context(), id)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, suspensionView{AgentID: id, Suspended: at != nil, SuspendedAt: at})
}
