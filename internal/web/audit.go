package web

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/httpapi"
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

// audit searches the trail: newest first, a page at a time, with links
// to the latest, the newer and the older page and an export of everything
// the filters select (the API's NDJSON export).
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
	var older, newer int64
	for name, dst := range map[string]*int64{"older": &older, "newer": &newer} {
		if s := q.Get(name); err == nil && s != "" {
			if *dst, err = strconv.ParseInt(s, 10, 64); err != nil || *dst < 1 {
				err = apperr.Invalid("invalid %s cursor", name)
			}
		}
	}
	if err != nil {
		p.Error = h.message(r, err)
		h.render(w, r, http.StatusBadRequest, templates.AuditSearch(p, v))
		return
	}
	events, more, err := h.store.QueryEventsNewest(r.Context(), f, older, newer)
	if err == nil && newer > 0 && !more {
		// Nothing newer beyond this page: it is the latest page.
		newer = 0
		events, more, err = h.store.QueryEventsNewest(r.Context(), f, 0, 0)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v.Events = events
	v.Pager = auditPager(q, f, events, older, newer, more)
	h.render(w, r, http.StatusOK, templates.AuditSearch(p, v))
}

// auditPager links the page of events to its neighbours, the filters kept.
func auditPager(q url.Values, f audit.Filter, events []audit.Event, older, newer int64, more bool) templates.AuditPager {
	link := func(name string, id int64) string {
		nq := url.Values{}
		for _, k := range []string{"correlation_id", "agent", "conversation_id", "kind", "since", "until"} {
			if val := q.Get(k); val != "" {
				nq.Set(k, val)
			}
		}
		if name != "" {
			nq.Set(name, strconv.FormatInt(id, 10))
		}
		if len(nq) == 0 {
			return "/ui/audit"
		}
		return "/ui/audit?" + nq.Encode()
	}
	var pg templates.AuditPager
	notLatest := older > 0 || newer > 0
	if notLatest {
		pg.LatestURL = link("", 0)
	}
	if len(events) > 0 {
		first, last := events[0].ID, events[len(events)-1].ID
		if notLatest {
			pg.NewerURL = link("newer", first)
		}
		if (newer > 0) || more {
			pg.OlderURL = link("older", last)
		}
	}
	eq := url.Values{}
	for k, val := range map[string]string{"correlation_id": f.CorrelationID, "agent": f.AgentID, "conversation_id": f.ConversationID,
		"kind": string(f.Kind)} {
		if val != "" {
			eq.Set(k, val)
		}
	}
	if !f.Since.IsZero() {
		eq.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		eq.Set("until", f.Until.UTC().Format(time.RFC3339Nano))
	}
	pg.ExportURL = "/api/v1/audit/export"
	if len(eq) > 0 {
		pg.ExportURL += "?" + eq.Encode()
	}
	return pg
}

// timeline shows every event of one correlation ID in order.
func (h *Handler) timeline(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathParam(w, r, "id")
	if !ok {
		return
	}
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
	var agents []string
	for _, e := range events {
		if e.AgentID != "" && !slices.Contains(agents, e.AgentID) {
			agents = append(agents, e.AgentID)
		}
	}
	slices.Sort(agents)
	h.render(w, r, http.StatusOK, templates.Timeline(h.page(r, "Timeline", "audit"),
		templates.TimelineView{CorrelationID: id, Events: events, More: next > 0, Spot: spot, Agents: agents}))
}

// verifyChain walks the chain against its signed checkpoints, from its
// start or (?from=SEQ, the page's form) after a stored checkpoint, and
// shows the report.
func (h *Handler) verifyChain(w http.ResponseWriter, r *http.Request) {
	var from int64
	if v := r.URL.Query().Get("from"); v != "" { // the form's empty field: the chain's start
		var err error
		if from, err = httpapi.ParseVerifyFrom(v); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	report, err := h.api.VerifyChain(r.Context(), from)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var keys []string
	for _, k := range h.api.AuditKeys() {
		keys = append(keys, base64.StdEncoding.EncodeToString(k))
	}
	h.render(w, r, http.StatusOK, templates.VerifyPage(h.page(r, "Verify the audit chain", "audit"), report, keys))
}
