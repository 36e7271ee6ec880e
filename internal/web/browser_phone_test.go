package web_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// The phone every console page must work on: an iPhone 12–15 in portrait.
const (
	phoneWidth  = 390
	phoneHeight = 844
)

// phoneFixture is what the pages of the phone test show: a pending action
// with long arguments, a decided one, an agent with a token and policy
// versions, audit events.
type phoneFixture struct {
	pending *client.Action
	decided *client.Action
	batch   string // a batch of the three big payments, made by pat
}

// phonePage is one console page the phone test opens. New pages are one
// line here.
type phonePage struct {
	name string
	// path is the page's path for the fixture.
	path func(f *phoneFixture) string
	// want is an element the page shows once loaded.
	want string
	// signedOut opens the page without a session.
	signedOut bool
	// dark also saves a dark-mode screenshot.
	dark bool
}

func fixed(p string) func(*phoneFixture) string { return func(*phoneFixture) string { return p } }

// phonePages is every page of the console. Pages other branches add
// (groups, notify targets, batches, insights, sign-in) are one line each.
var phonePages = []phonePage{
	{name: "login", path: fixed("/ui/login"), want: "#login-submit", signedOut: true},
	{name: "queue", path: fixed("/ui/queue"), want: `#live[data-state="open"]`, dark: true},
	{name: "action-pending", path: func(f *phoneFixture) string { return "/ui/actions/" + f.pending.ID }, want: "#approve", dark: true},
	{name: "action-decided", path: func(f *phoneFixture) string { return "/ui/actions/" + f.decided.ID }, want: "#decision"},
	{name: "agents", path: fixed("/ui/agents"), want: "#agents"},
	{name: "agent", path: fixed("/ui/agents/billing-bot"), want: "#issue-form"},
	{name: "agent-policy", path: fixed("/ui/agents/billing-bot/policy?from=1&to=2"), want: "#policy-diff"},
	{name: "agent-policy-edit", path: fixed("/ui/agents/billing-bot/policy/edit"), want: "#policy-document"},
	{name: "fleet", path: fixed("/ui/fleet"), want: "#hard-paths"},
	{name: "fleet-edit", path: fixed("/ui/fleet/edit"), want: "#policy-document"},
	{name: "users", path: fixed("/ui/users"), want: "#user-form"},
	{name: "account", path: fixed("/ui/account"), want: "#password-form"},
	{name: "mcp", path: fixed("/ui/mcp"), want: "#mcp-form"},
	{name: "groups", path: fixed("/ui/groups"), want: "#group-form"},
	{name: "decided", path: fixed("/ui/decided"), want: "#decided-filters"},
	{name: "batch", path: func(f *phoneFixture) string { return "/ui/batches/" + f.batch }, want: "#batch-form"},
	{name: "insights", path: fixed("/ui/insights"), want: "#insights-nav"},
	{name: "notify", path: fixed("/ui/notify"), want: "#notify-form"},
	{name: "audit", path: fixed("/ui/audit?agent=billing-bot"), want: "#audit-events"},
	{name: "audit-timeline", path: func(f *phoneFixture) string { return "/ui/audit/correlation/" + f.pending.CorrelationID }, want: "main ol"},
	{name: "audit-verify", path: fixed("/ui/audit/verify"), want: "main h1"},
	{name: "not-found", path: fixed("/ui/actions/no-such-action"), want: "#error-message"},
}

// phoneAudit is what the page audit (auditScript) reports.
type phoneAudit struct {
	ScrollWidth  int      `json:"scrollWidth"`
	Unlabelled   []string `json:"unlabelled"`
	NoHeading    []string `json:"noHeading"`
	LowContrast  []string `json:"lowContrast"`
	SkipFirst    bool     `json:"skipFirst"`
	HasMain      bool     `json:"hasMain"`
	Current      int      `json:"current"`
	HasNav       bool     `json:"hasNav"`
	CheckedTexts int      `json:"checkedTexts"`
}

