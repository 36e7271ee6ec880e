// Package httpapi is Airlock's JSON API (DESIGN.md "HTTP API (v1)"): the
// route table, authentication and roles, strict decoding, and the mapping of
// domain errors to statuses.
package httpapi

import (
	"crypto/ed25519"
	"crypto/sha256"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/clientip"
	"github.com/airlockhq/airlock/internal/connlimit"
	"github.com/airlockhq/airlock/internal/eventbus"
	"github.com/airlockhq/airlock/internal/groups"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/identity"
	"github.com/airlockhq/airlock/internal/mcp"
	"github.com/airlockhq/airlock/internal/mcpgateway"
	"github.com/airlockhq/airlock/internal/metrics"
	"github.com/airlockhq/airlock/internal/netguard"
	"github.com/airlockhq/airlock/internal/notify"
	"github.com/airlockhq/airlock/internal/sso"
	"github.com/airlockhq/airlock/internal/store"
)

// Server holds what the handlers need.
type Server struct {
	svc         *hitl.Service
	ident       *identity.Service
	store       *store.Store
	signer      *auth.Signer
	metrics     *metrics.Metrics
	log         *slog.Logger
	logRequests bool
	secure      bool
	sessionTTL  time.Duration
	clients     *clientip.Resolver
	audit       auditAPI
	// metricsToken is the SHA-256 of the token /metrics requires (nil:
	// /metrics is open).
	metricsToken []byte
	mcp          *mcp.Registry
	gateway      *mcpgateway.Gateway
	sso          *sso.Service
	targets      *notify.Targets
	groups       *groups.Service
	// longPolls and streams bound what one caller holds open at once on
	// this instance (nil: no bound).
	longPolls *connlimit.Limiter
	streams   *connlimit.Limiter
}

// Config wires a Server.
type Config struct {
	Service *hitl.Service
	// Identity owns users, agents, tokens and authentication; nil builds
	// one over Store and Signer (user changes then reach no other instance).
	Identity *identity.Service
	Store    *store.Store
	Signer   *auth.Signer
	Metrics  *metrics.Metrics
	Logger   *slog.Logger
	// LogRequests logs one line per request.
	LogRequests bool
	// SecureCookies marks the session cookie Secure (served over TLS).
	SecureCookies bool
	// SessionTTL is how long a login lasts (default 12h).
	SessionTTL time.Duration
	// AuditKeys verify the stored audit checkpoints: the keys the server's
	// audit key replaced, oldest first, then its own (audit.VerifyOptions.Keys).
	AuditKeys []ed25519.PublicKey
	// MetricsToken, when set, is the bearer token /metrics requires
	// (AIRLOCK_METRICS_TOKEN); empty leaves /metrics open.
	MetricsToken string
	// TrustedProxies are the peers whose X-Forwarded-For names the client
	// (AIRLOCK_TRUSTED_PROXIES).
	TrustedProxies []netip.Prefix
	// MCP is the MCP server registry; nil builds one over Store.
	MCP *mcp.Registry
	// MCPGuard builds the netguard of a registration for the MCP gateway
	// (nil: netguard.New with its allow_private).
	MCPGuard func(mcp.Registration) *netguard.Guard
	// MCPMaxResultBytes is the gateway's mcpgateway.Config.MaxResultBytes
	// (AIRLOCK_MCP_MAX_RESULT_BYTES).
	MCPMaxResultBytes int
	// SSO is single sign-on (nil: not configured).
	SSO *sso.Service
	// Targets and Groups are the notification targets and reviewer groups
	// services; nil builds them over Store.
	Targets *notify.Targets
	Groups  *groups.Service
	// LongPolls bounds one caller's long polls on this instance (GET
	// /api/v1/actions/{id}?wait=, a worker's lease with wait, the MCP
	// gateway's gated calls); Streams its MCP gateway GET streams (the
	// console's websockets count against the same limiter, in
	// internal/web). nil: no bound.
	LongPolls *connlimit.Limiter
	Streams   *connlimit.Limiter
	// Bus and Publisher carry the MCP gateway's notifications/cancelled
	// between instances (mcpgateway.Config); nil: one instance's only.
	Bus       *eventbus.Bus
	Publisher hitl.Publisher
}

