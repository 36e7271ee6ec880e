package templates

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a-h/templ"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/udiff"
)

// summaryLen bounds the one-line args summary, in characters. The queue's
// script (static/js/queue.js) builds the same summary for live rows.
const summaryLen = 120

// ArgsSummary formats args on one line: key=value pairs by key, strings
// quoted, other values as compact JSON, cut at summaryLen characters.
func ArgsSummary(args map[string]any) string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as JSON.stringify; templ escapes the text
	for _, k := range keys {
		buf.Reset()
		v := "?"
		if enc.Encode(args[k]) == nil {
			v = strings.TrimSuffix(buf.String(), "\n")
		}
		parts = append(parts, k+"="+v)
	}
	s := strings.Join(parts, " ")
	if utf8.RuneCountInString(s) > summaryLen {
		r := []rune(s)
		s = string(r[:summaryLen-1]) + "…"
	}
	return s
}

// ArgsLines names the folded arguments by their size: "3 lines".
func ArgsLines(pretty string) string {
	n := strings.Count(pretty, "\n") + 1
	if pretty == "" {
		n = 0
	}
	if n == 1 {
		return "1 line"
	}
	return strconv.Itoa(n) + " lines"
}

// TimeLeft formats how long a pending action has before it expires.
func TimeLeft(a hitl.Action, now time.Time) string {
	if a.ExpiresAt == nil {
		return "—"
	}
	return FormatLeft(a.ExpiresAt.Sub(now))
}

// FormatLeft formats a remaining duration: "14m 05s", "2h 10m", "expiring".
func FormatLeft(d time.Duration) string {
	if d <= 0 {
		return "expiring"
	}
	s := int(d.Seconds())
	switch {
	case s >= 3600:
		return fmt.Sprintf("%dh %02dm", s/3600, s%3600/60)
	case s >= 60:
		return fmt.Sprintf("%dm %02ds", s/60, s%60)
	}
	return fmt.Sprintf("%ds", s)
}

// ExpiresAttr is an action's expiry as RFC 3339 for the page's scripts.
func ExpiresAttr(a hitl.Action) string {
	if a.ExpiresAt == nil {
		return ""
	}
	return a.ExpiresAt.UTC().Format(time.RFC3339Nano)
}

// When formats a time for people: UTC, to the second.
func When(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// WhenPtr is When for an optional time.
func WhenPtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return When(*t)
}

// Stamp is a time as RFC 3339 for <time datetime>.
func Stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// RiskClass is the CSS class of a risk badge.
func RiskClass(level string) string {
	switch level {
	case "low", "medium", "high", "critical":
		return "badge risk-" + level
	}
	return "badge"
}

// StatusClass is the CSS class of a status badge.
func StatusClass(s hitl.Status) string {
	switch s {
	case hitl.StatusPending:
		return "badge status-pending"
	case hitl.StatusApproved, hitl.StatusSucceeded, hitl.StatusRunning:
		return "badge status-ok"
	case hitl.StatusDenied, hitl.StatusFailed:
		return "badge status-bad"
	}
	return "badge status-gone"
}

// ActionURL links to an action's page.
func ActionURL(id string) string { return "/ui/actions/" + url.PathEscape(id) }

// UserURL is the console path of a user's controls.
func UserURL(username string) string { return "/ui/users/" + url.PathEscape(username) }

// hasRole reports whether roles holds the role named r.
func hasRole[T ~string](roles []T, r string) bool {
	for _, have := range roles {
		if string(have) == r {
			return true
		}
	}
	return false
}

// AgentURL links to an agent's page.
func AgentURL(id string) string { return "/ui/agents/" + url.PathEscape(id) }

// TimelineURL links to the audit timeline of a correlation ID.
func TimelineURL(correlationID string) string {
	return "/ui/audit/correlation/" + url.PathEscape(correlationID)
}

// AuditSearchURL links to an audit search on one field.
func AuditSearchURL(field, value string) string {
	return "/ui/audit?" + url.Values{field: {value}}.Encode()
}

// VersionURL links to one version of a policy page.
func VersionURL(base string, v int) string { return base + "?v=" + strconv.Itoa(v) }

// DiffURL links to the diff between two versions of a policy page.
func DiffURL(base string, from, to int) string {
	return base + "?" + url.Values{"from": {strconv.Itoa(from)}, "to": {strconv.Itoa(to)}}.Encode()
}

// Itoa formats an int.
func Itoa(n int) string { return strconv.Itoa(n) }

