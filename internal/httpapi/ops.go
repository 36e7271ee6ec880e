package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
)

var (
	errNotFound = apperr.NotFound("no such endpoint")
	errMethod   = apperr.New(apperr.CodeInvalid, "method not allowed")
)

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz reports ready only when Postgres answers.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: errorDetail{Code: apperr.CodeUnavailable, Message: "database unavailable"}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
