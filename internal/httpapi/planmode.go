package httpapi

import (
	"net/http"

	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
)

// getAgentPlanMode: GET /api/v1/agents/{id}/plan-mode.
func (s *Server) getAgentPlanMode(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
	pm, err := s.svc.PlanMode(r.Context(), id)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, pm)
}

// putAgentPlanMode: PUT /api/v1/agents/{id}/plan-mode {on, reason?}
// (admin, reviewer).
func (s *Server) putAgentPlanMode(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
	s.setPlanMode(w, r, id)
}

// getFleetPlanMode: GET /api/v1/fleet/plan-mode.
func (s *Server) getFleetPlanMode(w http.ResponseWriter, r *http.Request) {
	pm, err := s.svc.PlanMode(r.Context(), "")
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, pm.Fleet)
}

// putFleetPlanMode: PUT /api/v1/fleet/plan-mode {on, reason?} (admin,
// reviewer).
func (s *Server) putFleetPlanMode(w http.ResponseWriter, r *http.Request) {
	s.setPlanMode(w, r, "")
}

func (s *Server) setPlanMode(w http.ResponseWriter, r *http.Request, agentID string) {
	var req hitl.PlanModeRequest
	body, err := readBody(w, r)
	if err == nil {
		err = decodeJSON(body, &req)
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	pm, err := s.svc.SetPlanMode(r.Context(), agentID, auth.FromContext(r.Context()).Subject, req)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if agentID == "" {
		writeJSON(w, http.StatusOK, pm.Fleet)
		return
	}
	writeJSON(w, http.StatusOK, pm)
}

// getFleetSuspension: GET /api/v1/fleet/suspension.
func (s *Server) getFleetSuspension(w http.ResponseWriter, r *http.Request) {
	st, err := s.svc.FleetStopState(r.Context())
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// suspendFleet: POST /api/v1/fleet/suspend {reason?} (admin), the fleet
// emergency stop.
func (s *Server) suspendFleet(w http.ResponseWriter, r *http.Request) {
	var req hitl.StopRequest
	if err := decodeOptional(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	st, err := s.svc.SuspendFleet(r.Context(), auth.FromContext(r.Context()).Subject, req)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// resumeFleet: POST /api/v1/fleet/resume (admin), no body or {}. It takes
// no reason: the stop's who, when and why are cleared by it, and the audit
// event names who resumed; a reason sent is refused, not dropped.
func (s *Server) resumeFleet(w http.ResponseWriter, r *http.Request) {
	if err := decodeOptional(w, r, &struct{}{}); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	st, err := s.svc.ResumeFleet(r.Context(), auth.FromContext(r.Context()).Subject)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
