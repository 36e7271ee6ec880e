package httpapi

import (
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/airlockhq/airlock/internal/apperr"
)

// PathParam returns r's path parameter key ({id}, {name}…) decoded: the one
// way every handler, the API's and the console's, reads one.
//
// chi matches a route on r.URL.RawPath when the request's path has an
// escape Go would not have written (alice%40corp, t%61rget, a%2Fb), so that
// an escaped "/" stays inside its segment and cannot select another route,
// and then hands the parameter back still escaped; otherwise it matches on
// r.URL.Path, decoded already. PathParam decodes in the first case only, so
// never twice (t%2561rget is the id "t%61rget"). The value may hold "/" or
// anything else CleanInput lets through (it refused NUL and invalid UTF-8
// in the decoded path): the handlers' services validate and look it up as
// any name they are given.
func PathParam(r *http.Request, key string) (string, error) {
	v := chi.URLParam(r, key)
	if routePath(r) == r.URL.Path {
		return v, nil
	}
	d, err := url.PathUnescape(v)
	if err != nil {
		e := apperr.Invalid("the path's %s is not validly percent-encoded", key)
		e.Details = map[string]any{"field": "path." + key}
		return "", e
	}
	return d, nil
}

// pathParam is PathParam for the API's handlers: false when it has
// answered the error.
func (s *Server) pathParam(w http.ResponseWriter, r *http.Request, key string) (string, bool) {
	v, err := PathParam(r, key)
	if err != nil {
		writeError(w, r, s.log, err)
		return "", false
	}
	return v, true
}

// routePath is the path chi routes r on (see PathParam).
func routePath(r *http.Request) string {
	if r.URL.RawPath != "" {
		return r.URL.RawPath
	}
	return r.URL.Path
}
