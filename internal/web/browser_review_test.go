package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// reviewPolicy sends payments and emails to review by two rules and
// allows notes at once.
var reviewPolicy = map[string]any{
	"default": "deny",
	"rules": []map[string]any{
		{"id": "pay", "tool": "payments.send", "effect": "approve", "timeout": "30m"},
		{"id": "mail", "tool": "email.send", "effect": "approve", "timeout": "30m"},
		{"id": "notes", "tool": "notes.add", "effect": "allow"},
	},
}

func count(t *testing.T, c *chrome, sel string) int {
	t.Helper()
	return run(t, c, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
}

// TestBrowserBatchApproval: five pending payments checked in the queue
// become one batch whose page lists every action's arguments before the
// phrase field; a phrase for four is refused at the field with the typed
// text kept; the right phrase approves all five, each on its own; a mixed
// selection is refused on the queue.
func TestBrowserBatchApproval(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("payer", reviewPolicy)
	env.Reviewer("rita")
	c := startChrome(t)
	c.signInAndOpenQueue(t, env, "rita")

	var ids []string
	for i := range 5 {
		a := appears(t, c, agent, client.SubmitRequest{Tool: "payments.send", Args: map[string]any{"to": fmt.Sprintf("acct-%d", i), "amount": 40 + i}})
		ids = append(ids, a.ID)
	}
	mail := appears(t, c, agent, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "x@example.com"}})

	// A mixed selection is refused, on the queue.
	c.do(t,
		chromedp.Click(chromedp.CSS("#pick-"+ids[0])),
		chromedp.Click(chromedp.CSS("#pick-"+mail.ID)),
		chromedp.Click(chromedp.CSS("#batch-create")),
		chromedp.WaitVisible(chromedp.CSS("#page-error")),
	)
	assert.Contains(t, c.text(t, "#page-error"), "email.send")
	c.within(t, 20*time.Second, chromedp.WaitVisible(chromedp.CSS(`#live[data-state="open"]`)))

	for _, id := range ids {
		c.do(t, chromedp.Click(chromedp.CSS("#pick-"+id)))
	}
	c.do(t,
		chromedp.Click(chromedp.CSS("#batch-create")),
		chromedp.WaitVisible(chromedp.CSS("#batch-phrase")),
	)
	phrase := c.text(t, "#batch-phrase")
	require.Regexp(t, `^approve 5 payments\.send [A-Z0-9]{4}$`, phrase)
	for i, id := range ids {
		assert.Contains(t, c.text(t, "#batch-item-"+id+" pre"), fmt.Sprintf(`"acct-%d"`, i), "every action's arguments are listed")
	}
	before := run(t, c, chromedp.Evaluate[bool](`!!(document.querySelector('#batch-actions').compareDocumentPosition(document.querySelector('#batch-confirmation')) & Node.DOCUMENT_POSITION_FOLLOWING)`))
	assert.True(t, before, "the arguments come before the phrase field")
	c.screenshot(t, "batch.png")

	four := strings.Replace(phrase, "approve 5 ", "approve 4 ", 1)
	c.do(t,
		chromedp.SendKeys(chromedp.CSS("#batch-confirmation"), four),
		chromedp.Click(chromedp.CSS("#batch-approve")),
		chromedp.WaitVisible(chromedp.CSS("#batch-confirmation-error")),
	)
	assert.Contains(t, c.text(t, "#batch-confirmation-error"), "does not match")
	assert.Equal(t, four, run(t, c, chromedp.Value(chromedp.CSS("#batch-confirmation"))), "the typed text is kept")
	for _, id := range ids {
		a, err := env.Admin.Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, "pending", a.Status, "a phrase for four approves none of five")
	}

	c.do(t,
		chromedp.Clear(chromedp.CSS("#batch-confirmation")),
		chromedp.SendKeys(chromedp.CSS("#batch-confirmation"), phrase),
		chromedp.Click(chromedp.CSS("#batch-approve")),
		chromedp.WaitVisible(chromedp.CSS("#batch-outcomes")),
	)
	assert.Equal(t, 5, count(t, c, `#batch-outcomes tr[data-outcome="approved"]`))
	assert.Zero(t, count(t, c, "#batch-form"), "a used batch offers no form")
	for _, id := range ids {
		a, err := env.Admin.Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, "approved", a.Status)
		assert.Equal(t, "rita", a.Decision.By)
	}
	page, err := env.Auditor("audra").Audit(ctx, url.Values{"kind": {"action.approved"}, "agent": {"payer"}})
	require.NoError(t, err)
	assert.Len(t, page.Events, 5, "each action audited on its own")
}

