package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/httpapi"
	"github.com/airlockhq/airlock/internal/identity"
)

var (
	errUnauthorized = apperr.Unauthorized("sign in first")
	errNotFound     = apperr.NotFound("there is no such page")
	errCSRF         = apperr.Forbidden("this form's security token is missing or wrong; reload the page and try again")
)

// maxFormBytes bounds a console form (a policy document is the largest).
const maxFormBytes = 1 << 20

// sessionPrincipal returns the user of the request's session cookie
// (identity.Service.Authenticate: the one check every surface makes).
func (h *Handler) sessionPrincipal(r *http.Request) (*auth.Principal, error) {
	p, err := h.ident.Authenticate(r.Context(), auth.SessionToken(r), identity.Cookie)
	if apperr.CodeOf(err) == apperr.CodeUnauthorized {
		return nil, errUnauthorized
	}
	return p, err
}

// session lets signed-in users through and sends everyone else to the
// login form (coming back to the page they asked for, if it was a GET).
func (h *Handler) session(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := h.sessionPrincipal(r)
		if err != nil {
			if apperr.CodeOf(err) != apperr.CodeUnauthorized {
				h.fail(w, r, err)
				return
			}
			target := "/ui/login"
			if r.Method == http.MethodGet && r.URL.Path != "/ui/queue/rows" {
				target += "?" + url.Values{"next": {r.URL.RequestURI()}}.Encode()
			}
			http.Redirect(w, r, target, http.StatusSeeOther)
			return
		}
		next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})
}

// require lets the request through only if the user holds one of roles.
func (h *Handler) require(roles ...auth.Role) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !auth.FromContext(r.Context()).HasAny(roles...) {
				h.fail(w, r, apperr.Forbidden("this page needs one of the roles %s", roleList(roles)))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func roleList(roles []auth.Role) string {
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// csrfToken is the form token of a session: an HMAC of its token ID under
// a key every instance derives from the shared signing key. It needs no
// storage, works on every instance and dies with the session.
func (h *Handler) csrfToken(p *auth.Principal) string {
	return h.mac("session|" + p.TokenID)
}

func (h *Handler) mac(msg string) string {
	m := hmac.New(sha256.New, h.csrfKey)
	m.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// csrf refuses a state-changing request whose form does not carry the
// session's token (after http.CrossOriginProtection has refused cross-site
// ones).
func (h *Handler) csrf(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			next.ServeHTTP(w, r)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			h.fail(w, r, apperr.Invalid("the form could not be read"))
			return
		}
		want := h.csrfToken(auth.FromContext(r.Context()))
		if !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(want)) {
			h.fail(w, r, errCSRF)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loginCookie binds the login form's token before there is a session.
const loginCookie = "airlock_login"

func (h *Handler) secureRequest(r *http.Request) bool { return h.secure || r.TLS != nil }

// home sends the user where their role works.
func (h *Handler) home(w http.ResponseWriter, r *http.Request) {
	p, err := h.sessionPrincipal(r)
	if err != nil {
		http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, landing(p), http.StatusSeeOther)
}

func landing(p *auth.Principal) string {
	if p.HasAny(auth.RoleReviewer, auth.RoleAuditor) {
		return "/ui/queue"
	}
	return "/ui/agents"
}

// safeNext accepts only a path of this console as where to go after login.
func safeNext(next string) string {
	if strings.HasPrefix(next, "/ui/") && !strings.HasPrefix(next, "//") && !strings.ContainsAny(next, "\\\r\n") {
		return next
	}
	return ""
}

func (h *Handler) loginForm(w http.ResponseWriter, r *http.Request) {
	if p, err := h.sessionPrincipal(r); err == nil {
		http.Redirect(w, r, landing(p), http.StatusSeeOther)
		return
	}
	h.renderLogin(w, r, http.StatusOK, "", safeNext(r.URL.Query().Get("next")), "")
}

// renderLogin shows the login form with a fresh pre-session token.
func (h *Handler) renderLogin(w http.ResponseWriter, r *http.Request, status int, username, next, msg string) {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	nonce := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: nonce, Path: "/ui/login", MaxAge: 3600,
		HttpOnly: true, Secure: h.secureRequest(r), SameSite: http.SameSiteStrictMode})
	h.render(w, r, status, loginPage(username, next, msg, h.mac("login|"+nonce), h.sso != nil))
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		h.renderLogin(w, r, http.StatusBadRequest, "", "", "The form could not be read.")
		return
	}
	username, next := strings.TrimSpace(r.PostForm.Get("username")), safeNext(r.PostForm.Get("next"))
	c, err := r.Cookie(loginCookie)
	if err != nil || !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(h.mac("login|"+c.Value))) {
		h.renderLogin(w, r, http.StatusForbidden, username, next, "The login form expired. Please sign in again.")
		return
	}
	tok, roles, err := h.api.Login(r, username, r.PostForm.Get("password"))
	if err != nil {
		switch apperr.CodeOf(err) {
		case apperr.CodeInvalid:
			h.renderLogin(w, r, http.StatusBadRequest, username, next, "Enter your username and password.")
		case apperr.CodeUnauthorized:
			h.renderLogin(w, r, http.StatusUnauthorized, username, next, "Wrong username or password.")
		case apperr.CodeRateLimited:
			secs := httpapi.SetRetryAfter(w, err)
			h.renderLogin(w, r, http.StatusTooManyRequests, username, next,
				fmt.Sprintf("Too many failed sign-ins from your address. Try again in %s.", seconds(secs)))
		case apperr.CodeUnavailable:
			secs := httpapi.SetRetryAfter(w, err)
			h.renderLogin(w, r, http.StatusServiceUnavailable, username, next,
				fmt.Sprintf("The server is busy right now. Try again in %s.", seconds(secs)))
		default:
			h.fail(w, r, err)
		}
		return
	}
	h.api.SetSessionCookie(w, tok)
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/ui/login", MaxAge: -1,
		HttpOnly: true, Secure: h.secureRequest(r), SameSite: http.SameSiteStrictMode})
	if next == "" {
		next = landing(&auth.Principal{Roles: roles})
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// seconds says n seconds in words ("a moment" when unknown).
func seconds(n int) string {
	switch {
	case n <= 0:
		return "a moment"
	case n == 1:
		return "1 second"
	}
	return fmt.Sprintf("%d seconds", n)
}

// logout revokes the session's token in Postgres, so it ends on every
// instance (its open streams included), and clears the
// cookie.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	if err := h.ident.Logout(r.Context(), auth.FromContext(r.Context())); err != nil {
		h.fail(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: httpapi.SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: h.secureRequest(r), SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}
