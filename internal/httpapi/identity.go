package httpapi

import (
	"net"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/store"
)

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

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Login checks a password and starts a session. It is exported for the
// console, which logs in through the same path.
func (s *Server) Login(r *http.Request, username, password string) (auth.Token, []auth.Role, error) {
	ctx := r.Context()
	now := time.Now()
	if !s.logins.allow(username+"|"+clientIP(r), now) || !s.logins.allow("ip|"+clientIP(r), now) {
		return auth.Token{}, nil, apperr.New(apperr.CodeRateLimited, "too many login attempts; wait a minute")
	}
	u, err := s.store.UserByName(ctx, username)
	if err != nil && apperr.CodeOf(err) != apperr.CodeNotFound {
		return auth.Token{}, nil, err
	}
	if !auth.CheckPassword(password, u.PasswordHash) {
		_ = s.store.AppendEvents(ctx, audit.Event{Kind: audit.KindLoginFailed, Actor: username,
			Data: map[string]any{"ip": clientIP(r)}})
		return auth.Token{}, nil, apperr.Unauthorized("wrong username or password")
	}
	tok, err := s.signer.Issue(auth.KindUser, u.Username, u.Roles, s.sessionTTL, now)
	if err != nil {
		return auth.Token{}, nil, err
	}
	ev := audit.Event{Kind: audit.KindLogin, Actor: u.Username, Data: map[string]any{"token_id": tok.ID, "ip": clientIP(r)}}
	if err := s.store.RecordToken(ctx, tok, u.Username, ev); err != nil {
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
	if req.Username == "" || req.Password == "" {
		writeError(w, r, s.log, apperr.Invalid("username and password are required"))
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
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	p := auth.FromContext(r.Context())
	if err := s.store.RevokeToken(r.Context(), p.TokenID, p.Subject); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	w.WriteHeader(http.StatusNoContent)
}

type createUserRequest struct {
	Username string      `json:"username"`
	Password string      `json:"password"`
	Roles    []auth.Role `json:"roles"`
}

func (s *Server) createUser(w http.ResponseWriter, r *http.Request) {
	var req createUserRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if utf8.RuneCountInString(req.Password) < auth.MinPasswordLen {
		writeError(w, r, s.log, apperr.Invalid("password must be at least %d characters", auth.MinPasswordLen))
		return
	}
	if len(req.Password) > 1024 {
		writeError(w, r, s.log, apperr.Invalid("password is longer than 1024 bytes"))
		return
	}
	if len(req.Roles) == 0 {
		writeError(w, r, s.log, apperr.Invalid("roles must name at least one of admin, reviewer, auditor"))
		return
	}
	for _, role := range req.Roles {
		if !auth.ValidUserRole(role) {
			writeError(w, r, s.log, apperr.Invalid("role %q is not a user role (admin, reviewer, auditor)", role))
			return
		}
	}
	hash, err := auth.HashPassword(req.Password)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	u, err := s.store.CreateUser(r.Context(), store.User{Username: req.Username, PasswordHash: hash, Roles: req.Roles},
		auth.FromContext(r.Context()).Subject)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, u)
}

type createAgentRequest struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

func (s *Server) createAgent(w http.ResponseWriter, r *http.Request) {
	var req createAgentRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if req.ID == "" || req.Name == "" {
		writeError(w, r, s.log, apperr.Invalid("id and name are required"))
		return
	}
	if len(req.Name) > 200 || len(req.Description) > 4096 {
		writeError(w, r, s.log, apperr.Invalid("name must be at most 200 bytes and description at most 4096"))
		return
	}
	a, err := s.store.CreateAgent(r.Context(), store.Agent{ID: req.ID, Name: req.Name, Description: req.Description,
		CreatedBy: auth.FromContext(r.Context()).Subject})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, a)
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	agents, err := s.store.Agents(r.Context())
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": agents})
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) {
	a, err := s.store.Agent(r.Context(), chi.URLParam(r, "id"))
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

// Agent token lifetimes.
const (
	defaultAgentTokenTTL = 30 * 24 * time.Hour
	maxAgentTokenTTL     = 366 * 24 * time.Hour
)

// readTTL reads an optional {ttl_seconds} body (an empty body is allowed)
// and bounds it.
func readTTL(w http.ResponseWriter, r *http.Request, def, most time.Duration) (time.Duration, error) {
	var req issueTokenRequest
	body, err := readBody(w, r)
	if err == nil && len(body) > 0 {
		err = decodeJSON(body, &req)
	}
	if err != nil {
		return 0, err
	}
	if req.TTLSeconds == 0 {
		return def, nil
	}
	ttl := time.Duration(req.TTLSeconds) * time.Second
	if req.TTLSeconds < 1 || ttl > most {
		return 0, apperr.Invalid("ttl_seconds must be between 1 and %d", int64(most/time.Second))
	}
	return ttl, nil
}

func (s *Server) issueAgentToken(w http.ResponseWriter, r *http.Request) {
	ttl, err := readTTL(w, r, defaultAgentTokenTTL, maxAgentTokenTTL)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	agent, err := s.store.Agent(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	tok, err := s.signer.Issue(auth.KindAgent, agent.ID, []auth.Role{auth.RoleAgent}, ttl, time.Now())
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	actor := auth.FromContext(r.Context()).Subject
	ev := audit.Event{Kind: audit.KindTokenIssued, Actor: actor, AgentID: agent.ID,
		Data: map[string]any{"token_id": tok.ID, "kind": tok.Kind, "expires_at": tok.ExpiresAt}}
	if err := s.store.RecordToken(r.Context(), tok, actor, ev); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, issueTokenResponse{Token: tok.Raw, TokenID: tok.ID, ExpiresAt: tok.ExpiresAt})
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	err := s.store.RevokeToken(r.Context(), chi.URLParam(r, "id"), auth.FromContext(r.Context()).Subject)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
