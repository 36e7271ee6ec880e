package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/store"
)

// policyMedia are the media types of a policy document.
var policyMedia = []string{"application/json", "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"}

// decodePolicy reads a policy document as JSON or YAML.
func decodePolicy(w http.ResponseWriter, r *http.Request) (policy.Document, error) {
	body, err := readBodyAs(w, r, policyMedia)
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
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
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
	base, err := ifMatchVersion(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	pv, err := s.store.PutPolicyIf(r.Context(), scope, doc, auth.FromContext(r.Context()).Subject, base)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	setETag(w, pv.Version)
	writeJSON(w, http.StatusOK, pv)
}

// ifMatchVersion reads a policy PUT's If-Match header: the version the
// client read (as an entity tag, "3", or bare, 3; 0 = no policy yet).
// Absent or "*", the write is unconditional (store.AnyVersion). Weak tags
// and lists are refused: a policy version is compared exactly.
func ifMatchVersion(r *http.Request) (int, error) {
	values := r.Header.Values("If-Match")
	if len(values) == 0 {
		return store.AnyVersion, nil
	}
	bad := &apperr.Error{Code: apperr.CodeInvalid,
		Message: `If-Match must be one policy version, such as "3" (0 when there is no policy yet)`,
		Details: map[string]any{"field": "If-Match"}}
	if len(values) > 1 {
		return 0, bad
	}
	v := strings.TrimSpace(values[0])
	if v == "*" {
		return store.AnyVersion, nil
	}
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	if v == "" || len(v) > 9 || strings.Trim(v, "0123456789") != "" {
		return 0, bad
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, bad
	}
	return n, nil
}

// setETag names a policy version as the response's entity tag, the value
// a later PUT sends back in If-Match.
func setETag(w http.ResponseWriter, version int) {
	w.Header().Set("ETag", strconv.Quote(strconv.Itoa(version)))
}

// policyView is a policy as the API shows it; for agents, with the fleet
// settings it overrides.
type policyView struct {
	store.PolicyVersion
	Overrides []policy.Override `json:"overrides,omitempty"`
}

func (s *Server) getAgentPolicy(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
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
	setETag(w, pv.Version)
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
	setETag(w, pv.Version)
	writeJSON(w, http.StatusOK, pv)
}