// New returns a Server.
func New(c Config) *Server {
	s := &Server{svc: c.Service, ident: c.Identity, store: c.Store, signer: c.Signer, metrics: c.Metrics, log: c.Logger,
		logRequests: c.LogRequests, secure: c.SecureCookies, sessionTTL: c.SessionTTL,
		clients: clientip.New(c.TrustedProxies), audit: newAuditAPI(c.AuditKeys), sso: c.SSO,
		longPolls: c.LongPolls, streams: c.Streams}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.sessionTTL == 0 {
		s.sessionTTL = 12 * time.Hour
	}
	if c.MetricsToken != "" {
		sum := sha256.Sum256([]byte(c.MetricsToken))
		s.metricsToken = sum[:]
	}
	if s.mcp = c.MCP; s.mcp == nil {
		s.mcp = mcp.NewRegistry(c.Store)
	}
	var sessionKey []byte // a random one without a signer (one instance)
	if c.Signer != nil {
		sessionKey = c.Signer.Subkey("airlock mcp gateway sessions v1")
	}
	s.gateway = mcpgateway.New(mcpgateway.Config{Registry: s.mcp, Service: c.Service, Logger: s.log, Guard: c.MCPGuard,
		MaxResultBytes: c.MCPMaxResultBytes, SessionKey: sessionKey, Calls: c.LongPolls, Bus: c.Bus, Publisher: c.Publisher})
	if s.ident == nil {
		s.ident = identity.NewService(identity.Config{Store: c.Store, Signer: c.Signer, SessionTTL: s.sessionTTL})
	}
	if s.targets = c.Targets; s.targets == nil {
		s.targets = notify.NewTargets(c.Store)
	}
	if s.groups = c.Groups; s.groups == nil {
		s.groups = groups.NewService(c.Store)
	}
	return s
}

// StopStreams ends the streams that last as long as their client keeps
// them (the MCP gateway's session streams), so that a shutdown does not
// wait for them.
func (s *Server) StopStreams() { s.gateway.StopStreams() }

// Drain waits for the work the server does after a response: the MCP
// gateway's result reports.
func (s *Server) Drain() { s.gateway.Drain() }