// Join joins strings with ", ".
func Join[T ~string](items []T) string {
	s := make([]string, len(items))
	for i, v := range items {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// Pretty formats a JSON-able value indented, for <pre>.
func Pretty(v any) string {
	if v == nil {
		return ""
	}
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false) // templ escapes the text; keep "<" readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimRight(sb.String(), "\n")
}

// PrettyRaw formats raw JSON indented ("" for none).
func PrettyRaw(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // show numbers as stored, not rounded to float64
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	return Pretty(v)
}

// DecisionBy says who decided: "policy" or the reviewer.
func DecisionBy(a hitl.Action) string {
	if a.Status == hitl.StatusPending {
		return "waiting for a reviewer"
	}
	return a.Decision.By
}

// DiffClass is the CSS class of a diff line.
func DiffClass(op byte) string {
	switch op {
	case '+':
		return "diff-add"
	case '-':
		return "diff-del"
	}
	return "diff-same"
}

// OrDash shows "—" for an empty string.
func OrDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// navAttrs marks the navigation link of the active section: aria-current
// for assistive technology, the class for the look.
func navAttrs(active, item string) templ.Attributes {
	if active == item {
		return templ.Attributes{"aria-current": "page", "class": "active"}
	}
	return templ.Attributes{}
}

// PageTitle is the document's title: the page's, with the count of pending
// actions first when the page knows it ("(3) Queue · Airlock"), so that a
// background tab shows what waits.
func PageTitle(p Page) string {
	t := p.Title + " · Airlock"
	switch {
	case p.PendingMore:
		return "(" + strconv.Itoa(p.Pending) + "+) " + t
	case p.Pending > 0:
		return "(" + strconv.Itoa(p.Pending) + ") " + t
	}
	return t
}

// roleLine lists the viewer's roles.
func roleLine(p Page) string {
	var roles []string
	if p.IsAdmin {
		roles = append(roles, "admin")
	}
	if p.IsReviewer {
		roles = append(roles, "reviewer")
	}
	if p.IsAuditor {
		roles = append(roles, "auditor")
	}
	return strings.Join(roles, " · ")
}

// scopeClass marks scopes the action does not allow.
func scopeClass(allowed bool) string {
	if allowed {
		return "scope"
	}
	return "scope not-allowed"
}

// KindClass is the CSS class of an audit event kind's badge.
func KindClass(k audit.Kind) string {
	switch k {
	case audit.KindActionApproved, audit.KindActionApproval, audit.KindGrantCreated:
		return "badge kind-ok"
	case audit.KindActionDenied, audit.KindLoginFailed, audit.KindTokenRevoked:
		return "badge kind-bad"
	case audit.KindActionExpired, audit.KindActionCancelled:
		return "badge kind-gone"
	}
	return "badge kind"
}

// Short shortens a long ID for tables.
func Short(id string) string {
	if len(id) > 13 {
		return id[:8] + "…" + id[len(id)-4:]
	}
	return id
}

// EventSummary says in one line what an event decided or changed.
func EventSummary(e audit.Event) string {
	var parts []string
	if len(e.Decision) > 0 {
		var d hitl.Decision
		if json.Unmarshal(e.Decision, &d) == nil && d.Effect != "" && e.Kind == audit.KindActionSubmitted {
			s := "policy: " + d.Effect
			if d.RuleID != "" {
				s += " by rule " + d.RuleID
			}
			if d.Source != "" {
				s += fmt.Sprintf(" (%s v%d)", d.Source, d.PolicyVersion)
			}
			if d.Reason != "" {
				s += " — " + d.Reason
			}
			parts = append(parts, s)
		}
	}
	for _, k := range []string{"status", "scope", "reason", "comment", "outcome", "approvals"} {
		if v, ok := e.Data[k]; ok && v != nil && v != "" {
			parts = append(parts, fmt.Sprintf("%s: %v", k, v))
		}
	}
	return strings.Join(parts, " · ")
}

// ShellLine shows an argv as one command line, each element quoted where
// a shell reader needs it.
func ShellLine(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = ShellQuote(a)
	}
	return strings.Join(quoted, " ")
}

// ShellQuote quotes one argv element the way a shell reader expects, so a
// reviewer sees exactly where each argument starts and ends.
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./=:,+@%", c)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// UnifiedDiff classifies the lines of a unified diff for colouring: '+'
// added, '-' removed, ' ' anything else (context, headers, hunks). Lines
// are read as git apply reads them (udiff): inside a hunk a line's first
// byte says what it is, so an added line whose text starts with "++" is
// added, not a "+++" file header.
func UnifiedDiff(diff string) []DiffLine {
	lines := udiff.Parse(diff)
	out := make([]DiffLine, 0, len(lines))
	for _, l := range lines {
		op := byte(' ')
		switch l.Kind {
		case udiff.Added:
			op = '+'
		case udiff.Removed:
			op = '-'
		}
		out = append(out, DiffLine{Op: op, Text: l.Text})
	}
	return out
}
