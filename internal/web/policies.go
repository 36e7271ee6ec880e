package web

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/httpapi"
	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/web/templates"
)

// newPolicyYAML is the editor's starting point for a scope without a policy.
const newPolicyYAML = `default: deny
rules:
  - id: reads
    tool: fs.read
    effect: allow
  - id: ask-before-sending
    tool: email.send
    effect: approve
    timeout: 15m
`

// policyTarget is the policy a page is about: the fleet's or an agent's.
type policyTarget struct {
	scope   string // store scope
	name    string // "fleet" or the agent id
	isFleet bool
	base    string // the policy page's URL
}

func (h *Handler) agentTarget(r *http.Request) (policyTarget, error) {
	id, err := httpapi.PathParam(r, "id")
	if err != nil {
		return policyTarget{}, err
	}
	if _, err := h.store.Agent(r.Context(), id); err != nil {
		return policyTarget{}, err
	}
	return policyTarget{scope: store.AgentScope(id), name: id, base: templates.AgentURL(id) + "/policy"}, nil
}

var fleetTarget = policyTarget{scope: store.FleetScope, name: "fleet", isFleet: true, base: "/ui/fleet"}

func (h *Handler) agentPolicy(w http.ResponseWriter, r *http.Request) {
	t, err := h.agentTarget(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.showPolicy(w, r, t)
}

func (h *Handler) fleetPolicy(w http.ResponseWriter, r *http.Request) {
	h.showPolicy(w, r, fleetTarget)
}

// showPolicy renders a policy page: ?v=N shows version N (default the
// newest), ?from=A&to=B adds the diff between versions A and B.
func (h *Handler) showPolicy(w http.ResponseWriter, r *http.Request, t policyTarget) {
	ctx := r.Context()
	versions, err := h.store.PolicyVersions(ctx, t.scope)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	find := func(name string, def int) (*store.PolicyVersion, error) {
		n := def
		if s := q.Get(name); s != "" {
			if n, err = strconv.Atoi(s); err != nil {
				return nil, apperr.Invalid("%s must be a version number", name)
			}
		}
		for i := range versions {
			if versions[i].Version == n {
				return &versions[i], nil
			}
		}
		if n == 0 {
			return nil, nil
		}
		return nil, apperr.NotFound("there is no version %d of this policy", n)
	}
	v := templates.PolicyView{Scope: t.name, IsFleet: t.isFleet, Base: t.base, Versions: versions}
	if t.isFleet {
		stops, err := h.hardStops(r)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		v.HardStops = &stops
	}
	latest := 0
	if len(versions) > 0 {
		latest = versions[0].Version
	}
	if v.Shown, err = find("v", latest); err != nil {
		h.fail(w, r, err)
		return
	}
	if v.Shown != nil {
		if v.YAML, err = policyYAML(v.Shown.Document); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	if q.Get("from") != "" || q.Get("to") != "" {
		from, err1 := find("from", 0)
		to, err2 := find("to", latest)
		if err := errors.Join(err1, err2); err != nil || from == nil || to == nil {
			if err == nil {
				err = apperr.Invalid("name two versions to compare")
			}
			h.fail(w, r, err)
			return
		}
		a, err1 := policyYAML(from.Document)
		b, err2 := policyYAML(to.Document)
		if err := errors.Join(err1, err2); err != nil {
			h.fail(w, r, err)
			return
		}
		v.From, v.To, v.Diff = from.Version, to.Version, lineDiff(a, b)
		if v.Diff == nil {
			v.Diff = []templates.DiffLine{}
		}
	}
	if t.isFleet {
		var current policy.Settings
		if len(versions) > 0 {
			current = versions[0].Document.Settings
		}
		v.DenyPaths, v.ReadOnlyPaths = policy.MergedPaths(current)
		if v.Overrides, err = h.allOverrides(r); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	title := "Policy of " + t.name
	nav := "agents"
	if t.isFleet {
		title, nav = "Fleet policy", "fleet"
	}
	p := h.page(r, title, nav)
	if s := q.Get("saved"); s != "" {
		p.Notice = "Saved as version " + s + ". New submissions are decided by it."
	}
	h.render(w, r, http.StatusOK, templates.PolicyPage(p, v))
}

// allOverrides lists every agent whose policy overrides a fleet setting.
func (h *Handler) allOverrides(r *http.Request) ([]templates.AgentOverrides, error) {
	agents, err := h.store.Agents(r.Context())
	if err != nil {
		return nil, err
	}
	var out []templates.AgentOverrides
	for _, a := range agents {
		_, set, err := h.store.AgentPolicy(r.Context(), a.ID)
		if err != nil {
			return nil, err
		}
		if o := set.Overrides(); len(o) > 0 {
			out = append(out, templates.AgentOverrides{AgentID: a.ID, Overrides: o})
		}
	}
	return out, nil
}

func (h *Handler) editAgentPolicy(w http.ResponseWriter, r *http.Request) {
	t, err := h.agentTarget(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if id := r.URL.Query().Get("suggestion"); id != "" {
		h.editSuggested(w, r, t, id)
		return
	}
	h.editPolicy(w, r, t)
}

func (h *Handler) editFleetPolicy(w http.ResponseWriter, r *http.Request) {
	h.editPolicy(w, r, fleetTarget)
}

// editPolicy shows the current version in the YAML editor.
func (h *Handler) editPolicy(w http.ResponseWriter, r *http.Request, t policyTarget) {
	v := h.editView(t)
	pv, err := h.store.Policy(r.Context(), t.scope)
	switch {
	case err == nil:
		v.BaseVersion = pv.Version
		if v.YAML, err = policyYAML(pv.Document); err != nil {
			h.fail(w, r, err)
			return
		}
	case apperr.CodeOf(err) == apperr.CodeNotFound:
		v.YAML = newPolicyYAML
	default:
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, templates.PolicyEdit(h.page(r, "Edit policy", navOf(t)), v))
}

func (h *Handler) editView(t policyTarget) templates.PolicyEditView {
	action := t.base
	if t.isFleet {
		action = "/ui/fleet"
	}
	return templates.PolicyEditView{Scope: t.name, IsFleet: t.isFleet, Base: t.base, Action: action, RuleIndex: -1}
}

func navOf(t policyTarget) string {
	if t.isFleet {
		return "fleet"
	}
	return "agents"
}

func (h *Handler) saveAgentPolicy(w http.ResponseWriter, r *http.Request) {
	t, err := h.agentTarget(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.savePolicy(w, r, t)
}

func (h *Handler) saveFleetPolicy(w http.ResponseWriter, r *http.Request) {
	h.savePolicy(w, r, fleetTarget)
}

// savePolicy validates the posted YAML and writes it as the next version.
// A refused document comes back in the editor with the error, the rule and
// the field it names; a policy changed by someone else since the editor
// opened is refused rather than overwritten.
func (h *Handler) savePolicy(w http.ResponseWriter, r *http.Request, t policyTarget) {
	ctx := r.Context()
	v := h.editView(t)
	v.YAML = r.PostForm.Get("document")
	base, err := strconv.Atoi(r.PostForm.Get("base_version"))
	if err != nil || base < 0 {
		h.fail(w, r, apperr.Invalid("base_version must be the version the edit started from"))
		return
	}
	v.BaseVersion = base
	refuse := func(err error) {
		e, ok := apperr.As(err)
		if !ok {
			h.fail(w, r, err)
			return
		}
		v.Error = e.Message
		var ve *policy.ValidationError
		if errors.As(err, &ve) {
			v.Error, v.RuleIndex, v.RuleID, v.Field = ve.Message, ve.RuleIndex, ve.RuleID, ve.Field
		}
		h.render(w, r, statusOf(err), templates.PolicyEdit(h.page(r, "Edit policy", navOf(t)), v))
	}
	doc, err := policy.ParseDocument([]byte(v.YAML))
	if err != nil {
		refuse(err)
		return
	}
	if doc.Rules == nil {
		doc.Rules = []policy.Rule{}
	}
	// The store compares base with the current version in the transaction
	// that writes: a save by someone else in between is refused, never
	// overwritten.
	pv, err := h.store.PutPolicyIf(ctx, t.scope, doc, auth.FromContext(ctx).Subject, base)
	if apperr.CodeOf(err) == apperr.CodePrecondition {
		current, cerr := h.store.Policy(ctx, t.scope)
		if cerr != nil {
			h.fail(w, r, cerr)
			return
		}
		// The editor now starts from the version that won: saving again is a
		// decision taken with the conflict in view.
		v.Conflict, v.ConflictBase, v.BaseVersion = &current, base, current.Version
		refuse(err)
		return
	}
	if err != nil {
		refuse(err)
		return
	}
	seeOther(w, r, t.base+"?saved="+strconv.Itoa(pv.Version))
}
