package benchtable

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Verdict is a row's outcome.
type Verdict string

const (
	// Pass: every figure present, at the stated scale, on target.
	Pass Verdict = "PASS"
	// Fail: a figure missed its target.
	Fail Verdict = "FAIL"
	// Missing: a figure was not measured (and none failed).
	Missing Verdict = "MISSING"
	// NotAtScale: every figure on target, but one was measured at a smaller
	// scale than the target is stated at.
	NotAtScale Verdict = "NOT AT SCALE"
)

// Judged is one row of a report.
type Judged struct {
	Row
	// Verdict is the row's outcome.
	Verdict Verdict
	// Measured describes the figures, as the table's measured column.
	Measured string
	// Results are the row's figures found, in the row's metric order.
	Results []Result
}

// Report is the table judged from a results file.
type Report struct {
	// Rows are every row of the table, in order.
	Rows []Judged
	// From and To span the figures' measurement times.
	From, To time.Time
	// Unknown are figures of metrics the table does not have.
	Unknown []Result
}

// Judge builds the report: each row's figures (the last one of a metric
// wins, so a file appended to by a rerun holds the rerun's figure) and its
// verdict.
func Judge(results []Result) Report {
	last := map[string]Result{}
	var rep Report
	for _, r := range results {
		if _, _, ok := metric(r.Metric); !ok {
			rep.Unknown = append(rep.Unknown, r)
			continue
		}
		last[r.Metric] = r
		if rep.From.IsZero() || r.At.Before(rep.From) {
			rep.From = r.At
		}
		if r.At.After(rep.To) {
			rep.To = r.At
		}
	}
	for _, row := range Rows {
		j := Judged{Row: row}
		var parts []string
		failed, missing, small := false, false, false
		for _, m := range row.Metrics {
			r, ok := last[m.ID]
			if !ok {
				missing = true
				parts = append(parts, strings.Replace(m.Label, "%s", "not measured", 1))
				continue
			}
			j.Results = append(j.Results, r)
			failed = failed || !r.Pass
			small = small || !r.AtScale
			parts = append(parts, describe(m, r))
		}
		switch {
		case failed:
			j.Verdict = Fail
		case missing:
			j.Verdict = Missing
		case small:
			j.Verdict = NotAtScale
		default:
			j.Verdict = Pass
		}
		j.Measured = strings.Join(parts, "; ")
		rep.Rows = append(rep.Rows, j)
	}
	return rep
}

// describe is one figure as the measured column shows it.
func describe(m Metric, r Result) string {
	s := strings.Replace(m.Label, "%s", formatValue(r.Value, m.Unit), 1)
	var notes []string
	if r.Detail != "" {
		notes = append(notes, r.Detail)
	}
	if m.MinScale > 0 && !r.AtScale {
		notes = append(notes, fmt.Sprintf("at %s %s, not %s", Thousands(r.Scale), m.ScaleUnit, Thousands(m.MinScale)))
	}
	if !r.Pass {
		notes = append(notes, "target "+m.Target())
	}
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, ", ") + ")"
	}
	return s
}

// OK reports whether the report passes: no row failed or missing, and, when
// strict, every row at its stated scale.
func (rep Report) OK(strict bool) bool {
	for _, j := range rep.Rows {
		switch j.Verdict {
		case Fail, Missing:
			return false
		case NotAtScale:
			if strict {
				return false
			}
		}
	}
	return true
}

// Count returns how many rows have verdict v.
func (rep Report) Count(v Verdict) int {
	n := 0
	for _, j := range rep.Rows {
		if j.Verdict == v {
			n++
		}
	}
	return n
}

// Print writes the report as a Markdown table (what, how measured, target,
// measured, verdict) with a summary line.
func (rep Report) Print(w io.Writer) error {
	var b strings.Builder
	if !rep.From.IsZero() {
		fmt.Fprintf(&b, "Airlock performance table — measured %s to %s\n\n",
			rep.From.Format("2006-01-02 15:04"), rep.To.Format("15:04 MST"))
	}
	b.WriteString("| what | how it is measured | target | measured | |\n|---|---|---|---|---|\n")
	for _, j := range rep.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | **%s** |\n", cell(j.What), cell(j.How), cell(j.Target), cell(j.Measured), j.Verdict)
	}
	fmt.Fprintf(&b, "\n%d rows: %d PASS, %d FAIL, %d MISSING, %d NOT AT SCALE\n",
		len(rep.Rows), rep.Count(Pass), rep.Count(Fail), rep.Count(Missing), rep.Count(NotAtScale))
	for _, r := range rep.Unknown {
		fmt.Fprintf(&b, "ignored: a figure of unknown metric %q\n", r.Metric)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cell escapes a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
