package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
)

// auditFilterParams are the audit query's parameters (parseAuditFilter).
var auditFilterParams = []string{"correlation_id", "agent", "conversation_id", "action_id", "kind", "since", "until", "limit", "cursor"}

// parseAuditFilter reads the audit query parameters from q.
func parseAuditFilter(q url.Values) (audit.Filter, error) {
	f := audit.Filter{
		CorrelationID: q.Get("correlation_id"), AgentID: q.Get("agent"), ConversationID: q.Get("conversation_id"),
		ActionID: q.Get("action_id"), Kind: audit.Kind(q.Get("kind")), Limit: audit.DefaultLimit,
	}
	for name, dst := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return f, apperr.Invalid("%s must be an RFC 3339 time", name)
			}
			*dst = t
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > audit.MaxLimit {
			return f, apperr.Invalid("limit must be between 1 and %d", audit.MaxLimit)
		}
		f.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return f, apperr.Invalid("invalid cursor")
		}
		f.After = n
	}
	return f, nil
}

func (s *Server) queryAudit(w http.ResponseWriter, r *http.Request) {
	q, err := queryValues(r, auditFilterParams)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	f, err := parseAuditFilter(q)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	events, next, err := s.store.QueryEvents(r.Context(), f)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	cursor := ""
	if next > 0 {
		cursor = strconv.FormatInt(next, 10)
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": events, "next_cursor": cursor})
}
