package web

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/insights"
	"github.com/airlockhq/airlock/web/templates"
)

// insightsOf returns the insights service (stateless over the store).
func (h *Handler) insightsOf() *insights.Service { return insights.New(h.store) }

// insightsPage shows the signals of one grouping over a window of days,
// with server-rendered charts, and the suggested rules.
func (h *Handler) insightsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := templates.InsightsView{By: q.Get("by"), Days: 30, CanEdit: auth.FromContext(r.Context()).Has(auth.RoleAdmin)}
	if d, err := strconv.Atoi(q.Get("days")); err == nil && slices.Contains(templates.InsightsDays, d) {
		v.Days = d
	}
	if v.By == "" {
		v.By = insights.ByReviewer
	}
	since := time.Now().Add(-time.Duration(v.Days) * 24 * time.Hour)
	svc := h.insightsOf()
	rep, err := svc.Insights(r.Context(), insights.Query{By: v.By, Since: since})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v.Rep = rep
	v.Rate, v.Decide = templates.RateChart(rep.Rows), templates.DecideChart(rep.Rows)
	if v.Suggestions, err = svc.Suggestions(r.Context(), since); err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, templates.InsightsPage(h.page(r, "Insights", "insights"), v))
}

// opened records a reviewer's first look at a pending action (the quick
// approvals signal). It never fails the page: the signal is advisory.
func (h *Handler) opened(r *http.Request, a *hitl.Action) {
	pr := auth.FromContext(r.Context())
	if !pr.Has(auth.RoleReviewer) {
		return
	}
	if err := h.insightsOf().Opened(r.Context(), a, pr.Subject); err != nil {
		h.log.WarnContext(r.Context(), "recording a page open", "action", a.ID, "err", err)
	}
}

// editSuggested shows the agent's policy editor with a suggested rule
// applied (insights.Service.SuggestedPolicy): saving it is an ordinary
// edit, checked against the version it was made from.
func (h *Handler) editSuggested(w http.ResponseWriter, r *http.Request, t policyTarget, actionID string) {
	doc, rule, version, err := h.insightsOf().SuggestedPolicy(r.Context(), t.name, actionID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v := h.editView(t)
	v.BaseVersion = version
	if v.YAML, err = policyYAML(doc); err != nil {
		h.fail(w, r, err)
		return
	}
	p := h.page(r, "Edit policy", navOf(t))
	p.Notice = "Suggested rule " + rule.ID + " added, and its call excepted from the rule that sent it to review. Read it, then save to apply."
	h.render(w, r, http.StatusOK, templates.PolicyEdit(p, v))
}
