package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/openapi"
)

var errNotFound = apperr.NotFound("no such endpoint")

// routeMethods are the methods the route tables use, in the order an Allow
// header lists them.
var routeMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// MethodNotAllowed is the answer to a path asked with a method it does not
// serve: it sets Allow to the methods routes does serve there (RFC 9110
// 15.5.6) and returns the method_not_allowed error (405) to answer with, or
// not_found when routes serves the path with no method. chi does not hand
// its list to a custom handler, so the route table is asked for each
// method. The console's router uses it too.
func MethodNotAllowed(routes chi.Routes, w http.ResponseWriter, r *http.Request) error {
	var allowed []string
	for _, m := range routeMethods {
		if routes.Match(chi.NewRouteContext(), m, routePath(r)) {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) == 0 {
		return errNotFound
	}
	allow := strings.Join(allowed, ", ")
	w.Header().Set("Allow", allow)
	return apperr.New(apperr.CodeMethod, "%s is not allowed here; use %s", r.Method, allow)
}

// WriteError answers with err as the API's error body (the console uses it
// for the API paths it serves).
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	writeError(w, r, log, err)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// requireMetricsToken lets a request through to /metrics only with
// "Authorization: Bearer <AIRLOCK_METRICS_TOKEN>" when that token is set
// (401 otherwise). The token's hash is compared in constant time, so
// neither its bytes nor its length leak through timing.
func (s *Server) requireMetricsToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.metricsToken != nil {
			given, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			sum := sha256.Sum256([]byte(given))
			if !ok || subtle.ConstantTimeCompare(sum[:], s.metricsToken) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="airlock-metrics"`)
				writeError(w, r, s.log, apperr.Unauthorized("/metrics needs Authorization: Bearer and the metrics token (AIRLOCK_METRICS_TOKEN)"))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
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
