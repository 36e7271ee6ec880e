package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// policyVersionsOf counts the stored versions of a policy scope.
func policyVersionsOf(t *testing.T, env *apptest.Env, scope string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, env.DBURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM policies WHERE scope = $1`, scope).Scan(&n))
	return n
}

// TestConsolePolicySavesAreCompareAndSet has several admins save the fleet
// policy at once from editors opened on the same version: exactly one save
// becomes the next version, every other one gets the conflict page and
// writes nothing. (The console used to check the version and then save on
// whatever was current, so two of them could both land.)
func TestConsolePolicySavesAreCompareAndSet(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	const admins = 4 // two logins each (successful logins are never rate limited)
	type editor struct {
		b    *browser
		csrf string
	}
	editors := make([]editor, admins)
	for i := range editors {
		name := "admin" + string(rune('a'+i))
		b, _ := userSession(t, env, name, "admin")
		resp, page := b.get("/ui/fleet/edit")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, page, `name="base_version" value="0"`)
		editors[i] = editor{b: b, csrf: csrfOf(t, page)}
	}

	statuses := make([]int, admins)
	pages := make([]string, admins)
	var wg sync.WaitGroup
	for i, e := range editors {
		wg.Go(func() {
			doc := "default: deny\nrules:\n  - id: r" + string(rune('a'+i)) + "\n    tool: fs.read\n    effect: allow\n"
			resp, page := e.b.post("/ui/fleet", url.Values{"csrf": {e.csrf}, "base_version": {"0"}, "document": {doc}})
			statuses[i], pages[i] = resp.StatusCode, page
		})
	}
	wg.Wait()

	won := 0
	for i, st := range statuses {
		switch st {
		case http.StatusSeeOther:
			won++
		case http.StatusPreconditionFailed:
			assert.Contains(t, pages[i], `id="policy-conflict"`)
			assert.Contains(t, pages[i], "saved version 1")
			assert.Contains(t, pages[i], `name="base_version" value="1"`, "the editor now starts from the winning version")
		default:
			t.Errorf("save %d: status %d, want 303 or 412", i, st)
		}
	}
	assert.Equal(t, 1, won, "exactly one save from version 0 wins")
	assert.Equal(t, 1, policyVersionsOf(t, env, "fleet"), "the losers wrote nothing")
}

// TestBrowserPolicyEditConflict opens the policy editor in a browser, lets
// another admin save through the API meanwhile, and saves: the console
// shows who saved which version instead of overwriting it, keeps the text,
// and only a second, informed save replaces it.
func TestBrowserPolicyEditConflict(t *testing.T) {
	env := apptest.Start(t)
	ctx := env.Ctx()
	env.Agent("ledger-bot", askPolicy)
	bob := env.User("bob", "admin")
	c := startChrome(t)
	c.signIn(t, env, "/ui/agents/ledger-bot/policy/edit", "admin", apptest.AdminPassword, "#policy-document")

	_, err := bob.PutAgentPolicy(ctx, "ledger-bot", map[string]any{"rules": []map[string]any{
		{"id": "bobs-rule", "tool": "fs.read", "effect": "allow"}}})
	require.NoError(t, err)

	mine := "default: deny\nrules:\n  - id: mine\n    tool: email.send\n    effect: deny\n"
	c.do(t,
		chromedp.SetValue(chromedp.CSS("#policy-document"), mine),
		chromedp.Click(chromedp.CSS("#save-policy")),
		chromedp.WaitVisible(chromedp.CSS("#policy-conflict")),
	)
	msg := c.text(t, "#policy-conflict")
	assert.Contains(t, msg, "You edited version 1, but bob saved version 2")
	assert.Equal(t, mine, strings.TrimSpace(run(t, c, chromedp.Value(chromedp.CSS("#policy-document"))))+"\n", "the text is kept")
	assert.Equal(t, 2, policyVersionsOf(t, env, "agent:ledger-bot"), "nothing was overwritten")
	c.screenshot(t, "policy-conflict.png")

	c.do(t,
		chromedp.Click(chromedp.CSS("#save-policy")),
		chromedp.WaitVisible(chromedp.CSS("#policy-yaml")),
	)
	assert.Equal(t, 3, policyVersionsOf(t, env, "agent:ledger-bot"), "the informed second save lands")
}

// TestPolicyPageMarksHiddenCharacters: an "always" approval writes the
// agent's own argument values into its policy, and the policy page and
// its diff show them with each hidden character marked, as the action
// page did when it was approved: an admin reading the rules that allow
// calls without review reads report⟨U+202E⟩fdp.exe, not report…exe.pdf.
// Before, both wrote the policy as stored.
func TestPolicyPageMarksHiddenCharacters(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	ctx := env.Ctx()
	agent := env.Agent("mailer", map[string]any{"rules": []map[string]any{{"id": "mail", "tool": "email.send", "effect": "approve"}}})
	_, revAPI := userSession(t, env, "rita", "reviewer")
	admin, _ := userSession(t, env, "ada", "admin")
	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"attachment": "report\u202efdp.exe"}})
	require.NoError(t, err)
	full, err := revAPI.Get(ctx, a.ID)
	require.NoError(t, err)
	_, err = revAPI.Approve(ctx, a.ID, full.ConfirmationPhrase, "always")
	require.NoError(t, err)

	for path, from := range map[string]string{
		"/ui/agents/mailer/policy":             `id="policy-yaml"`,
		"/ui/agents/mailer/policy?from=1&to=2": `id="policy-diff"`,
	} {
		resp, page := admin.get(path)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		i := strings.Index(page, from)
		require.GreaterOrEqual(t, i, 0, "%s: %s", path, from)
		shown := page[i:]
		assert.False(t, strings.Contains(shown, "\u202e"), "%s: U+202E written as sent", path)
		assert.True(t, strings.Contains(shown, `class="hidden-char"`), "%s: hidden characters marked", path)
	}
}
