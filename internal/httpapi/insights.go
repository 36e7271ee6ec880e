package httpapi

import (
	"net/http"
	"net/url"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/insights"
)

// insightsOf returns the insights service (stateless over the store).
func (s *Server) insightsOf() *insights.Service { return insights.New(s.store) }

func sinceParam(q url.Values) (time.Time, error) {
	v := q.Get("since")
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, &apperr.Error{Code: apperr.CodeInvalid, Message: "since must be an RFC 3339 time, e.g. 2026-12-01T09:00:00Z",
			Details: map[string]any{"field": "since"}}
	}
	return t, nil
}

func (s *Server) getInsights(w http.ResponseWriter, r *http.Request) {
	q, err := queryValues(r, []string{"by", "since"})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	since, err := sinceParam(q)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	rep, err := s.insightsOf().Insights(r.Context(), insights.Query{By: q.Get("by"), Since: since})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (s *Server) getSuggestions(w http.ResponseWriter, r *http.Request) {
	q, err := queryValues(r, []string{"since"})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	since, err := sinceParam(q)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	sugs, err := s.insightsOf().Suggestions(r.Context(), since)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"suggestions": sugs})
}
