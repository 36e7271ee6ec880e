package web

import (
	"net/http"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/sso"
)

// The console's single sign-on: a sign-in starts at sso.LoginPath (the
// "Sign in with SSO" link of the login page, or the CLI's browser), goes to
// the provider and comes back to sso.CallbackPath. internal/sso and
// identity.Service hold the rules; these handlers carry the flow cookie.

func (h *Handler) ssoCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: sso.FlowCookie, Value: value, Path: "/ui/sso/", MaxAge: maxAge,
		HttpOnly: true, Secure: h.secureRequest(r), SameSite: http.SameSiteLaxMode}
}

// ssoLogin sends the browser to the provider with a fresh state, nonce and
// PKCE challenge, kept in the signed flow cookie. The provider's redirect
// back is a top-level GET from another site, which SameSite=Lax lets the
// cookie go along with.
func (h *Handler) ssoLogin(w http.ResponseWriter, r *http.Request) {
	if h.sso == nil {
		h.fail(w, r, errNotFound)
		return
	}
	q := r.URL.Query()
	authURL, cookie, err := h.sso.Begin(r.Context(), sso.Start{Next: safeNext(q.Get("next")),
		CLIRedirect: q.Get("cli_redirect"), CLIChallenge: q.Get("cli_challenge"), CLIState: q.Get("cli_state")})
	if err != nil {
		h.ssoFailed(w, r, err)
		return
	}
	http.SetCookie(w, h.ssoCookie(r, cookie, int(sso.FlowTTL.Seconds())))
	http.Redirect(w, r, authURL, http.StatusSeeOther)
}

// ssoCallback finishes the sign-in: a console session, or the CLI's
// loopback address with its one-time code.
func (h *Handler) ssoCallback(w http.ResponseWriter, r *http.Request) {
	if h.sso == nil {
		h.fail(w, r, errNotFound)
		return
	}
	q := r.URL.Query()
	cb := sso.Callback{State: q.Get("state"), Code: q.Get("code"), Error: q.Get("error"),
		ErrorDescription: q.Get("error_description"), Addr: h.api.ClientAddr(r)}
	if c, err := r.Cookie(sso.FlowCookie); err == nil {
		cb.Cookie = c.Value
	}
	// One flow, one callback: the cookie goes whatever the outcome.
	http.SetCookie(w, h.ssoCookie(r, "", -1))
	res, err := h.sso.Finish(r.Context(), cb)
	if err != nil {
		h.ssoFailed(w, r, err)
		return
	}
	if res.CLIRedirect != "" {
		http.Redirect(w, r, res.CLIRedirect, http.StatusSeeOther)
		return
	}
	h.api.SetSessionCookie(w, res.Token)
	next := res.Next
	if next == "" {
		next = landing(&auth.Principal{Roles: res.User.Roles})
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// ssoFailed shows the sign-in page with why single sign-on failed.
func (h *Handler) ssoFailed(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusBadRequest
	msg := "Single sign-on failed."
	if e, ok := apperr.As(err); ok {
		switch e.Code {
		case apperr.CodeUnauthorized:
			status = http.StatusUnauthorized
		case apperr.CodeForbidden:
			status = http.StatusForbidden
		case apperr.CodeUnavailable:
			status = http.StatusServiceUnavailable
		case apperr.CodeInvalid:
		default:
			h.fail(w, r, err)
			return
		}
		msg = "Single sign-on failed: " + e.Message + "."
	} else {
		h.fail(w, r, err)
		return
	}
	h.renderLogin(w, r, status, "", "", msg)
}
