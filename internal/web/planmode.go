package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/web/templates"
)

// hardStops reads what the queue's and the fleet page's banners show.
func (h *Handler) hardStops(r *http.Request) (templates.HardStops, error) {
	var out templates.HardStops
	var err error
	if out.PlanModes, err = h.svc.PlanModesOn(r.Context()); err != nil {
		return out, err
	}
	out.Stop, err = h.svc.FleetStopState(r.Context())
	return out, err
}

// planModeForm reads the switch's form: on ("true" or "false"; anything
// else is left unset, for the service to refuse) and the reason.
func planModeForm(r *http.Request) hitl.PlanModeRequest {
	req := hitl.PlanModeRequest{Reason: strings.TrimSpace(r.PostForm.Get("reason"))}
	if on, err := strconv.ParseBool(r.PostForm.Get("on")); err == nil {
		req.On = &on
	}
	return req
}

// setAgentPlanMode flips an agent's plan mode through the same service as
// PUT /api/v1/agents/{id}/plan-mode.
func (h *Handler) setAgentPlanMode(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathParam(w, r, "id")
	if !ok {
		return
	}
	if _, err := h.svc.SetPlanMode(r.Context(), id, auth.FromContext(r.Context()).Subject, planModeForm(r)); err != nil {
		h.fail(w, r, err)
		return
	}
	seeOther(w, r, templates.AgentURL(id))
}

// setFleetPlanMode flips the fleet's plan mode.
func (h *Handler) setFleetPlanMode(w http.ResponseWriter, r *http.Request) {
	if _, err := h.svc.SetPlanMode(r.Context(), "", auth.FromContext(r.Context()).Subject, planModeForm(r)); err != nil {
		h.fail(w, r, err)
		return
	}
	seeOther(w, r, "/ui/fleet")
}

// suspendFleet is the console's emergency stop, through the same service
// as POST /api/v1/fleet/suspend.
func (h *Handler) suspendFleet(w http.ResponseWriter, r *http.Request) {
	req := hitl.StopRequest{Reason: strings.TrimSpace(r.PostForm.Get("reason"))}
	if _, err := h.svc.SuspendFleet(r.Context(), auth.FromContext(r.Context()).Subject, req); err != nil {
		h.fail(w, r, err)
		return
	}
	seeOther(w, r, "/ui/fleet")
}

// resumeFleet lifts the emergency stop.
func (h *Handler) resumeFleet(w http.ResponseWriter, r *http.Request) {
	if _, err := h.svc.ResumeFleet(r.Context(), auth.FromContext(r.Context()).Subject); err != nil {
		h.fail(w, r, err)
		return
	}
	seeOther(w, r, "/ui/fleet")
}
