package templates

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/insights"
)

// BatchURL is a batch's page.
func BatchURL(id string) string { return "/ui/batches/" + url.PathEscape(id) }

// BatchView is a batch's page: every action with its arguments, then the
// phrase field; after the approval, what happened to each.
type BatchView struct {
	Batch   hitl.Batch
	Actions []BatchItem
	// RuleLine says which rule sent them all to review.
	RuleLine string
	// Outcomes are set once the batch was approved.
	Outcomes []hitl.BatchOutcome
	// Typed is the confirmation as typed (kept after a refusal), with
	// the refusal's reason at the field.
	Typed      string
	FieldError string
	Comment    string
}

// BatchItem is one action of a batch.
type BatchItem struct {
	Action hitl.Action
	// Args is the pretty-printed, already redacted arguments.
	Args string
}

// OutcomeClass is the badge class of a batch outcome.
func OutcomeClass(o string) string {
	switch o {
	case hitl.BatchApproved:
		return "badge status-ok"
	case hitl.BatchApprovalRecorded:
		return "badge status-pending"
	}
	return "badge status-bad"
}

// Outcomes of the Decided view's filter.
var Outcomes = []string{"approved", "denied", "expired", "cancelled"}

// DecidedView is the history of decided actions.
type DecidedView struct {
	Actions []hitl.Action
	Agents  []string
	// The filters as given.
	Agent, Tool, Outcome, Reviewer, Since, Until string
	Mine                                         bool
	// Next is the cursor of the next (older) page, "" on the last one;
	// Older is set on a page after the first.
	Next  string
	Older bool
}

// DecidedPageURL is the Decided view at cursor with the filters kept.
func DecidedPageURL(v DecidedView, cursor string) string {
	q := url.Values{}
	for k, val := range map[string]string{"agent": v.Agent, "tool": v.Tool, "outcome": v.Outcome, "reviewer": v.Reviewer,
		"since": v.Since, "until": v.Until, "cursor": cursor} {
		if val != "" {
			q.Set(k, val)
		}
	}
	if v.Mine {
		q.Set("mine", "1")
	}
	if len(q) == 0 {
		return "/ui/decided"
	}
	return "/ui/decided?" + q.Encode()
}

// AuditPager is the newest-first audit list's paging: links to the
// latest page, the newer (previous) and the older (next) one, and the
// export of everything the filters select.
type AuditPager struct {
	LatestURL, NewerURL, OlderURL string
	ExportURL                     string
}

// InsightsView is the insights page.
type InsightsView struct {
	By   string
	Days int
	Rep  insights.Report
	// Rate and Decide are the charts of the rows.
	Rate, Decide BarChart
	Suggestions  []insights.Suggestion
	// CanEdit is set for admins: a suggestion opens the policy editor.
	CanEdit bool
}

// InsightsDays are the windows the insights page offers.
var InsightsDays = []int{1, 7, 30, 90}

// InsightsURL is the insights page grouped by by over days.
func InsightsURL(by string, days int) string {
	return "/ui/insights?" + url.Values{"by": {by}, "days": {strconv.Itoa(days)}}.Encode()
}

// SuggestionURL opens the agent's policy editor with the suggestion
// applied.
func SuggestionURL(s insights.Suggestion) string {
	return AgentURL(s.Agent) + "/policy/edit?" + url.Values{"suggestion": {s.Evidence.ActionID}}.Encode()
}

// BarChart is a horizontal bar chart rendered as SVG on the server.
type BarChart struct {
	Title         string
	Width, Height int
	// LabelW is the width of the label column; bars start after it.
	LabelW int
	Bars   []Bar
	// Legend names the series, in order of Bar.Series.
	Legend []string
}

// Bar is one bar.
type Bar struct {
	Label  string
	Series int
	X, Y   int
	W, H   int
	Value  string
}

const (
	chartWidth  = 640
	chartLabelW = 150
	chartBarH   = 14
	chartGap    = 8
	chartValueW = 80
)

// RateChart charts the approval rate of each row.
func RateChart(rows []insights.Row) BarChart {
	c := BarChart{Title: "Approval rate", Width: chartWidth, LabelW: chartLabelW, Legend: []string{"approval rate"}}
	span := chartWidth - chartLabelW - chartValueW
	for i, r := range rows {
		y := chartGap + i*(chartBarH+chartGap)
		c.Bars = append(c.Bars, Bar{Label: r.Key, X: chartLabelW, Y: y, W: int(r.ApprovalRate * float64(span)), H: chartBarH,
			Value: fmt.Sprintf("%.0f%%", r.ApprovalRate*100)})
	}
	c.Height = chartGap + len(rows)*(chartBarH+chartGap)
	return c
}

// DecideChart charts the median and 90th percentile time to decide of
// each row, on one scale.
func DecideChart(rows []insights.Row) BarChart {
	c := BarChart{Title: "Time to decide", Width: chartWidth, LabelW: chartLabelW, Legend: []string{"median", "p90"}}
	var top int64 = 1
	for _, r := range rows {
		top = max(top, r.P90DecideMs, r.MedianDecideMs)
	}
	span := chartWidth - chartLabelW - chartValueW
	h := chartBarH / 2
	for i, r := range rows {
		y := chartGap + i*(chartBarH+chartGap)
		for s, ms := range []int64{r.MedianDecideMs, r.P90DecideMs} {
			label := ""
			if s == 0 {
				label = r.Key
			}
			c.Bars = append(c.Bars, Bar{Label: label, Series: s, X: chartLabelW, Y: y + s*h, W: int(ms * int64(span) / top), H: h,
				Value: FormatMs(ms)})
		}
	}
	c.Height = chartGap + len(rows)*(chartBarH+chartGap)
	return c
}

// FormatMs formats milliseconds as a short duration.
func FormatMs(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return strconv.FormatInt(ms, 10) + " ms"
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%.1f min", d.Minutes())
	}
	return fmt.Sprintf("%.1f h", d.Hours())
}

// Percent formats a rate as a percentage.
func Percent(r float64) string { return fmt.Sprintf("%.0f%%", r*100) }

// BarClass is the CSS class of a bar's series.
func BarClass(series int) string { return "bar bar-" + strconv.Itoa(series) }

// SVGInt formats an SVG coordinate.
func SVGInt(n int) string { return strconv.Itoa(n) }
