package web

import (
	"net/http"

	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/web/templates"
)

// decidedLimit is how many decided actions one page of the history shows.
const decidedLimit = 50

// outcomeStatuses are the statuses an outcome filter selects: an approved
// action may have run since.
var outcomeStatuses = map[string][]hitl.Status{
	"approved":  {hitl.StatusApproved, hitl.StatusRunning, hitl.StatusSucceeded, hitl.StatusFailed},
	"denied":    {hitl.StatusDenied},
	"expired":   {hitl.StatusExpired},
	"cancelled": {hitl.StatusCancelled},
}

// history is the Decided view: actions that are no longer pending, filtered by
// agent, tool, outcome, reviewer (or "mine") and time, a page at a time,
// through the same list the API serves (hitl.Service.List).
func (h *Handler) history(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := templates.DecidedView{Agent: q.Get("agent"), Tool: q.Get("tool"), Outcome: q.Get("outcome"), Reviewer: q.Get("reviewer"),
		Since: q.Get("since"), Until: q.Get("until"), Mine: q.Get("mine") != ""}
	cursor := q.Get("cursor")
	v.Older = cursor != ""
	f := hitl.ListFilter{AgentID: v.Agent, Tool: v.Tool, DecidedBy: v.Reviewer, Limit: decidedLimit, Cursor: cursor}
	if v.Mine {
		f.DecidedBy = auth.FromContext(r.Context()).Subject
	}
	if st, ok := outcomeStatuses[v.Outcome]; ok {
		f.Statuses = st
	} else {
		v.Outcome = ""
		for _, st := range hitl.Statuses() {
			if st != hitl.StatusPending {
				f.Statuses = append(f.Statuses, st)
			}
		}
	}
	p := h.page(r, "Decided", "decided")
	var err error
	if v.Since != "" {
		f.Since, err = localTime(v.Since)
	}
	if err == nil && v.Until != "" {
		f.Until, err = localTime(v.Until)
	}
	agents, aerr := h.store.Agents(r.Context())
	if aerr != nil {
		h.fail(w, r, aerr)
		return
	}
	for _, a := range agents {
		v.Agents = append(v.Agents, a.ID)
	}
	var list []*hitl.Action
	if err == nil {
		list, v.Next, err = h.svc.List(r.Context(), f)
	}
	if err != nil {
		p.Error = h.message(r, err)
		h.render(w, r, statusOf(err), templates.DecidedPage(p, v))
		return
	}
	for _, a := range list {
		v.Actions = append(v.Actions, *a)
	}
	h.render(w, r, http.StatusOK, templates.DecidedPage(p, v))
}
