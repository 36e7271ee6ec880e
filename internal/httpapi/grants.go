package httpapi

import (
	"net/http"

	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
)

// listGrants answers GET /api/v1/grants?agent=&conversation_id=: the
// active conversation grants.
func (s *Server) listGrants(w http.ResponseWriter, r *http.Request) {
	q, err := queryValues(r, []string{"agent", "conversation_id"})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	grants, err := s.svc.Grants(r.Context(), hitl.GrantFilter{AgentID: q.Get("agent"), ConversationID: q.Get("conversation_id")})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if grants == nil {
		grants = []hitl.Grant{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"grants": grants})
}

// revokeGrant answers DELETE /api/v1/grants/{id}: 204, and later calls
// go to a reviewer again.
func (s *Server) revokeGrant(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
	if _, err := s.svc.RevokeGrant(r.Context(), id, auth.FromContext(r.Context()).Subject); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
