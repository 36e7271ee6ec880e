// Package benchtable is the performance table of issue 14 as data: its rows
// (what is measured, how, and the target), the figures each row is judged
// on, the results file the benchmark commands append those figures to
// (JSON lines), and the verdict cmd/benchreport prints.
//
// The targets live here, once: a benchmark records a figure with [Measure],
// which judges it against its metric's limit, and the report reads the
// judged figures back.
package benchtable

import (
	"fmt"
	"math"
)

// Cmp is how a figure is compared with its limit.
type Cmp int

const (
	// AtLeast passes when the value is ≥ the limit.
	AtLeast Cmp = iota
	// AtMost passes when the value is ≤ the limit.
	AtMost
	// Within passes when the value's magnitude is ≤ the limit (|v| ≤ limit).
	Within
)

// Metric is one figure a row is judged on.
type Metric struct {
	// ID names the metric in results files ("allow.vs_floor").
	ID string
	// Label says what the figure is: a format with one %s for the value
	// ("p99 %s", "%s of the bare floor").
	Label string
	// Unit is the value's unit: "%", "ms", "events/s", "KiB" or "count".
	Unit string
	// Cmp and Limit are the target.
	Cmp   Cmp
	Limit float64
	// MinScale is the scale the target is stated at (events seeded,
	// connections, waiting agents); 0 when the figure has none. A figure
	// measured at a smaller scale is not at the stated scale.
	MinScale int64
	// ScaleUnit names what the scale counts ("events").
	ScaleUnit string
}

// Target is the metric's target in words ("≥ 60 %").
func (m Metric) Target() string {
	op := map[Cmp]string{AtLeast: "≥", AtMost: "≤", Within: "within ±"}[m.Cmp]
	return op + " " + formatValue(m.Limit, m.Unit)
}

// pass reports whether v meets the target.
func (m Metric) pass(v float64) bool {
	if math.IsNaN(v) {
		return false
	}
	switch m.Cmp {
	case AtLeast:
		return v >= m.Limit
	case AtMost:
		return v <= m.Limit
	default:
		return math.Abs(v) <= m.Limit
	}
}

// Row is one row of the table.
type Row struct {
	// ID names the row ("allow").
	ID string
	// What, How and Target are the table's three columns.
	What, How, Target string
	// Command is the benchmark that measures the row.
	Command string
	// Metrics are the figures the row is judged on: it passes when every
	// one of them is present and passes.
	Metrics []Metric
}

