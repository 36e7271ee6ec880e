package web

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/web/templates"
)

// auditPage is the page size of the console's audit search.
const auditPage = 100

// localTime parses the value of an <input type="datetime-local">, read as
// UTC.
func localTime(s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", time.RFC3339} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, apperr.Invalid("%q is not a date and time", s)
}

// audit searches the trail: oldest first, a page at a time.
func (h *Handler) audit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := templates.AuditView{CorrelationID: q.Get("correlation_id"), AgentID: q.Get("agent"),
		ConversationID: q.Get("conversation_id"), Kind: q.Get("kind"), Since: q.Get("since"), Until: q.Get("until"), Searched: true}
	f := audit.Filter{CorrelationID: v.CorrelationID, AgentID: v.AgentID, ConversationID: v.ConversationID,
		Kind: audit.Kind(v.Kind), Limit: auditPage}
	p := h.page(r, "Audit", "audit")
	var err error
	if v.Since != "" {
		f.Since, err = localTime(v.Since)
	}
	if err == nil && v.Until != "" {
		f.Until, err = localTime(v.Until)
	}
	if err == nil && q.Get("cursor") != "" {
		f.After, err = strconv.ParseInt(q.Get("cursor"), 10, 64)
		if err != nil {
			err = apperr.Invalid("invalid cursor")
		}
	}
	if err != nil {
		p.Error = h.message(r, err)
		h.render(w, r, http.StatusBadRequest, templates.AuditSearch(p, v))
		return
	}
	events, next, err := h.store.QueryEvents(r.Context(), f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v.Events = events
	if next > 0 {
		nq := url.Values{}
		for k, vals := range q {
			if k != "cursor" && len(vals) > 0 && vals[0] != "" {
				nq.Set(k, vals[0])
			}
		}
		nq.Set("cursor", strconv.FormatInt(next, 10))
		v.NextURL = "/ui/audit?" + nq.Encode()
	}
	h.render(w, r, http.StatusOK, templates.AuditSearch(p, v))
}

// timeline shows every event of one correlation ID in order.
func (h *Handler) timeline(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	events, next, err := h.store.QueryEvents(r.Context(), audit.Filter{CorrelationID: id, Limit: audit.MaxLimit})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// The badge: these events' hashes and chain links, checked in place.
	var records []audit.Record
	err = h.store.ExportEvents(r.Context(), audit.Filter{CorrelationID: id, Limit: audit.MaxLimit}, false, func(rec *audit.Record) error {
		records = append(records, *rec)
		return nil
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	spot, err := audit.SpotCheck(r.Context(), h.store, records)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, templates.Timeline(h.page(r, "Timeline", "audit"),
		templates.TimelineView{CorrelationID: id, Events: events, More: next > 0, Spot: spot}))
}

// verifyChain walks the whole chain against its signed checkpoints and
// shows the report.
func (h *Handler) verifyChain(w http.ResponseWriter, r *http.Request) {
	report, err := h.api.VerifyChain(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, templates.VerifyPage(h.page(r, "Verify the audit chain", "audit"), report))
}