// auditScript measures a page as it is rendered: its width, every form
// field's label, every card's heading, the skip link, aria-current, and the
// contrast of every visible text against the background it is painted on
// (the backgrounds of its ancestors composited, alpha included), as WCAG
// 2 defines it; disabled controls are exempt, as WCAG allows.
const auditScript = `(() => {
  const parse = (c) => {
    const m = /rgba?\(([^)]+)\)/.exec(c || '');
    if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
  };
  const over = (top, bottom) => {
    const a = top.a + bottom.a * (1 - top.a);
    if (a === 0) return {r: 0, g: 0, b: 0, a: 0};
    const mix = (t, b) => (t * top.a + b * bottom.a * (1 - top.a)) / a;
    return {r: mix(top.r, bottom.r), g: mix(top.g, bottom.g), b: mix(top.b, bottom.b), a};
  };
  const background = (el) => {
    const chain = [];
    for (let e = el; e; e = e.parentElement) chain.unshift(e);
    let bg = {r: 255, g: 255, b: 255, a: 1};
    for (const e of chain) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0) bg = over(c, bg);
    }
    return bg;
  };
  const lum = (c) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
  };
  const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  const visible = (el) => {
    if (el.getClientRects().length === 0) return false;
    if (el.closest('.visually-hidden, [hidden], dialog:not([open])')) return false;
    const s = getComputedStyle(el);
    if (s.visibility !== 'visible') return false;
    const r = el.getBoundingClientRect();
    return r.bottom + window.scrollY > 0 && r.right > 0;
  };
  const describe = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '');
  const out = {scrollWidth: document.documentElement.scrollWidth, unlabelled: [], noHeading: [], lowContrast: [], checkedTexts: 0};

  for (const el of document.querySelectorAll('input, select, textarea')) {
    if (el.type === 'hidden' || el.type === 'submit' || el.type === 'button') continue;
    const named = (el.labels && el.labels.length > 0) || el.getAttribute('aria-label') || el.getAttribute('aria-labelledby');
    if (!named) out.unlabelled.push(el.outerHTML.slice(0, 160));
  }
  for (const a of document.querySelectorAll('main article')) {
    if (!a.querySelector('h1, h2, h3, h4, h5, h6, [role=heading]')) out.noHeading.push(a.outerHTML.slice(0, 160));
  }
  const focusable = document.querySelector('a[href], button, input:not([type=hidden]), select, textarea, [tabindex]:not([tabindex="-1"])');
  out.skipFirst = !!focusable && focusable.classList.contains('skip-link') && focusable.getAttribute('href') === '#main';
  out.hasMain = !!document.getElementById('main');
  out.hasNav = !!document.querySelector('nav[aria-label=Main]');
  out.current = document.querySelectorAll('nav[aria-label=Main] [aria-current=page]').length;

  const seen = new Set();
  for (const el of document.body.querySelectorAll('*')) {
    if (!visible(el) || el.closest(':disabled, [aria-disabled=true]')) continue;
    const field = /^(INPUT|SELECT|TEXTAREA)$/.test(el.tagName) && el.type !== 'hidden' && el.type !== 'checkbox' && el.type !== 'radio';
    let text = field;
    if (!field) {
      for (const n of el.childNodes) {
        if (n.nodeType === 3 && n.textContent.trim() !== '') { text = true; break; }
      }
    }
    if (!text) continue;
    out.checkedTexts++;
    const bg = background(el);
    const fg = over(parse(getComputedStyle(el).color) || {r: 0, g: 0, b: 0, a: 1}, bg);
    const r = ratio(fg, bg);
    if (r < 4.5) {
      const key = describe(el) + ' ' + getComputedStyle(el).color + ' on ' + JSON.stringify(bg);
      if (!seen.has(key)) {
        seen.add(key);
        out.lowContrast.push(key + ' = ' + r.toFixed(2) + ' "' + (el.textContent || el.value || '').trim().slice(0, 40) + '"');
      }
    }
  }
  return out;
})()`

