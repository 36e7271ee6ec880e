package web

import (
	"net/http"

	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/risk"
	"github.com/airlockhq/airlock/web/templates"
)

// queueLimit is how many pending actions one page of the queue shows.
const queueLimit = 100

// queueFilter reads the queue's filters; an unknown risk level is ignored.
// mine (the default for reviewers; ?show=all turns it off) shows only the
// actions the viewer may approve (hitl.ApprovalProblem).
func queueFilter(r *http.Request) (agent, level string, mine bool) {
	q := r.URL.Query()
	agent, level = q.Get("agent"), q.Get("risk")
	if _, ok := risk.ParseLevel(level); !ok {
		level = ""
	}
	mine = q.Get("show") != "all" && auth.FromContext(r.Context()).Has(auth.RoleReviewer)
	return agent, level, mine
}

// pending lists a page of the pending actions the filters select, newest
// first, from cursor ("" for the first page), and the next page's cursor.
func (h *Handler) pending(r *http.Request, agent, level, cursor string, mine bool) ([]hitl.Action, string, error) {
	f := hitl.ListFilter{Status: hitl.StatusPending, AgentID: agent, Risk: level, Limit: queueLimit, Cursor: cursor}
	if mine {
		f.CanApprove = auth.FromContext(r.Context()).Subject
	}
	list, next, err := h.svc.List(r.Context(), f)
	if err != nil {
		return nil, "", err
	}
	out := make([]hitl.Action, len(list))
	for i, a := range list {
		out[i] = *a
	}
	return out, next, nil
}

func (h *Handler) queue(w http.ResponseWriter, r *http.Request) {
	h.renderQueue(w, r, http.StatusOK, h.page(r, "Queue", "queue"))
}

// renderQueue renders the queue page in frame p (which may carry a
// refusal to show, e.g. of a batch).
func (h *Handler) renderQueue(w http.ResponseWriter, r *http.Request, status int, p templates.Page) {
	agent, level, mine := queueFilter(r)
	cursor := r.URL.Query().Get("cursor")
	actions, next, err := h.pending(r, agent, level, cursor, mine)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	agents, err := h.store.Agents(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ids := make([]string, len(agents))
	for i, a := range agents {
		ids[i] = a.ID
	}
	stops, err := h.hardStops(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if cursor == "" {
		p.Pending, p.PendingMore = len(actions), next != ""
	}
	p.Scripts = []string{"/static/vendor/htmx.min.js", "/static/vendor/htmx-ext-ws.min.js", "/static/js/queue.js"}
	h.render(w, r, status, templates.Queue(p, templates.QueueView{Actions: actions, Agents: ids, Agent: agent, Risk: level,
		Next: next, Older: cursor != "", HardStops: stops, Mine: mine}))
}

// queueRows renders only the rows: the queue page reloads them to resync
// after its websocket reconnects.
func (h *Handler) queueRows(w http.ResponseWriter, r *http.Request) {
	agent, level, mine := queueFilter(r)
	actions, _, err := h.pending(r, agent, level, r.URL.Query().Get("cursor"), mine)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, templates.QueueRows(actions, h.page(r, "", "").Now))
}