// Handler returns the route table.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.recoverer, s.observe, securityHeaders)
	// Browsers' cross-site requests are refused; API clients send no
	// Origin or Sec-Fetch-Site and pass.
	cop := http.NewCrossOriginProtection()
	r.Use(cop.Handler)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, s.log, errNotFound)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, req, s.log, MethodNotAllowed(r, w, req))
	})

	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	if s.metrics != nil {
		r.With(s.requireMetricsToken).Method(http.MethodGet, "/metrics", s.metrics.Handler())
	}

	// The MCP gateway (Streamable HTTP) for agent tokens.
	r.Group(func(r chi.Router) {
		r.Use(s.authenticate, s.require(auth.RoleAgent))
		r.Post("/mcp/{name}", s.mcpGateway)
		r.Get("/mcp/{name}", s.mcpGateway)
		r.Delete("/mcp/{name}", s.mcpGateway)
	})

	r.Route("/api/v1", func(r chi.Router) {
		r.Post("/auth/login", s.login)
		r.Get("/auth/sso", s.ssoConfig)
		r.Post("/auth/sso/token", s.ssoToken)
		r.Get("/openapi.json", s.openapiDoc)
		r.With(s.authenticateSubmit, s.require(auth.RoleAgent)).Post("/actions", s.submitAction)
		r.With(s.authenticateWorkerJob, s.require(auth.RoleWorker)).Post("/worker/lease", s.leaseJob)
		r.With(s.authenticateWorkerJob, s.require(auth.RoleWorker)).Post("/worker/jobs/{id}/complete", s.completeJob)
		r.Group(func(r chi.Router) {
			r.Use(s.authenticate)
			r.Post("/auth/logout", s.logout)

			admin := s.require(auth.RoleAdmin)
			staff := s.require(auth.RoleAdmin, auth.RoleReviewer, auth.RoleAuditor)
			agent := s.require(auth.RoleAgent)
			reviewer := s.require(auth.RoleReviewer)
			readers := s.require(auth.RoleReviewer, auth.RoleAuditor)
			auditor := s.require(auth.RoleAuditor)

			// Who may change which user is the identity service's rule: a
			// user changes its own password, an admin everything else.
			r.With(admin).Get("/users", s.listUsers)
			r.With(admin).Post("/users", s.createUser)
			r.Patch("/users/{username}", s.updateUser)
			r.With(admin).Delete("/users/{username}", s.deleteUser)
			r.With(admin).Post("/agents", s.createAgent)
			r.With(staff).Get("/agents", s.listAgents)
			r.With(staff).Get("/agents/{id}", s.getAgent)
			r.With(admin).Post("/agents/{id}/tokens", s.issueAgentToken)
			r.With(admin).Delete("/tokens/{id}", s.revokeToken)
			r.With(admin).Post("/agents/{id}/suspend", s.suspendAgent)
			r.With(admin).Post("/agents/{id}/resume", s.resumeAgent)
			r.With(admin).Put("/agents/{id}/policy", s.putAgentPolicy)
			r.With(staff).Get("/agents/{id}/policy", s.getAgentPolicy)
			r.With(admin).Put("/fleet/policy", s.putFleetPolicy)
			r.With(staff).Get("/fleet/policy", s.getFleetPolicy)
			// Plan mode (admins and reviewers flip it) and the fleet stop.
			humans := s.require(auth.RoleAdmin, auth.RoleReviewer)
			r.With(staff).Get("/agents/{id}/plan-mode", s.getAgentPlanMode)
			r.With(humans).Put("/agents/{id}/plan-mode", s.putAgentPlanMode)
			r.With(staff).Get("/fleet/plan-mode", s.getFleetPlanMode)
			r.With(humans).Put("/fleet/plan-mode", s.putFleetPlanMode)
			r.With(staff).Get("/fleet/suspension", s.getFleetSuspension)
			r.With(admin).Post("/fleet/suspend", s.suspendFleet)
			r.With(admin).Post("/fleet/resume", s.resumeFleet)

			r.With(readers).Get("/actions", s.listActions)
			r.Get("/actions/{id}", s.getAction) // agent (own), reviewer, auditor: checked inside
			r.With(s.require(auth.RoleAgent, auth.RoleReviewer, auth.RoleAdmin)).Post("/actions/{id}/cancel", s.cancelAction)
			r.With(agent).Post("/actions/{id}/result", s.reportResult)
			r.With(reviewer).Post("/actions/{id}/approve", s.approveAction)
			r.With(reviewer).Post("/actions/{id}/deny", s.denyAction)
			r.With(reviewer).Post("/batches", s.createBatch)
			r.With(reviewer).Get("/batches/{id}", s.getBatch)
			r.With(reviewer).Post("/batches/{id}/approve", s.approveBatch)
			// Reviewer-fatigue insights: reviewers and admins, and auditors
			// who oversee them.
			r.With(staff).Get("/insights", s.getInsights)
			r.With(staff).Get("/insights/suggestions", s.getSuggestions)

			grants := s.require(auth.RoleReviewer, auth.RoleAdmin)
			r.With(grants).Get("/grants", s.listGrants)
			r.With(grants).Delete("/grants/{id}", s.revokeGrant)

			r.With(auditor).Get("/audit", s.queryAudit)
			r.With(auditor).Get("/audit/verify", s.verifyAudit)
			r.With(auditor).Get("/audit/export", s.exportAudit)
			r.With(auditor).Get("/audit/checkpoints", s.auditCheckpoints)

			// The MCP server registry: admins write; staff read with env
			// values withheld (mcp.View); an agent reads one registration
			// whole (the stdio proxy launches it).
			r.With(admin).Post("/mcp/servers", s.createMCPServer)
			r.With(staff).Get("/mcp/servers", s.listMCPServers)
			r.With(s.require(auth.RoleAdmin, auth.RoleReviewer, auth.RoleAuditor, auth.RoleAgent)).Get("/mcp/servers/{name}", s.getMCPServer)
			r.With(admin).Put("/mcp/servers/{name}", s.putMCPServer)
			r.With(admin).Delete("/mcp/servers/{name}", s.deleteMCPServer)

			// Notification targets and reviewer groups (issue 13): admins
			// write and read; secrets are redacted in every answer.
			r.With(admin).Post("/notify/targets", s.createNotifyTarget)
			r.With(admin).Get("/notify/targets", s.listNotifyTargets)
			r.With(admin).Delete("/notify/targets/{name}", s.deleteNotifyTarget)
			r.With(admin).Post("/groups", s.createGroup)
			r.With(admin).Get("/groups", s.listGroups)
			r.With(admin).Get("/groups/{name}", s.getGroup)
			r.With(admin).Put("/groups/{name}", s.putGroup)
			r.With(admin).Delete("/groups/{name}", s.deleteGroup)
			r.With(readers).Get("/actions/{id}/notifications", s.actionNotifications)

			worker := s.require(auth.RoleWorker)
			r.With(admin).Post("/workers/{name}/tokens", s.issueWorkerToken)
			r.With(worker).Post("/worker/jobs/{id}/heartbeat", s.heartbeatJob)
		})
	})
	return r
}
