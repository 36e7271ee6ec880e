package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/openapi"
)

var errNotFound = apperr.NotFound("no such endpoint")

// routeMethods are the methods the route table uses, in the order an Allow
// header lists them.
var routeMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// methodNotAllowed answers a known path asked with a method it does not
// serve: 405 with the methods it does serve in Allow (RFC 9110 15.5.6) and
// the error body. chi does not hand its list to a custom handler, so the
// route table is asked for each method.
func (s *Server) methodNotAllowed(routes chi.Routes, w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range routeMethods {
		if routes.Match(chi.NewRouteContext(), m, r.URL.Path) {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) == 0 {
		writeError(w, r, s.log, errNotFound)
		return
	}
	allow := strings.Join(allowed, ", ")
	w.Header().Set("Allow", allow)
	writeError(w, r, s.log, apperr.New(apperr.CodeMethod, "%s is not allowed here; use %s", r.Method, allow))
}

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

// openapiDoc serves the API's OpenAPI document (no auth: it is the
// contract, not data).
func (s *Server) openapiDoc(w http.ResponseWriter, r *http.Request) {
	doc, err := openapi.JSON()
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(doc)
}
