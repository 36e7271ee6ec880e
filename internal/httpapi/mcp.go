package httpapi

import (
	"net/http"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/mcp"
)

// The MCP server registry endpoints decode, call mcp.Registry (which holds
// every rule of a registration and who may read what) and respond.

// roleNames are the caller's roles as internal/mcp names them.
func roleNames(r *http.Request) []string {
	p := auth.FromContext(r.Context())
	if p == nil {
		return nil
	}
	out := make([]string, len(p.Roles))
	for i, role := range p.Roles {
		out[i] = string(role)
	}
	return out
}

type mcpServerList struct {
	Servers []mcp.Registration `json:"servers"`
}

func (s *Server) createMCPServer(w http.ResponseWriter, r *http.Request) {
	var srv mcp.Server
	if err := decode(w, r, &srv); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	reg, err := s.mcp.Create(r.Context(), auth.FromContext(r.Context()).Subject, srv)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	setETag(w, reg.Version)
	writeJSON(w, http.StatusCreated, reg)
}

func (s *Server) listMCPServers(w http.ResponseWriter, r *http.Request) {
	regs, err := s.mcp.List(r.Context(), roleNames(r))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, mcpServerList{Servers: regs})
}

func (s *Server) getMCPServer(w http.ResponseWriter, r *http.Request) {
	name, ok := s.pathParam(w, r, "name")
	if !ok {
		return
	}
	reg, err := s.mcp.Get(r.Context(), roleNames(r), name)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	setETag(w, reg.Version)
	writeJSON(w, http.StatusOK, reg)
}

func (s *Server) putMCPServer(w http.ResponseWriter, r *http.Request) {
	name, ok := s.pathParam(w, r, "name")
	if !ok {
		return
	}
	base, err := ifMatchVersion(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	var srv mcp.Server
	if err := decode(w, r, &srv); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if srv.Name == "" {
		srv.Name = name
	}
	if srv.Name != name {
		writeError(w, r, s.log, &apperr.Error{Code: apperr.CodeInvalid,
			Message: "the body's name must be the path's name (a registration is not renamed)", Details: map[string]any{"field": "name"}})
		return
	}
	if mcp.ValidName(name) != nil {
		writeError(w, r, s.log, apperr.NotFound("no MCP server %q", name))
		return
	}
	reg, err := s.mcp.Update(r.Context(), auth.FromContext(r.Context()).Subject, srv, base)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	setETag(w, reg.Version)
	writeJSON(w, http.StatusOK, reg)
}

func (s *Server) deleteMCPServer(w http.ResponseWriter, r *http.Request) {
	name, ok := s.pathParam(w, r, "name")
	if !ok {
		return
	}
	base, err := ifMatchVersion(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if err := s.mcp.Delete(r.Context(), auth.FromContext(r.Context()).Subject, name, base); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
