package httpapi

import (
	"net/http"
	"time"

	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/identity"
)

// The identity endpoints decode, call identity.Service (which holds every
// rule about users, agents and tokens) and respond.

type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

type userView struct {
	Username string      `json:"username"`
	Roles    []auth.Role `json:"roles"`
}

type loginResponse struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	User      userView  `json:"user"`
}

// Login checks a password and starts a session (identity.Service.Login,
// which holds the login limits), for the client address of r
// (AIRLOCK_TRUSTED_PROXIES decides whether X-Forwarded-For names it). It is
// exported for the console, which logs in through the same path.
func (s *Server) Login(r *http.Request, username, password string) (auth.Token, []auth.Role, error) {
	tok, u, err := s.ident.Login(r.Context(), username, password, s.clients.Addr(r))
	if err != nil {
		return auth.Token{}, nil, err
	}
	return tok, u.Roles, nil
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	var req loginRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	tok, roles, err := s.Login(r, req.Username, req.Password)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	s.SetSessionCookie(w, tok)
	writeJSON(w, http.StatusOK, loginResponse{Token: tok.Raw, ExpiresAt: tok.ExpiresAt, User: userView{Username: tok.Subject, Roles: roles}})
}

// SetSessionCookie sets the browser session cookie for tok.
func (s *Server) SetSessionCookie(w http.ResponseWriter, tok auth.Token) {
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: tok.Raw, Path: "/", Expires: tok.ExpiresAt,
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode,
	})
}

// logout revokes the caller's own token: the session ends on every instance.
// No body or {}.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if err := decodeOptional(w, r, &struct{}{}); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if err := s.ident.Logout(r.Context(), auth.FromContext(r.Context())); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) createUser(w http.ResponseWriter, r *http.Request) {
	var req identity.NewUser
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	u, err := s.ident.CreateUser(r.Context(), auth.FromContext(r.Context()), req)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, u)
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request) {
	users, err := s.ident.Users(r.Context(), auth.FromContext(r.Context()))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"users": users})
}

// updateUser is PATCH /api/v1/users/{username} {roles?, disabled?,
// password?, current_password?}.
func (s *Server) updateUser(w http.ResponseWriter, r *http.Request) {
	username, ok := s.pathParam(w, r, "username")
	if !ok {
		return
	}
	var req identity.UserPatch
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	req.Addr = s.clients.Addr(r) // a wrong current_password counts as a failed login from there
	u, err := s.ident.UpdateUser(r.Context(), auth.FromContext(r.Context()), username, req)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, u)
}

func (s *Server) deleteUser(w http.ResponseWriter, r *http.Request) {
	username, ok := s.pathParam(w, r, "username")
	if !ok {
		return
	}
	if err := s.ident.DeleteUser(r.Context(), auth.FromContext(r.Context()), username); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) createAgent(w http.ResponseWriter, r *http.Request) {
	var req identity.NewAgent
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	a, err := s.ident.CreateAgent(r.Context(), auth.FromContext(r.Context()), req)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, a)
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	agents, err := s.ident.Agents(r.Context(), auth.FromContext(r.Context()))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": agents})
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
	a, err := s.ident.Agent(r.Context(), auth.FromContext(r.Context()), id)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

type issueTokenRequest struct {
	TTLSeconds int64 `json:"ttl_seconds,omitempty"`
}

type issueTokenResponse struct {
	Token     string    `json:"token"`
	TokenID   string    `json:"token_id"`
	ExpiresAt time.Time `json:"expires_at"`
}

// requestedTTL reads an optional {ttl_seconds} body (an empty body is
// allowed) as a duration, 0 when absent; the identity service bounds it.
func requestedTTL(w http.ResponseWriter, r *http.Request) (time.Duration, error) {
	var req issueTokenRequest
	if err := decodeOptional(w, r, &req); err != nil {
		return 0, err
	}
	return identity.SecondsTTL(req.TTLSeconds), nil
}

func (s *Server) issueAgentToken(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
	ttl, err := requestedTTL(w, r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	tok, err := s.ident.IssueAgentToken(r.Context(), auth.FromContext(r.Context()), id, ttl)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, issueTokenResponse{Token: tok.Raw, TokenID: tok.ID, ExpiresAt: tok.ExpiresAt})
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
	if err := s.ident.RevokeToken(r.Context(), auth.FromContext(r.Context()), id); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
