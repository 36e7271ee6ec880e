package httpapi

import (
	"net/http"
	"net/netip"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/sso"
)

// The single sign-on endpoints: what the CLI asks before it opens the
// browser, and the exchange of its one-time code for a session
// (internal/sso and identity.Service hold the rules).

type ssoInfo struct {
	Issuer   string `json:"issuer"`
	LoginURL string `json:"login_url"`
}

type ssoTokenRequest struct {
	Code         string `json:"code"`
	CodeVerifier string `json:"code_verifier"`
}

var errNoSSO = apperr.NotFound("single sign-on is not configured on this server")

// ClientAddr is the client address of r (AIRLOCK_TRUSTED_PROXIES decides
// whether X-Forwarded-For names it), for the console's sign-ins.
func (s *Server) ClientAddr(r *http.Request) netip.Addr { return s.clients.Addr(r) }

// ssoConfig says whether single sign-on is on and where a sign-in starts.
func (s *Server) ssoConfig(w http.ResponseWriter, r *http.Request) {
	if s.sso == nil {
		writeError(w, r, s.log, errNoSSO)
		return
	}
	writeJSON(w, http.StatusOK, ssoInfo{Issuer: s.sso.Issuer(), LoginURL: sso.LoginPath})
}

// ssoToken exchanges a CLI sign-in's one-time code and PKCE verifier for a
// user token, as POST /auth/login answers (no cookie: the CLI keeps it).
func (s *Server) ssoToken(w http.ResponseWriter, r *http.Request) {
	if s.sso == nil {
		writeError(w, r, s.log, errNoSSO)
		return
	}
	var req ssoTokenRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	tok, u, err := s.sso.Exchange(r.Context(), req.Code, req.CodeVerifier, s.clients.Addr(r))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, loginResponse{Token: tok.Raw, ExpiresAt: tok.ExpiresAt, User: userView{Username: u.Username, Roles: u.Roles}})
}