// colorScheme emulates the system's light or dark setting.
func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return err
	})
}

// phoneViewport makes the browser a phone.
func phoneViewport() chromedp.Action[chromedp.Void] {
	return chromedp.EmulateViewport(phoneWidth, phoneHeight, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait)
}

// poll waits until the JavaScript expression is true, failing after d.
func (c *chrome) poll(t *testing.T, d time.Duration, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, d)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr))
	require.NoError(t, err, "waiting for %s", expr)
}

// viewportShot saves what the screen shows (not the whole page: small PNGs).
func (c *chrome) viewportShot(t *testing.T, name string) {
	t.Helper()
	png := run(t, c, chromedp.CaptureScreenshot())
	require.NoError(t, os.WriteFile(filepath.Join(screenshotDir(t), name), png, 0o644))
}

// phoneSetup starts a server with the fixture every page shows and a user
// with every role.
func phoneSetup(t *testing.T) (*apptest.Env, *phoneFixture) {
	t.Helper()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("billing-bot", map[string]any{"rules": []map[string]any{
		{"id": "mail-needs-review", "tool": "email.send", "effect": "approve", "timeout": "15m"},
		{"id": "big-spend", "tool": "payments.send", "effect": "approve", "when": "args.amount > 100", "timeout": "30m"},
	}})
	_, err := env.Admin.PutAgentPolicy(ctx, "billing-bot", map[string]any{"rules": []map[string]any{
		{"id": "mail-needs-review", "tool": "email.send", "effect": "approve", "timeout": "20m"},
		{"id": "big-spend", "tool": "payments.send", "effect": "approve", "when": "args.amount > 250", "timeout": "30m"},
	}})
	require.NoError(t, err)
	_, err = env.Admin.IssueAgentToken(ctx, "billing-bot", 0)
	require.NoError(t, err)
	pat := env.User("pat", "admin", "reviewer", "auditor")

	var body strings.Builder
	for i := 1; i <= 120; i++ {
		fmt.Fprintf(&body, "Line %d of the quarterly report: revenue, costs and the outlook for next quarter.\n", i)
	}
	f := &phoneFixture{}
	f.pending, err = agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Reason: "The CFO asked for the full report.",
		Args: map[string]any{
			"to": "cfo@example.com", "subject": "Q3 numbers, the long version", "body": body.String(),
			"attachment_sha256": strings.Repeat("0123456789abcdef", 24), // one unbroken 384-character word
			"headers":           map[string]any{"X-Priority": "1", "X-Report": map[string]any{"quarter": 3, "year": 2026}},
		}})
	require.NoError(t, err)
	require.Equal(t, "pending", f.pending.Status)
	f.decided, err = agent.Submit(ctx, client.SubmitRequest{Tool: "payments.send",
		Args: map[string]any{"amount": 950, "currency": "USD", "to": "unknown-vendor", "memo": "urgent, pay today"}})
	require.NoError(t, err)
	_, err = env.Admin.Deny(ctx, f.decided.ID, "Unknown vendor: ask finance first.")
	require.NoError(t, err)
	var ids []string
	for i := range 3 {
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "payments.send",
			Args: map[string]any{"amount": 400 + i, "currency": "EUR", "to": "ACME GmbH", "memo": "licences"}})
		require.NoError(t, err)
		ids = append(ids, a.ID)
	}
	var batch struct {
		ID string `json:"id"`
	}
	_, err = pat.Do(ctx, http.MethodPost, "/api/v1/batches", map[string]any{"ids": ids}, &batch)
	require.NoError(t, err)
	f.batch = batch.ID
	return env, f
}

