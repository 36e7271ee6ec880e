package httpapi

import (
	"net/http"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/mcpgateway"
)

// mcpGateway serves /mcp/{name} (MCP Streamable HTTP) to an agent token:
// the registration is looked up, then internal/mcpgateway relays the
// session and gates every tool call.
func (s *Server) mcpGateway(w http.ResponseWriter, r *http.Request) {
	name, ok := s.pathParam(w, r, "name")
	if !ok {
		return
	}
	p := auth.FromContext(r.Context())
	if p.Kind != auth.KindAgent {
		writeError(w, r, s.log, apperr.Forbidden("the MCP gateway takes an agent token"))
		return
	}
	reg, err := s.gateway.Registration(r.Context(), name)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if r.Method == http.MethodGet {
		// The session's event stream lasts as long as its client keeps
		// it: one of the agent's streams on this instance. (A gated call
		// counts as a long poll, in the gateway, which alone knows one.)
		release, err := s.streams.Enter(p)
		if err != nil {
			writeError(w, r, s.log, err)
			return
		}
		defer release()
	}
	s.gateway.ServeHTTP(w, r, reg, mcpgateway.Caller{AgentID: p.Subject, TokenID: p.TokenID})
}
