package web

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/httpapi"
	"github.com/airlockhq/airlock/internal/sso"
)

// Mount returns the server's handler: the console's routes here, every
// other path to api (the JSON API, untouched).
func (h *Handler) Mount(api http.Handler) http.Handler {
	console := h.routes()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isConsolePath(r.URL.Path) {
			console.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// isConsolePath reports whether the console serves path.
func isConsolePath(path string) bool {
	return path == "/" || path == "/ui" || path == StreamPath ||
		strings.HasPrefix(path, "/ui/") || strings.HasPrefix(path, "/static/")
}

// StreamPath is the websocket of live action changes.
const StreamPath = "/api/v1/stream"

// routes is the console's route table.
func (h *Handler) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(h.recoverer, securityHeaders)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) { h.fail(w, r, errNotFound) })
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		err := httpapi.MethodNotAllowed(r, w, req)
		if req.URL.Path == StreamPath { // an API path: the API's error body
			httpapi.WriteError(w, req, h.log, err)
			return
		}
		h.fail(w, req, err)
	})

	// The stream checks its Origin itself (403 before upgrading).
	r.Get(StreamPath, h.stream)
	r.Get("/static/*", h.static.ServeHTTP)

	r.Group(func(r chi.Router) {
		// Browsers' cross-site POSTs are refused before anything else; the
		// per-session form token (csrf) is the second line.
		r.Use(http.NewCrossOriginProtection().Handler)

		r.Get("/", h.home)
		r.Get("/ui", h.home)
		r.Get("/ui/login", h.loginForm)
		r.Post("/ui/login", h.login)
		r.Get(sso.LoginPath, h.ssoLogin)
		r.Get(sso.CallbackPath, h.ssoCallback)

		r.Group(func(r chi.Router) {
			r.Use(h.session, h.csrf)
			admin := h.require(auth.RoleAdmin)
			staff := h.require(auth.RoleAdmin, auth.RoleReviewer, auth.RoleAuditor)
			readers := h.require(auth.RoleReviewer, auth.RoleAuditor)
			reviewer := h.require(auth.RoleReviewer)
			auditor := h.require(auth.RoleAuditor)

			r.Post("/ui/logout", h.logout)
			r.Get("/ui/account", h.account)
			r.Post("/ui/account/password", h.changePassword)

			r.With(readers).Get("/ui/queue", h.queue)
			r.With(readers).Get("/ui/queue/rows", h.queueRows)
			r.With(readers).Get("/ui/actions/{id}", h.action)
			r.With(reviewer).Post("/ui/actions/{id}/approve", h.approve)
			r.With(reviewer).Post("/ui/actions/{id}/deny", h.deny)
			r.With(h.require(auth.RoleReviewer, auth.RoleAdmin)).Post("/ui/actions/{id}/cancel", h.stop)
			r.With(reviewer).Post("/ui/batches", h.createBatch)
			r.With(reviewer).Get("/ui/batches/{id}", h.batch)
			r.With(reviewer).Post("/ui/batches/{id}/approve", h.approveBatch)
			r.With(readers).Get("/ui/decided", h.history)
			r.With(staff).Get("/ui/insights", h.insightsPage)

			r.With(staff).Get("/ui/agents", h.agents)
			r.With(admin).Post("/ui/agents", h.createAgent)
			r.With(staff).Get("/ui/agents/{id}", h.agent)
			r.With(admin).Post("/ui/agents/{id}/tokens", h.issueToken)
			r.With(admin).Post("/ui/agents/{id}/tokens/{token}/revoke", h.revokeToken)
			r.With(h.require(auth.RoleReviewer, auth.RoleAdmin)).Post("/ui/agents/{id}/grants/{grant}/revoke", h.revokeGrant)
			r.With(admin).Post("/ui/agents/{id}/suspend", h.suspendAgent)
			r.With(admin).Post("/ui/agents/{id}/resume", h.resumeAgent)
			r.With(staff).Get("/ui/agents/{id}/policy", h.agentPolicy)
			r.With(admin).Get("/ui/agents/{id}/policy/edit", h.editAgentPolicy)
			r.With(admin).Post("/ui/agents/{id}/policy", h.saveAgentPolicy)

			r.With(staff).Get("/ui/fleet", h.fleetPolicy)
			r.With(admin).Get("/ui/fleet/edit", h.editFleetPolicy)
			r.With(admin).Post("/ui/fleet", h.saveFleetPolicy)
			r.With(h.require(auth.RoleReviewer, auth.RoleAdmin)).Post("/ui/fleet/plan-mode", h.setFleetPlanMode)
			r.With(h.require(auth.RoleReviewer, auth.RoleAdmin)).Post("/ui/agents/{id}/plan-mode", h.setAgentPlanMode)
			r.With(admin).Post("/ui/fleet/suspend", h.suspendFleet)
			r.With(admin).Post("/ui/fleet/resume", h.resumeFleet)

			r.With(admin).Get("/ui/users", h.users)
			r.With(admin).Post("/ui/users", h.createUser)
			r.With(admin).Post("/ui/users/{username}/delete", h.deleteUser)
			r.With(admin).Post("/ui/users/{username}/{change}", h.updateUser)

			r.With(staff).Get("/ui/mcp", h.mcpServers)
			r.With(admin).Post("/ui/mcp", h.createMCPServer)
			r.With(admin).Get("/ui/mcp/{name}/edit", h.editMCPServer)
			r.With(admin).Post("/ui/mcp/{name}", h.saveMCPServer)
			r.With(admin).Post("/ui/mcp/{name}/delete", h.deleteMCPServer)

			r.With(admin).Get("/ui/notify", h.notifyTargets)
			r.With(admin).Post("/ui/notify", h.createNotifyTarget)
			r.With(admin).Post("/ui/notify/{name}/delete", h.deleteNotifyTarget)
			r.With(admin).Get("/ui/groups", h.reviewerGroups)
			r.With(admin).Post("/ui/groups", h.createGroup)
			r.With(admin).Post("/ui/groups/{name}", h.saveGroup)
			r.With(admin).Post("/ui/groups/{name}/delete", h.deleteGroup)

			r.With(auditor).Get("/ui/audit", h.audit)
			r.With(auditor).Get("/ui/audit/correlation/{id}", h.timeline)
			r.With(auditor).Get("/ui/audit/verify", h.verifyChain)
		})
	})
	return r
}
