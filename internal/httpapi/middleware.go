package httpapi

import (
	"context"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/identity"
)

// SessionCookie is the name of the browser session cookie.
const SessionCookie = auth.SessionCookie

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
// cookie (identity.Service.Authenticate). Every request checks the token
// and its user against the database, so a revocation, logout or disabled
// user on any instance holds on the next request.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return s.authenticateWith("", next)
}

// authenticateSubmit is authenticate for the submit route only: the
// revocation check happens in the same round trip as the agent's policy
// lookup (hitl.Service.Submit with the token ID), saving one query on the
// hottest path. TestRevocationIsImmediate covers it.
func (s *Server) authenticateSubmit(next http.Handler) http.Handler {
	return s.authenticateWith(auth.KindAgent, next)
}

// authenticateWorkerJob is authenticate for a worker's lease and
// completion: the statement that leases or completes the job checks the
// worker's token (revoked or expired: 401) in the same round trip.
// TestRevokedWorkerTokenIsRefusedAtOnce covers it.
func (s *Server) authenticateWorkerJob(next http.Handler) http.Handler {
	return s.authenticateWith(auth.KindWorker, next)
}

// authenticateWith authenticates the caller, leaving the database check of
// a token of kind signed (empty: none) to the route's statement.
func (s *Server) authenticateWith(signed auth.Kind, next http.Handler) http.Handler {
	authenticate := s.ident.Authenticate
	if signed != "" {
		authenticate = func(ctx context.Context, raw string, src identity.Source) (*auth.Principal, error) {
			return s.ident.AuthenticateSigned(ctx, raw, src, signed)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, fromCookie := auth.Credentials(r)
		src := identity.Bearer
		if fromCookie {
			src = identity.Cookie
		}
		p, err := authenticate(r.Context(), raw, src)
		if err != nil {
			writeError(w, r, s.log, err) // a database failure is a 500: fail closed
			return
		}
		ctx := auth.WithPrincipal(r.Context(), p)
		if signed != "" && p.Kind == signed {
			// Its check in the database is the route's statement's; a
			// refusal before that statement makes it first (see writeError).
			ctx = withUnconfirmed(ctx, func(ctx context.Context) error {
				_, err := s.ident.Current(ctx, p)
				return err
			})
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
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

type unconfirmedKey struct{}

// withUnconfirmed marks a request whose token was checked by its signature
// only: confirm checks it in the database.
func withUnconfirmed(ctx context.Context, confirm func(context.Context) error) context.Context {
	return context.WithValue(ctx, unconfirmedKey{}, confirm)
}

// confirmToken is the refusal a request should hear when err refuses it: a
// token the database no longer holds active (revoked, expired, its user
// gone) hears 401 before anything about its request — a bad body, a held
// rate, a missing job — as it does on every other route. Only a refusal
// (4xx) of a request whose token is unconfirmed costs the lookup; if the
// lookup itself fails the request is refused all the same, with err.
func confirmToken(r *http.Request, e *apperr.Error) *apperr.Error {
	confirm, _ := r.Context().Value(unconfirmedKey{}).(func(context.Context) error)
	status := StatusOf(e.Code)
	if confirm == nil || status < 400 || status >= 500 || status == http.StatusUnauthorized {
		return e
	}
	if ue, ok := apperr.As(confirm(r.Context())); ok && ue.Code == apperr.CodeUnauthorized {
		return ue
	}
	return e
}
