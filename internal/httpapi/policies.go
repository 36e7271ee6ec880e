package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/store"
)

// decodePolicy reads a policy document as JSON or YAML.
func decodePolicy(w http.ResponseWriter, r *http.Request) (policy.Document, error) {
	switch mediaType(r) {
	case "", "application/json", "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml":
	default:
		return policy.Document{}, apperr.New(apperr.CodeUnsupportedMedia, "Content-Type must be application/json or application/yaml")
	}
	body, err := readBody(w, r)
	if err != nil {
		return policy.Document{}, err
	}
	doc, err := policy.ParseDocument(body)
	if doc.Rules == nil {
		doc.Rules = []policy.Rule{}
	}
	return doc, err
}

func (s *Server) putAgentPolicy(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	doc, err := decodePolicy(w, r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if _, err := s.store.Agent(r.Context(), id); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	s.putPolicy(w, r, store.AgentScope(id), doc)
}

func (s *Server) putFleetPolicy(w http.ResponseWriter, r *http.Request) {
	doc, err := decodePolicy(w, r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	s.putPolicy(w, r, store.FleetScope, doc)
}

func (s *Server) putPolicy(w http.ResponseWriter, r *http.Request, scope string, doc policy.Document) {
	pv, err := s.store.PutPolicy(r.Context(), scope, doc, auth.FromContext(r.Context()).Subject)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, pv)
}

// policyView is a policy as the API shows it; for agents, with the fleet
// settings it overrides.
type policyView struct {
	store.PolicyVersion
	Overrides []policy.Override `json:"overrides,omitempty"`
}

func (s *Server) getAgentPolicy(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	_, set, err := s.store.AgentPolicy(r.Context(), id)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	pv, err := s.store.Policy(r.Context(), store.AgentScope(id))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, policyView{PolicyVersion: pv, Overrides: set.Overrides()})
}

func (s *Server) getFleetPolicy(w http.ResponseWriter, r *http.Request) {
	pv, err := s.store.Policy(r.Context(), store.FleetScope)
	if apperr.CodeOf(err) == apperr.CodeNotFound {
		// No fleet policy written yet: the built-in defaults apply.
		pv, err = store.PolicyVersion{Scope: store.FleetScope, Document: policy.Document{Rules: []policy.Rule{}}}, nil
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, pv)
}