// TestBrowserPhonePages opens every console page at 390×844, in the light
// and the dark theme: no page scrolls sideways, every field has a label,
// every card a heading, the skip link comes first, the navigation marks
// the current section, every text has a contrast of at least 4.5:1, and on
// a pending action the decision bar is on screen and the approve button
// is reachable without scrolling sideways.
func TestBrowserPhonePages(t *testing.T) {
	env, f := phoneSetup(t)
	c := startChrome(t)
	c.do(t, phoneViewport())

	signedIn := false
	for _, pg := range phonePages {
		if !pg.signedOut && !signedIn {
			c.signIn(t, env, "/ui/account", "pat", "pat-password-123", "#password-form")
			signedIn = true
		}
		for _, scheme := range []string{"light", "dark"} {
			t.Run(pg.name+"/"+scheme, func(t *testing.T) {
				c.do(t, colorScheme(scheme),
					chromedp.Navigate(env.URL+pg.path(f)),
					chromedp.WaitVisible(chromedp.CSS(pg.want)),
				)
				// The theme follows the system setting.
				bg := run(t, c, chromedp.Evaluate[string](`getComputedStyle(document.documentElement).backgroundColor`))
				assert.Equal(t, map[string]string{"light": "rgb(246, 247, 249)", "dark": "rgb(17, 21, 28)"}[scheme], bg, "the page's background")
				got := run(t, c, chromedp.Evaluate[phoneAudit](auditScript))
				assert.LessOrEqual(t, got.ScrollWidth, phoneWidth, "the page scrolls sideways")
				assert.Empty(t, got.Unlabelled, "fields without a label")
				assert.Empty(t, got.NoHeading, "cards without a heading")
				assert.Empty(t, got.LowContrast, "text below 4.5:1")
				assert.Greater(t, got.CheckedTexts, 2, "the contrast check saw the page's text")
				assert.True(t, got.SkipFirst, "the skip link is not the first thing to focus")
				assert.True(t, got.HasMain, "no #main for the skip link")
				if got.HasNav && pg.name != "not-found" {
					assert.Equal(t, 1, got.Current, "aria-current marks one section")
				}
				if pg.want == "#approve" {
					approveReachable(t, c)
				}
				if scheme == "light" || pg.dark {
					name := "phone-" + pg.name + ".png"
					if scheme == "dark" {
						name = "phone-" + pg.name + "-dark.png"
					}
					c.do(t, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
					c.viewportShot(t, name)
				}
			})
		}
	}

	t.Run("the audit finds what it checks for", func(t *testing.T) {
		// A grey text on white, a field with no label and a card with no
		// heading, added to a page that has none of them: the audit must
		// report each, or its silence above proves nothing.
		c.do(t, colorScheme("light"), chromedp.Navigate(env.URL+"/ui/account"), chromedp.WaitVisible(chromedp.CSS("#password-form")),
			chromedp.Evaluate[chromedp.Void](`(() => {
				const p = document.createElement('p'); p.textContent = 'faint'; p.style.color = '#aaaaaa'; p.style.background = '#ffffff';
				const i = document.createElement('input'); i.type = 'text';
				const a = document.createElement('article'); a.textContent = 'no heading';
				const w = document.createElement('div'); w.style.width = '600px'; w.textContent = 'wide';
				document.getElementById('main').append(p, i, a, w);
			})()`))
		got := run(t, c, chromedp.Evaluate[phoneAudit](auditScript))
		assert.Greater(t, got.ScrollWidth, phoneWidth)
		assert.Len(t, got.Unlabelled, 1)
		assert.Len(t, got.NoHeading, 1)
		require.Len(t, got.LowContrast, 1)
		assert.Contains(t, got.LowContrast[0], "faint")
	})

	t.Run("times show the relative and the local time beside UTC", func(t *testing.T) {
		c.do(t, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Europe/Berlin"})
			return err
		}))
		defer c.do(t, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: ""})
			return err
		}))
		c.do(t, chromedp.Navigate(env.URL+"/ui/actions/"+f.decided.ID), chromedp.WaitVisible(chromedp.CSS("#decision time.when + .when-local")))
		utc := c.text(t, "#decision time.when")
		assert.True(t, strings.HasSuffix(utc, " UTC"), "UTC as rendered: %q", utc)
		local := c.text(t, "#decision time.when + .when-local")
		assert.Contains(t, local, "ago")
		assert.Regexp(t, `GMT\+1|CET`, local, "the reader's own time zone")
	})

	t.Run("the menu folds the top bar and opens without widening the page", func(t *testing.T) {
		c.do(t, colorScheme("light"), chromedp.Navigate(env.URL+"/ui/queue"), chromedp.WaitVisible(chromedp.CSS("#menu-toggle")))
		c.do(t, chromedp.WaitNotVisible(chromedp.CSS("#nav-links")))
		assert.Equal(t, "false", run(t, c, chromedp.AttributeValue(chromedp.CSS("#menu-toggle"), "aria-expanded")).Value)
		c.do(t, chromedp.Click(chromedp.CSS("#menu-toggle")), chromedp.WaitVisible(chromedp.CSS("#nav-links")))
		assert.Equal(t, "true", run(t, c, chromedp.AttributeValue(chromedp.CSS("#menu-toggle"), "aria-expanded")).Value)
		width := run(t, c, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
		assert.LessOrEqual(t, width, phoneWidth)
		c.viewportShot(t, "phone-menu.png")
	})

	t.Run("the queue is cards, the tool heading each", func(t *testing.T) {
		c.do(t, chromedp.Navigate(env.URL+"/ui/queue"), chromedp.WaitVisible(chromedp.CSS("#row-"+f.pending.ID)))
		display := run(t, c, chromedp.Evaluate[string](`getComputedStyle(document.getElementById('row-`+f.pending.ID+`')).display`))
		assert.Equal(t, "block", display)
		head := c.text(t, "#row-"+f.pending.ID+` h2`)
		assert.Equal(t, "email.send", head)
		// The Review button is inside the screen's width.
		right := run(t, c, chromedp.Evaluate[float64](`document.querySelector('#row-`+f.pending.ID+` a.open').getBoundingClientRect().right`))
		assert.LessOrEqual(t, right, float64(phoneWidth))
	})
}

