package httpapi

import (
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
)

// SessionCookie is the name of the browser session cookie.
const SessionCookie = "airlock_session"

// recoverer turns a panic into a logged 500 with the error body.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "panic", "value", v, "stack", string(debug.Stack()))
				writeError(w, r, s.log, apperr.New(apperr.CodeInternal, "internal error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// observe logs each request and records its latency by route pattern.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		route := chi.RouteContext(r.Context()).RoutePattern()
		if route == "" {
			route = "unmatched"
		}
		elapsed := time.Since(start)
		if s.metrics != nil {
			s.metrics.ObserveHTTP(r.Method, route, ww.Status(), elapsed)
		}
		if s.logRequests {
			s.log.InfoContext(r.Context(), "http", "method", r.Method, "route", route, "status", ww.Status(), "ms", elapsed.Milliseconds())
		}
	})
}

// securityHeaders sets headers every response carries.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		next.ServeHTTP(w, r)
	})
}

// authenticate resolves the caller from a bearer token or the session
// cookie. Every request checks the token against the database, so a
// revocation or logout on any instance holds on the next request.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return s.authenticateWith(true, next)
}

// authenticateSubmit is authenticate for the submit route only: the
// revocation check happens in the same round trip as the agent's policy
// lookup (hitl.Service.Submit with the token ID), saving one query on the
// hottest path. TestRevocationIsImmediate covers it.
func (s *Server) authenticateSubmit(next http.Handler) http.Handler {
	return s.authenticateWith(false, next)
}

func (s *Server) authenticateWith(checkRevoked bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, fromCookie := bearer(r)
		if raw == "" {
			writeError(w, r, s.log, apperr.Unauthorized("missing bearer token or session cookie"))
			return
		}
		p, err := s.signer.Verify(raw, time.Now())
		if err != nil {
			writeError(w, r, s.log, apperr.Unauthorized("invalid or expired token"))
			return
		}
		if fromCookie && p.Kind != auth.KindUser {
			writeError(w, r, s.log, apperr.Unauthorized("session cookie does not hold a user session"))
			return
		}
		if checkRevoked {
			active, err := s.store.TokenActive(r.Context(), p.TokenID)
			if err != nil {
				writeError(w, r, s.log, err) // fail closed: 500, never let it through
				return
			}
			if !active {
				writeError(w, r, s.log, apperr.Unauthorized("token revoked or expired"))
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})
}

// bearer returns the request's token and whether it came from the cookie.
func bearer(r *http.Request) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "", false
		}
		return strings.TrimSpace(tok), false
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		return c.Value, true
	}
	return "", false
}

// require lets the request through only if the caller holds one of roles.
func (s *Server) require(roles ...auth.Role) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !auth.FromContext(r.Context()).HasAny(roles...) {
				writeError(w, r, s.log, apperr.Forbidden("this needs one of the roles %v", roles))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