// TestBrowserDecidedFiltersAndPages: the Decided view lists what is no
// longer pending, a page of 50 at a time, and filters by outcome, tool,
// reviewer, "mine", agent and time.
func TestBrowserDecidedFiltersAndPages(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("payer", reviewPolicy)
	other := env.Agent("scribe", reviewPolicy)
	rita, bob := env.Reviewer("rita"), env.Reviewer("bob")
	for i := range 52 {
		_, err := agent.Submit(ctx, client.SubmitRequest{Tool: "notes.add", Args: map[string]any{"n": i}})
		require.NoError(t, err)
	}
	decide := func(c *client.Client, tool string, approve bool) string {
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: tool, Args: map[string]any{"to": "acct"}})
		require.NoError(t, err)
		full, err := c.Get(ctx, a.ID)
		require.NoError(t, err)
		if approve {
			_, err = c.Approve(ctx, a.ID, full.ConfirmationPhrase, "")
		} else {
			_, err = c.Deny(ctx, a.ID, "no")
		}
		require.NoError(t, err)
		return a.ID
	}
	for range 3 {
		decide(rita, "email.send", true)
	}
	denied := []string{decide(bob, "payments.send", false), decide(bob, "payments.send", false)}
	_, err := other.Submit(ctx, client.SubmitRequest{Tool: "notes.add", Args: map[string]any{"n": 0}})
	require.NoError(t, err)
	pending, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"to": "later"}})
	require.NoError(t, err)

	c := startChrome(t)
	c.signIn(t, env, "/ui/decided", "rita", "rita-password-123", "#decided-table")
	assert.Equal(t, 50, count(t, c, "#decided-table tbody tr"), "one page")
	assert.Zero(t, count(t, c, "#decided-"+pending.ID), "pending actions are not decided")
	c.screenshot(t, "decided.png")
	c.do(t, chromedp.Click(chromedp.CSS("#decided-older")), chromedp.WaitVisible(chromedp.CSS("#decided-newest")))
	assert.Equal(t, 52+3+2+1-50, count(t, c, "#decided-table tbody tr"), "the rest on the next page")
	assert.Zero(t, count(t, c, "#decided-older"), "the last page")
	c.do(t, chromedp.Click(chromedp.CSS("#decided-newest")), chromedp.WaitVisible(chromedp.CSS("#decided-older")))
	assert.Equal(t, 50, count(t, c, "#decided-table tbody tr"))

	for _, tc := range []struct {
		name  string
		query string
		rows  int
		has   string
	}{
		{"denied", "?outcome=denied", 2, denied[0]},
		{"tool and reviewer", "?tool=email.send&reviewer=rita", 3, ""},
		{"mine", "?mine=1", 3, ""},
		{"another reviewer", "?reviewer=bob", 2, denied[1]},
		{"agent", "?agent=scribe", 1, ""},
		{"time", "?since=" + url.QueryEscape(time.Now().UTC().Add(time.Hour).Format("2006-01-02T15:04:05")), 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.do(t, chromedp.Navigate(env.URL+"/ui/decided"+tc.query), chromedp.WaitVisible(chromedp.CSS("#decided-filters")))
			assert.Equal(t, tc.rows, count(t, c, "#decided-table tbody tr"))
			if tc.rows == 0 {
				assert.Equal(t, 1, count(t, c, "#decided-empty"))
			}
			if tc.has != "" {
				assert.Equal(t, 1, count(t, c, "#decided-"+tc.has))
			}
		})
	}

	// The form drives the same filters. The submit is a navigation: the
	// old page's elements stay visible until the new page is in, so wait
	// for the navigation's response and load (waiting for a form field
	// alone counted the old page's 50 rows when the machine was busy).
	c.do(t,
		chromedp.Navigate(env.URL+"/ui/decided"),
		chromedp.WaitVisible(chromedp.CSS("#decided-filters")),
		chromedp.SetValue(chromedp.CSS("#decided-outcome"), "denied"),
	)
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS("#decided-search")))
	require.NoError(t, err, "submitting the filters")
	require.EqualValues(t, http.StatusOK, resp.Status)
	c.do(t, chromedp.WaitVisible(chromedp.CSS(`#decided-outcome`)))
	assert.Equal(t, 2, count(t, c, "#decided-table tbody tr"))
	assert.Contains(t, run(t, c, chromedp.Evaluate[string](`location.search`)), "outcome=denied")
}