// Rows is the table, in the order.
var Rows = []Row{
	{
		ID: "allow", What: "allow path", Command: "cmd/bench",
		How: "32 agents, HTTP, durable; against one `BEGIN; INSERT action; INSERT audit; COMMIT` per decision " +
			"into bare tables (primary keys only) on a fresh cluster with default settings, 32 connections, phases interleaved in rounds",
		Target: "≥ 60 % of that floor, p99 ≤ 10 ms",
		Metrics: []Metric{
			{ID: "allow.vs_floor", Label: "%s of the bare floor", Unit: "%", Cmp: AtLeast, Limit: 60, MinScale: 32, ScaleUnit: "agents"},
			{ID: "allow.p99", Label: "p99 %s", Unit: "ms", Cmp: AtMost, Limit: 10, MinScale: 32, ScaleUnit: "agents"},
		},
	},
	{
		ID: "pending", What: "pending path", Command: "cmd/bench",
		How:    "same, calls the policy makes pending",
		Target: "≥ 50 % of that floor, p99 ≤ 12 ms",
		Metrics: []Metric{
			{ID: "pending.vs_floor", Label: "%s of the bare floor", Unit: "%", Cmp: AtLeast, Limit: 50, MinScale: 32, ScaleUnit: "agents"},
			{ID: "pending.p99", Label: "p99 %s", Unit: "ms", Cmp: AtMost, Limit: 12, MinScale: 32, ScaleUnit: "agents"},
		},
	},
	{
		ID: "wake", What: "decision → waiting agent", Command: "cmd/fanoutbench",
		How: "two instances on one database; 200 agents long-poll their pending action on instance 2 (`?wait=60s`); " +
			"a reviewer approves over HTTP on instance 1; from the start of the approve request until the agent's poll returns",
		Target: "p99 ≤ 50 ms",
		Metrics: []Metric{
			{ID: "wake.p99", Label: "p99 %s", Unit: "ms", Cmp: AtMost, Limit: 50, MinScale: 200, ScaleUnit: "waiting agents"},
		},
	},
	{
		ID: "reviewers-1000", What: "decision → reviewers (1,000)", Command: "cmd/fanoutbench -reviewers 1000",
		How: "1,000 websocket reviewers over two instances (a separate process), an agent submitting pending actions to instance 1 " +
			"at 20/s (20,000 messages/s); submit → action.created received; memory: the bench process's growth (it holds the instances only), before connecting → all connected " +
			"and subscribed, after a GC, per connection: the larger of RSS and Go heap + stacks",
		Target: "p99 ≤ 50 ms, nothing lost, ≤ 64 KiB per connection",
		Metrics: []Metric{
			{ID: "reviewers-1000.p99", Label: "p99 %s", Unit: "ms", Cmp: AtMost, Limit: 50, MinScale: 1000, ScaleUnit: "reviewers"},
			{ID: "reviewers-1000.lost", Label: "%s lost", Unit: "count", Cmp: AtMost, Limit: 0, MinScale: 1000, ScaleUnit: "reviewers"},
			{ID: "reviewers-1000.memory", Label: "%s per connection", Unit: "KiB", Cmp: AtMost, Limit: 64, MinScale: 1000, ScaleUnit: "reviewers"},
		},
	},
	{
		ID: "reviewers-5000", What: "decision → reviewers (5,000)", Command: "cmd/fanoutbench -reviewers 5000",
		How:    "same with 5,000 reviewers, at the same 20,000 messages/s (4 actions/s)",
		Target: "p99 ≤ 200 ms, nothing lost, ≤ 64 KiB per connection",
		Metrics: []Metric{
			{ID: "reviewers-5000.p99", Label: "p99 %s", Unit: "ms", Cmp: AtMost, Limit: 200, MinScale: 5000, ScaleUnit: "reviewers"},
			{ID: "reviewers-5000.lost", Label: "%s lost", Unit: "count", Cmp: AtMost, Limit: 0, MinScale: 5000, ScaleUnit: "reviewers"},
			{ID: "reviewers-5000.memory", Label: "%s per connection", Unit: "KiB", Cmp: AtMost, Limit: 64, MinScale: 5000, ScaleUnit: "reviewers"},
		},
	},
	{
		ID: "sealing", What: "sealing", Command: "cmd/bench -audit",
		How: "allow-path submit throughput (32 agents, HTTP) with the sealer stopped and running, alternating in 1 s phases, " +
			"each pair in the order opposite to the one before; the gap is 1 − running/stopped over all phases",
		Target: "≤ 3 % apart",
		Metrics: []Metric{
			{ID: "sealing.gap", Label: "%s apart", Unit: "%", Cmp: Within, Limit: 3},
		},
	},
	{
		ID: "verification", What: "verification", Command: "cmd/bench -audit",
		How:    "`audit.Verify` through the store over the whole seeded chain (AUDIT_EVENTS), checkpoint signature included",
		Target: "≥ 500,000 events/s at 5 M events",
		Metrics: []Metric{
			{ID: "verification.rate", Label: "%s", Unit: "events/s", Cmp: AtLeast, Limit: 500_000, MinScale: 5_000_000, ScaleUnit: "events"},
		},
	},
	{
		ID: "correlation", What: "correlation-ID query", Command: "cmd/bench -audit",
		How: "a page of one correlation ID's events through the store's query code, one at a time, 2,000 random IDs " +
			"after 2,000 untimed ones (warm)",
		Target: "p99 ≤ 2 ms at 20 M events",
		Metrics: []Metric{
			{ID: "correlation.p99", Label: "p99 %s", Unit: "ms", Cmp: AtMost, Limit: 2, MinScale: 20_000_000, ScaleUnit: "events"},
		},
	},
	{
		ID: "sandbox", What: "sandbox", Command: "cmd/sandboxbench",
		How:    "median wall time of `exec true` through the worker path (lease → validate → bwrap with limits → complete, HTTP) minus bare `bwrap … /bin/true` with the same namespaces",
		Target: "≤ +5 ms median",
		Metrics: []Metric{
			{ID: "sandbox.added", Label: "%s added (median)", Unit: "ms", Cmp: AtMost, Limit: 5},
		},
	},
}

// metric finds a metric and its row by id.
func metric(id string) (Row, Metric, bool) {
	for _, r := range Rows {
		for _, m := range r.Metrics {
			if m.ID == id {
				return r, m, true
			}
		}
	}
	return Row{}, Metric{}, false
}

// formatValue prints v in unit, as the table shows it.
func formatValue(v float64, unit string) string {
	switch unit {
	case "%":
		return fmt.Sprintf("%.1f %%", v)
	case "ms":
		return fmt.Sprintf("%.2f ms", v)
	case "KiB":
		return fmt.Sprintf("%.1f KiB", v)
	case "count":
		return Thousands(int64(math.Round(v)))
	case "events/s":
		return Thousands(int64(math.Round(v))) + " events/s"
	default:
		return fmt.Sprintf("%g %s", v, unit)
	}
}

// Thousands prints n with comma separators (5,000,000).
func Thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3+1)
	if neg {
		out = append(out, '-')
	}
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}
