// Package metrics exposes Airlock's Prometheus metrics: actions by tool,
// effect, risk and final status, human decision latency, the pending queue,
// HTTP latency and the audit sealer's state.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/hitl"
)

// maxTools bounds the tool label: tool names come from agents, and an
// unbounded label would let one agent exhaust the scraper's memory. Only
// names a policy knows are labelled (see NameTools); this bound holds even
// when a policy's glob matches many names.
const maxTools = 200

// OtherTool is the tool label of every tool that is not labelled by name.
const OtherTool = "other"

// ToolNamer reports whether the tool an agent called is named by a policy
// (the fleet's or that agent's, by exact name or a glob other than "*").
// It is on the submit path: it must answer from memory, with no query.
type ToolNamer func(agentID, tool string) bool

// Metrics holds the collectors and implements hitl.Metrics.
type Metrics struct {
	reg       *prometheus.Registry
	submitted *prometheus.CounterVec
	finished  *prometheus.CounterVec
	decision  *prometheus.HistogramVec
	http      *prometheus.HistogramVec

	mu    sync.Mutex
	tools map[string]struct{}
	named ToolNamer

	notified *prometheus.CounterVec
}

// PendingCounter counts pending actions across all instances.
type PendingCounter func(ctx context.Context) (int, error)

// New registers Airlock's metrics. pending is queried at scrape time so the
// gauge is right whichever instance is scraped.
func New(pending PendingCounter) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		submitted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_actions_submitted_total", Help: "Actions submitted, by tool, policy effect and risk level.",
		}, []string{"tool", "effect", "risk"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_actions_status_total", Help: "Actions reaching a status, by tool and status.",
		}, []string{"tool", "status"}),
		decision: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "airlock_decision_latency_seconds",
			Help:    "Time from submission to a human decision or expiry.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 14400, 86400},
		}, []string{"status"}),
		http: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "airlock_http_request_duration_seconds",
			Help:    "HTTP request latency by route and status.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 60},
		}, []string{"method", "route", "code"}),
		notified: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "airlock_notifications_total", Help: "Notification delivery attempts, by target kind and outcome.",
		}, []string{"kind", "outcome"}),
		tools: map[string]struct{}{},
	}
	m.reg.MustRegister(m.submitted, m.finished, m.decision, m.http, m.notified,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if pending != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "airlock_actions_pending", Help: "Actions waiting for a human decision (all instances).",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, err := pending(ctx)
			if err != nil {
				return -1
			}
			return float64(n)
		}))
	}
	return m
}

// SubmitBatches exposes the group commit of submits: statements written
// and the commits that wrote them.
func (m *Metrics) SubmitBatches(read func() (statements, commits uint64)) {
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "airlock_submit_writes_total", Help: "Submits written (action, audit event and job in one statement).",
		}, func() float64 { n, _ := read(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "airlock_submit_commits_total", Help: "Commits that wrote them: submits arriving together share one (group commit).",
		}, func() float64 { _, n := read(); return float64(n) }),
	)
}

// AuditSealing exposes what the instance's audit sealer reports
// (audit.Sealer.Stats): a sealer that cannot get its lock, or that falls
// behind, shows here before an auditor's verification reports the events
// it left unsealed.
func (m *Metrics) AuditSealing(stats func() audit.SealerStats) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "airlock_audit_seal_lock_missed_rounds",
			Help: "Sealing rounds in a row that found the sealing lock held by another session (another instance, briefly; else something holding it).",
		}, func() float64 { return float64(stats().LockMissed) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "airlock_audit_seal_lag_seconds",
			Help: "Seconds since this instance's sealer last left no committed audit event unsealed.",
		}, func() float64 { return stats().Lag.Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "airlock_audit_seal_watermarks_refused_total",
			Help: "Stored sealing watermarks the sealer refused to go by (above the last event id, or over unsealed events).",
		}, func() float64 { return float64(stats().WatermarksRefused) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "airlock_audit_checkpoints_skipped_total",
			Help: "Stored audit checkpoints the sealer went past: nobody holding an audit key signed them.",
		}, func() float64 { return float64(stats().CheckpointsSkipped) }),
	)
}

// HeldRequests exposes what a caller-capped kind of long-lived request
// holds (connlimit.Limiter.Stats): kind is "long_poll" or "stream".
func (m *Metrics) HeldRequests(kind string, stats func() (held, keys int, refused uint64)) {
	labels := prometheus.Labels{"kind": kind}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "airlock_held_requests", ConstLabels: labels,
			Help: "Long-lived requests (long polls, streams) this instance holds open now.",
		}, func() float64 { n, _, _ := stats(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "airlock_held_requests_refused_total", ConstLabels: labels,
			Help: "Long-lived requests refused (429) because their caller held as many as it may on this instance.",
		}, func() float64 { _, _, n := stats(); return float64(n) }),
	)
}

// NameTools sets how a tool name earns its own label; without it (or with
// nil) every tool is labelled OtherTool. Call it before serving.
func (m *Metrics) NameTools(named ToolNamer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.named = named
}

// Handler serves the metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// tool is a's tool label: its name once some policy named it (the name
// keeps its label from then on, so a series never changes label), else
// OtherTool. The namer is asked outside the lock.
func (m *Metrics) tool(a *hitl.Action) string {
	m.mu.Lock()
	_, known := m.tools[a.Tool]
	full, named := len(m.tools) >= maxTools, m.named
	m.mu.Unlock()
	switch {
	case known:
		return a.Tool
	case full || named == nil || !named(a.AgentID, a.Tool):
		return OtherTool
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.tools[a.Tool]; !ok && len(m.tools) >= maxTools {
		return OtherTool
	}
	m.tools[a.Tool] = struct{}{}
	return a.Tool
}

// Submitted implements hitl.Metrics.
func (m *Metrics) Submitted(a *hitl.Action) {
	m.submitted.WithLabelValues(m.tool(a), a.Decision.Effect, string(a.Risk.Level)).Inc()
}

// Finished implements hitl.Metrics.
func (m *Metrics) Finished(a *hitl.Action, latency time.Duration) {
	m.finished.WithLabelValues(m.tool(a), string(a.Status)).Inc()
	if latency > 0 {
		m.decision.WithLabelValues(string(a.Status)).Observe(latency.Seconds())
	}
}

// ObserveHTTP records one request.
func (m *Metrics) ObserveHTTP(method, route string, status int, d time.Duration) {
	if !httpMethods[method] {
		// Go's server takes any token as a method: one label value each
		// would let anyone, unauthenticated, grow the registry for ever.
		method = "other"
	}
	m.http.WithLabelValues(method, route, strconv.Itoa(status)).Observe(d.Seconds())
}

// httpMethods bound the HTTP histogram's method label.
var httpMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// notifyKinds and notifyOutcomes bound the labels of the notification
// counter.
var (
	notifyKinds    = map[string]bool{"slack": true, "webhook": true, "email": true}
	notifyOutcomes = map[string]bool{"delivered": true, "failed": true, "given_up": true}
)

// Notified counts one notification attempt by target kind and outcome
// (delivered; failed: retried later; given_up); it implements
// notify.Metrics.
func (m *Metrics) Notified(kind, outcome string) {
	if !notifyKinds[kind] {
		kind = "unknown"
	}
	if !notifyOutcomes[outcome] {
		outcome = "failed"
	}
	m.notified.WithLabelValues(kind, outcome).Inc()
}
