package web

import (
	"net/http"

	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/risk"
	"github.com/airlockhq/airlock/web/templates"
)

// queueLimit is how many pending actions the queue shows.
const queueLimit = 200

// queueFilter reads the queue's filters; an unknown risk level is ignored.
func queueFilter(r *http.Request) (agent, level string) {
	q := r.URL.Query()
	agent, level = q.Get("agent"), q.Get("risk")
	if _, ok := risk.ParseLevel(level); !ok {
		level = ""
	}
	return agent, level
}

// pending lists the pending actions the filters select, newest first.
func (h *Handler) pending(r *http.Request, agent, level string) ([]hitl.Action, bool, error) {
	list, next, err := h.svc.List(r.Context(), hitl.ListFilter{Status: hitl.StatusPending, AgentID: agent, Risk: level, Limit: queueLimit})
	if err != nil {
		return nil, false, err
	}
	out := make([]hitl.Action, len(list))
	for i, a := range list {
		out[i] = *a
	}
	return out, next != "", nil
}

func (h *Handler) queue(w http.ResponseWriter, r *http.Request) {
	agent, level := queueFilter(r)
	actions, more, err := h.pending(r, agent, level)
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
	p := h.page(r, "Queue", "queue")
	p.Scripts = []string{"/static/vendor/htmx.min.js", "/static/vendor/htmx-ext-ws.min.js", "/static/js/queue.js"}
	h.render(w, r, http.StatusOK, templates.Queue(p, templates.QueueView{Actions: actions, Agents: ids, Agent: agent, Risk: level, More: more}))
}

// queueRows renders only the rows: the queue page reloads them to resync
// after its websocket reconnects.
func (h *Handler) queueRows(w http.ResponseWriter, r *http.Request) {
	agent, level := queueFilter(r)
	actions, _, err := h.pending(r, agent, level)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, templates.QueueRows(actions, h.page(r, "", "").Now))
}
