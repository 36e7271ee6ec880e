package web

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/jsonx"
	"github.com/airlockhq/airlock/internal/mcp"
	"github.com/airlockhq/airlock/web/templates"
)

// The MCP servers pages decode forms, call mcp.Registry (which holds every
// rule of a registration and who may read what, as for the API) and
// render.

func (h *Handler) mcpRegistry() *mcp.Registry { return mcp.NewRegistry(h.store) }

func roleNames(r *http.Request) []string {
	p := auth.FromContext(r.Context())
	out := make([]string, len(p.Roles))
	for i, role := range p.Roles {
		out[i] = string(role)
	}
	return out
}

const mcpExample = `{
  "name": "github",
  "transport": "stdio",
  "command": "/usr/local/bin/github-mcp-server",
  "args": ["stdio"],
  "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "..."}
}`

func (h *Handler) mcpServers(w http.ResponseWriter, r *http.Request) {
	p := h.page(r, "MCP servers", "mcp")
	q := r.URL.Query()
	switch {
	case q.Get("saved") != "":
		p.Notice = "MCP server " + q.Get("saved") + " saved as version " + q.Get("version") + "."
	case q.Get("removed") != "":
		p.Notice = "MCP server " + q.Get("removed") + " removed: it can no longer be reached through Airlock."
	}
	h.renderMCP(w, r, http.StatusOK, p, templates.MCPView{Draft: mcpExample})
}

func (h *Handler) renderMCP(w http.ResponseWriter, r *http.Request, status int, p templates.Page, v templates.MCPView) {
	regs, err := h.mcpRegistry().List(r.Context(), roleNames(r))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	for _, reg := range regs {
		body, _ := json.MarshalIndent(reg.Server, "", "  ")
		target := reg.URL
		if reg.Transport == mcp.TransportStdio {
			target = strings.Join(append([]string{reg.Command}, reg.Args...), " ")
		}
		v.Servers = append(v.Servers, templates.MCPServerRow{Name: reg.Name, Transport: reg.Transport, Target: target,
			Version: reg.Version, UpdatedBy: reg.UpdatedBy, UpdatedAt: reg.UpdatedAt, JSON: string(body)})
	}
	h.render(w, r, status, templates.MCP(p, v))
}

// decodeRegistration reads the form's registration JSON strictly.
func decodeRegistration(r *http.Request) (mcp.Server, error) {
	var s mcp.Server
	if err := jsonx.Decode([]byte(r.PostForm.Get("registration")), &s); err != nil {
		return s, apperr.Invalid("the registration is not valid JSON: %v", err)
	}
	return s, nil
}

// formVersion reads the version the form was based on.
func formVersion(r *http.Request) (int, error) {
	n, err := strconv.Atoi(r.PostForm.Get("version"))
	if err != nil || n < 1 {
		return 0, apperr.Invalid("the form names no version; reload the page")
	}
	return n, nil
}

// mcpError shows a refused change with what was typed, or the error page
// for what is not a domain error.
func (h *Handler) mcpError(w http.ResponseWriter, r *http.Request, err error, draft string) {
	if _, ok := apperr.As(err); !ok || apperr.CodeOf(err) == apperr.CodeForbidden {
		h.fail(w, r, err)
		return
	}
	p := h.page(r, "MCP servers", "mcp")
	p.Error = h.message(r, err)
	h.renderMCP(w, r, statusOf(err), p, templates.MCPView{Draft: draft})
}

func (h *Handler) createMCPServer(w http.ResponseWriter, r *http.Request) {
	draft := r.PostForm.Get("registration")
	s, err := decodeRegistration(r)
	if err == nil {
		var reg mcp.Registration
		reg, err = h.mcpRegistry().Create(r.Context(), auth.FromContext(r.Context()).Subject, s)
		if err == nil {
			seeOther(w, r, "/ui/mcp?saved="+reg.Name+"&version="+strconv.Itoa(reg.Version))
			return
		}
	}
	h.mcpError(w, r, err, draft)
}

func (h *Handler) editMCPServer(w http.ResponseWriter, r *http.Request) {
	name, ok := h.pathParam(w, r, "name")
	if !ok {
		return
	}
	reg, err := h.mcpRegistry().Get(r.Context(), roleNames(r), name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	body, _ := json.MarshalIndent(reg.Server, "", "  ")
	h.render(w, r, http.StatusOK, templates.MCPEdit(h.page(r, "MCP server "+reg.Name, "mcp"),
		templates.MCPEditView{Name: reg.Name, Version: reg.Version, JSON: string(body)}))
}

func (h *Handler) saveMCPServer(w http.ResponseWriter, r *http.Request) {
	name, ok := h.pathParam(w, r, "name")
	if !ok {
		return
	}
	draft := r.PostForm.Get("registration")
	base, err := formVersion(r)
	var s mcp.Server
	if err == nil {
		s, err = decodeRegistration(r)
	}
	if err == nil && s.Name == "" {
		s.Name = name
	}
	if err == nil && s.Name != name {
		err = apperr.Invalid("a registration is not renamed: remove it and register the new name")
	}
	var reg mcp.Registration
	if err == nil {
		reg, err = h.mcpRegistry().Update(r.Context(), auth.FromContext(r.Context()).Subject, s, base)
	}
	if err != nil {
		if _, ok := apperr.As(err); !ok || apperr.CodeOf(err) == apperr.CodeForbidden || apperr.CodeOf(err) == apperr.CodeNotFound {
			h.fail(w, r, err)
			return
		}
		p := h.page(r, "MCP server "+name, "mcp")
		p.Error = h.message(r, err)
		h.render(w, r, statusOf(err), templates.MCPEdit(p, templates.MCPEditView{Name: name, Version: base, JSON: draft}))
		return
	}
	seeOther(w, r, "/ui/mcp?saved="+reg.Name+"&version="+strconv.Itoa(reg.Version))
}

func (h *Handler) deleteMCPServer(w http.ResponseWriter, r *http.Request) {
	name, ok := h.pathParam(w, r, "name")
	if !ok {
		return
	}
	base, err := formVersion(r)
	if err == nil {
		err = h.mcpRegistry().Delete(r.Context(), auth.FromContext(r.Context()).Subject, name, base)
	}
	if err != nil {
		h.mcpError(w, r, err, mcpExample)
		return
	}
	seeOther(w, r, "/ui/mcp?removed="+name)
}
