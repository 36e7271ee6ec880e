package web

import (
	"net/http"
	"strings"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/identity"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/web/templates"
)

func (h *Handler) agents(w http.ResponseWriter, r *http.Request) {
	h.renderAgents(w, r, http.StatusOK, "", templates.AgentsView{})
}

func (h *Handler) renderAgents(w http.ResponseWriter, r *http.Request, status int, msg string, v templates.AgentsView) {
	list, err := h.ident.Agents(r.Context(), auth.FromContext(r.Context()))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v.Agents = list
	p := h.page(r, "Agents", "agents")
	p.Error = msg
	if r.URL.Query().Get("created") != "" {
		p.Notice = "Agent registered."
	}
	h.render(w, r, status, templates.Agents(p, v))
}

func (h *Handler) createAgent(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	v := templates.AgentsView{ID: strings.TrimSpace(f.Get("id")), Name: strings.TrimSpace(f.Get("name")),
		Description: strings.TrimSpace(f.Get("description")), Owner: strings.TrimSpace(f.Get("owner"))}
	_, err := h.ident.CreateAgent(r.Context(), auth.FromContext(r.Context()),
		identity.NewAgent{ID: v.ID, Name: v.Name, Description: v.Description, Owner: v.Owner})
	if err != nil {
		if _, ok := apperr.As(err); !ok {
			h.fail(w, r, err)
			return
		}
		h.renderAgents(w, r, statusOf(err), h.message(r, err), v)
		return
	}
	seeOther(w, r, templates.AgentURL(v.ID)+"?created=1")
}

func (h *Handler) agent(w http.ResponseWriter, r *http.Request) {
	p := h.page(r, "Agent", "agents")
	switch {
	case r.URL.Query().Get("created") != "":
		p.Notice = "Agent registered. Give it a policy and a token."
	case r.URL.Query().Get("revoked") != "":
		p.Notice = "Token revoked: it stops working at once, on every instance, and what was submitted with it is cancelled."
	case r.URL.Query().Get("suspended") != "":
		p.Notice = "Agent suspended: its calls are denied, its unfinished actions cancelled and its running jobs stopped."
	case r.URL.Query().Get("grant-revoked") != "":
		p.Notice = "Grant revoked: later calls in that conversation go to a reviewer again."
	case r.URL.Query().Get("resumed") != "":
		p.Notice = "Agent resumed: its calls are decided by policy again."
	}
	h.renderAgent(w, r, http.StatusOK, p, nil)
}

func (h *Handler) renderAgent(w http.ResponseWriter, r *http.Request, status int, p templates.Page, tok *templates.IssuedToken) {
	id, ok := h.pathParam(w, r, "id")
	if !ok {
		return
	}
	ctx := r.Context()
	viewer := auth.FromContext(ctx)
	ag, err := h.ident.Agent(ctx, viewer, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v := templates.AgentView{Agent: ag, NewToken: tok}
	pv, err := h.store.Policy(ctx, store.AgentScope(id))
	switch {
	case err == nil:
		v.Policy = &pv
	case apperr.CodeOf(err) != apperr.CodeNotFound:
		h.fail(w, r, err)
		return
	}
	_, set, err := h.store.AgentPolicy(ctx, id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v.Overrides = set.Overrides()
	if v.SuspendedAt, err = h.store.AgentSuspendedAt(ctx, id); err != nil {
		h.fail(w, r, err)
		return
	}
	if v.PlanMode, err = h.svc.PlanMode(ctx, id); err != nil {
		h.fail(w, r, err)
		return
	}
	if v.Grants, err = h.svc.Grants(ctx, hitl.GrantFilter{AgentID: id}); err != nil {
		h.fail(w, r, err)
		return
	}
	if p.IsAdmin {
		if v.Tokens, err = h.ident.AgentTokens(ctx, viewer, id); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	p.Title = ag.Name
	h.render(w, r, status, templates.Agent(p, v))
}

// issueToken issues an agent token and shows it once, in this response.
func (h *Handler) issueToken(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathParam(w, r, "id")
	if !ok {
		return
	}
	ctx := r.Context()
	ttl, err := time.ParseDuration(r.PostForm.Get("ttl"))
	if err != nil || ttl == 0 {
		ttl = -1 // refused by the service's rule, with its message
	}
	tok, err := h.ident.IssueAgentToken(ctx, auth.FromContext(ctx), id, ttl)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p := h.page(r, "Agent", "agents")
	p.Notice = "Token issued."
	h.renderAgent(w, r, http.StatusCreated, p, &templates.IssuedToken{Token: tok.Raw, TokenID: tok.ID, ExpiresAt: tok.ExpiresAt})
}

func (h *Handler) revokeToken(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathParam(w, r, "id")
	if !ok {
		return
	}
	tokenID, ok := h.pathParam(w, r, "token")
	if !ok {
		return
	}
	ctx := r.Context()
	if err := h.ident.RevokeAgentToken(ctx, auth.FromContext(ctx), id, tokenID); err != nil {
		h.fail(w, r, err)
		return
	}
	seeOther(w, r, templates.AgentURL(id)+"?revoked=1")
}

// suspendAgent suspends the agent through the same service as the API.
func (h *Handler) suspendAgent(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathParam(w, r, "id")
	if !ok {
		return
	}
	if _, err := h.svc.SuspendAgent(r.Context(), id, auth.FromContext(r.Context()).Subject); err != nil {
		h.fail(w, r, err)
		return
	}
	seeOther(w, r, templates.AgentURL(id)+"?suspended=1")
}

// resumeAgent lifts the agent's suspension.
func (h *Handler) resumeAgent(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathParam(w, r, "id")
	if !ok {
		return
	}
	if err := h.svc.ResumeAgent(r.Context(), id, auth.FromContext(r.Context()).Subject); err != nil {
		h.fail(w, r, err)
		return
	}
	seeOther(w, r, templates.AgentURL(id)+"?resumed=1")
}

// revokeGrant ends a conversation grant (reviewer, admin) through the same
// service as DELETE /api/v1/grants/{id}.
func (h *Handler) revokeGrant(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathParam(w, r, "id")
	if !ok {
		return
	}
	grant, ok := h.pathParam(w, r, "grant")
	if !ok {
		return
	}
	if _, err := h.svc.RevokeGrant(r.Context(), grant, auth.FromContext(r.Context()).Subject); err != nil {
		h.fail(w, r, err)
		return
	}
	seeOther(w, r, templates.AgentURL(id)+"?grant-revoked=1")
}
