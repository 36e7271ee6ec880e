package web

import (
	"bytes"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/a-h/templ"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/httpapi"
	"github.com/airlockhq/airlock/web/templates"
)

// contentSecurityPolicy allows scripts, styles and connections from this
// origin only: no inline script, no inline style, no framing (an approval
// page must never be framed), forms post only here.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"font-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// securityHeaders sets the headers every console response carries.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
		next.ServeHTTP(w, r)
	})
}

// recoverer turns a panic into a logged 500 page.
func (h *Handler) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				h.log.ErrorContext(r.Context(), "console panic", "value", v, "stack", string(debug.Stack()))
				h.fail(w, r, apperr.New(apperr.CodeInternal, "internal error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// render writes a page. It renders into a buffer first so that a template
// error becomes a clean 500 rather than half a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		h.log.ErrorContext(r.Context(), "rendering page", "path", r.URL.Path, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// statusOf maps an error's code to an HTTP status, as the API does.
func statusOf(err error) int { return httpapi.StatusOf(apperr.CodeOf(err)) }

// message is what a person may read about err: the domain message, or a
// generic one for internal errors (whose details go to the log).
func (h *Handler) message(r *http.Request, err error) string {
	if e, ok := apperr.As(err); ok && e.Code != apperr.CodeInternal {
		return e.Message
	}
	h.log.ErrorContext(r.Context(), "console request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	return "Something went wrong on our side; it has been logged. Try again."
}

var statusTitles = map[int]string{
	http.StatusBadRequest: "Bad request", http.StatusUnauthorized: "Sign in first", http.StatusForbidden: "Not allowed",
	http.StatusNotFound: "Not found", http.StatusMethodNotAllowed: "Method not allowed", http.StatusConflict: "Conflict", http.StatusUnprocessableEntity: "Not accepted",
	http.StatusTooManyRequests: "Too many requests", http.StatusServiceUnavailable: "Unavailable",
}

// fail renders err as a full-page error.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := statusOf(err)
	title := statusTitles[status]
	if title == "" {
		title = "Error"
	}
	h.render(w, r, status, templates.ErrorPage(templates.ErrorView{Status: status, Title: title, Message: h.message(r, err)}))
}

// page builds the frame of a signed-in page.
func (h *Handler) page(r *http.Request, title, nav string) templates.Page {
	p := auth.FromContext(r.Context())
	return templates.Page{
		Title: title, Nav: nav, User: p.Subject,
		IsAdmin: p.Has(auth.RoleAdmin), IsReviewer: p.Has(auth.RoleReviewer), IsAuditor: p.Has(auth.RoleAuditor),
		CSRF: h.csrfToken(p), Now: time.Now(),
	}
}

func loginPage(username, next, msg, csrf string, sso bool) templ.Component {
	return templates.Login(templates.LoginView{Username: username, Next: next, Error: msg, CSRF: csrf, SSO: sso})
}

// seeOther redirects after a successful POST.
func seeOther(w http.ResponseWriter, r *http.Request, url string) {
	http.Redirect(w, r, url, http.StatusSeeOther)
}

// pathParam reads a path parameter as the API does (httpapi.PathParam):
// false when it has answered the error.
func (h *Handler) pathParam(w http.ResponseWriter, r *http.Request, key string) (string, bool) {
	v, err := httpapi.PathParam(r, key)
	if err != nil {
		h.fail(w, r, err)
		return "", false
	}
	return v, true
}