// TestBrowserInsightsSuggestionAppliedInEditor: five identical approvals
// show on the insights page (counts, SVG charts) as a suggested rule; the
// suggestion opens the policy editor prefilled, saving it applies it, and
// the next identical call is allowed without review.
func TestBrowserInsightsSuggestionAppliedInEditor(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("payer", reviewPolicy)
	rita := env.Reviewer("rita")
	args := map[string]any{"to": "acct-rent", "amount": 12}
	for range 5 {
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "payments.send", Args: args})
		require.NoError(t, err)
		require.Equal(t, "pending", a.Status)
		full, err := rita.Get(ctx, a.ID)
		require.NoError(t, err)
		_, err = rita.Approve(ctx, a.ID, full.ConfirmationPhrase, "")
		require.NoError(t, err)
	}

	c := startChrome(t)
	c.signIn(t, env, "/ui/insights", "admin", apptest.AdminPassword, "#insights-table")
	assert.Equal(t, "5", c.text(t, `#insights-table tr[data-key="rita"] td.approvals`))
	assert.Equal(t, "100%", c.text(t, `#insights-table tr[data-key="rita"] td.rate`))
	assert.Equal(t, "5", c.text(t, `#insights-table tr[data-key="rita"] td.run`))
	assert.Positive(t, count(t, c, "#chart-rate svg rect"), "a server-rendered SVG chart")
	assert.Positive(t, count(t, c, "#chart-decide svg rect"))
	assert.Equal(t, 1, count(t, c, "#suggestions article.suggestion"))
	c.screenshot(t, "insights.png")

	c.do(t,
		chromedp.Click(chromedp.CSS("#suggestions a.suggestion-open")),
		chromedp.WaitVisible(chromedp.CSS("#policy-document")),
	)
	doc := run(t, c, chromedp.Value(chromedp.CSS("#policy-document")))
	assert.Contains(t, doc, "always-", "the editor is prefilled with the suggested rule")
	assert.Contains(t, doc, "acct-rent")
	c.do(t,
		chromedp.Click(chromedp.CSS("#save-policy")),
		chromedp.WaitNotPresent(chromedp.CSS("#policy-document")),
	)

	next, err := agent.Submit(ctx, client.SubmitRequest{Tool: "payments.send", Args: args})
	require.NoError(t, err)
	assert.Equal(t, "approved", next.Status, "the next identical call is allowed")
	assert.Equal(t, "allow", next.Decision.Effect)
	other, err := agent.Submit(ctx, client.SubmitRequest{Tool: "payments.send", Args: map[string]any{"to": "acct-rent", "amount": 13}})
	require.NoError(t, err)
	assert.Equal(t, "pending", other.Status, "only the identical call: never the whole tool")

	var sugs struct {
		Suggestions []any `json:"suggestions"`
	}
	_, err = env.Admin.Do(ctx, "GET", "/api/v1/insights/suggestions", nil, &sugs)
	require.NoError(t, err)
	assert.Empty(t, sugs.Suggestions, "an applied suggestion is not suggested again")
}

// TestBrowserAuditNewestFirstPages: the audit list shows the newest
// events first and pages older, newer and back to the latest; the export
// button downloads the events the filters select.
func TestBrowserAuditNewestFirstPages(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("scribe", reviewPolicy)
	for i := range 230 {
		_, err := agent.Submit(ctx, client.SubmitRequest{Tool: "notes.add", Args: map[string]any{"n": i}})
		require.NoError(t, err)
	}
	env.Auditor("audra")

	c := startChrome(t)
	ids := func() []string {
		return run(t, c, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#audit-events tbody tr td:first-child')).map(td => td.textContent.trim())`))
	}
	c.signIn(t, env, "/ui/audit?agent=scribe", "audra", "audra-password-123", "#audit-events")
	latest := ids()
	require.Len(t, latest, 100)
	assert.Greater(t, atoi(t, latest[0]), atoi(t, latest[99]), "newest first")
	assert.Zero(t, count(t, c, "#audit-latest"), "the latest page links to no newer one")
	assert.Zero(t, count(t, c, "#audit-newer"))

	c.do(t, chromedp.Click(chromedp.CSS("#audit-older")), chromedp.WaitVisible(chromedp.CSS("#audit-latest")))
	second := ids()
	require.Len(t, second, 100)
	assert.Greater(t, atoi(t, latest[99]), atoi(t, second[0]), "older events on the next page")
	c.do(t, chromedp.Click(chromedp.CSS("#audit-older")), chromedp.WaitVisible(chromedp.CSS("#audit-newer")))
	third := ids()
	assert.GreaterOrEqual(t, len(third), 31, "the rest: 230 submits and the agent's creation, policy and token")
	assert.Zero(t, count(t, c, "#audit-older"), "the oldest page")

	c.do(t, chromedp.Click(chromedp.CSS("#audit-newer")), chromedp.WaitVisible(chromedp.CSS("#audit-events")))
	assert.Equal(t, second, ids(), "previous goes back to the newer page")
	c.do(t, chromedp.Click(chromedp.CSS("#audit-latest")), chromedp.WaitVisible(chromedp.CSS("#audit-events")))
	assert.Equal(t, latest, ids())

	href := run(t, c, chromedp.Evaluate[string](`document.querySelector('#audit-export').getAttribute('href')`))
	assert.Equal(t, "/api/v1/audit/export?agent=scribe", href)
	lines := run(t, c, chromedp.Evaluate[int](`fetch(document.querySelector('#audit-export').href).then(r => r.text()).then(t => t.trim().split('\n').length)`,
		chromedp.EvalAwaitPromise))
	assert.Equal(t, 200+len(third), lines, "the export holds every event the filters select")
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	_, err := fmt.Sscanf(s, "%d", &n)
	require.NoError(t, err)
	return n
}