// approveReachable checks, on a pending action's page at the top, that the
// decision bar is on screen; that its Approve link brings the reviewer to
// the phrase field; and that the approve button, scrolled to, is inside
// the screen with no sideways scroll and not covered by anything.
func approveReachable(t *testing.T, c *chrome) {
	t.Helper()
	c.do(t, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	inView := `((el) => { const r = el.getBoundingClientRect();
		return r.top >= 0 && r.left >= 0 && r.bottom <= window.innerHeight && r.right <= document.documentElement.clientWidth; })`
	bar := run(t, c, chromedp.Evaluate[bool](inView+`(document.getElementById('decision-bar'))`))
	assert.True(t, bar, "the decision bar is not on screen at the top of the page")
	c.do(t, chromedp.Click(chromedp.CSS("#bar-approve")))
	c.poll(t, 5*time.Second, `document.activeElement && document.activeElement.id === 'confirmation'`)
	field := run(t, c, chromedp.Evaluate[bool](inView+`(document.getElementById('confirmation'))`))
	assert.True(t, field, "the decision bar's Approve does not bring the phrase field on screen")
	c.do(t, chromedp.Evaluate[chromedp.Void](`document.getElementById('approve').scrollIntoView({block: 'nearest', inline: 'nearest'})`))
	button := run(t, c, chromedp.Evaluate[bool](inView+`(document.getElementById('approve'))`))
	assert.True(t, button, "the approve button is not on screen once scrolled to")
	scrollX := run(t, c, chromedp.Evaluate[float64](`window.scrollX`))
	assert.Zero(t, scrollX, "reaching the approve button scrolled sideways")
	top := run(t, c, chromedp.Evaluate[bool](`(() => { const b = document.getElementById('approve'); const r = b.getBoundingClientRect();
		const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2); return !!hit && b.contains(hit); })()`))
	assert.True(t, top, "something covers the approve button")
}
