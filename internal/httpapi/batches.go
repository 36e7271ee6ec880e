package httpapi

import (
	"net/http"

	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
)

func (s *Server) createBatch(w http.ResponseWriter, r *http.Request) {
	var req hitl.BatchRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	b, err := s.svc.CreateBatch(r.Context(), auth.FromContext(r.Context()).Subject, req)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, b)
}

func (s *Server) getBatch(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
	b, err := s.svc.Batch(r.Context(), id, auth.FromContext(r.Context()).Subject)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, b)
}

// batchApproval is the answer to a batch approval: what happened to each
// of its actions, in the batch's order.
type batchApproval struct {
	Batch   *hitl.Batch         `json:"batch"`
	Actions []hitl.BatchOutcome `json:"actions"`
}

func (s *Server) approveBatch(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
	var req hitl.BatchApproveRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	p := auth.FromContext(r.Context())
	b, out, err := s.svc.ApproveBatch(r.Context(), id, p.Subject, req)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	for i := range out {
		if out[i].Action != nil {
			v := view(p, out[i].Action)
			out[i].Action = &v
		}
	}
	writeJSON(w, http.StatusOK, batchApproval{Batch: b, Actions: out})
}
