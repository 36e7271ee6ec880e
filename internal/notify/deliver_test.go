package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/risk"
)

func TestSignIsHMACOverTimestampAndBody(t *testing.T) {
	t.Parallel()
	body := []byte(`{"type":"action.pending"}`)
	m := hmac.New(sha256.New, []byte("k"))
	m.Write([]byte("1700000000." + string(body)))
	assert.Equal(t, "v1="+hex.EncodeToString(m.Sum(nil)), Sign("k", "1700000000", body))
	assert.NotEqual(t, Sign("k", "1700000001", body), Sign("k", "1700000000", body), "the timestamp is signed")
}

func TestViewRedactsSecrets(t *testing.T) {
	t.Parallel()
	v := View(Target{Name: "s", Kind: KindSlack, URL: "https://hooks.slack.com/services/T/B/secret"})
	assert.Equal(t, "https://hooks.slack.com/"+Redacted, v.URL)
	v = View(Target{Name: "w", Kind: KindWebhook, URL: "https://x.example/in", Secret: "k"})
	assert.Equal(t, Redacted, v.Secret)
	assert.Equal(t, "https://x.example/in", v.URL)
}

func TestBackoffDoublesUpToTheBound(t *testing.T) {
	t.Parallel()
	d := NewDeliverer(Config{Backoff: time.Second, MaxBackoff: 5 * time.Second})
	assert.Equal(t, time.Second, d.backoff(1))
	assert.Equal(t, 2*time.Second, d.backoff(2))
	assert.Equal(t, 4*time.Second, d.backoff(3))
	assert.Equal(t, 5*time.Second, d.backoff(4))
	assert.Equal(t, 5*time.Second, d.backoff(40))
}

// TestPostErrorHidesTheURL: a failed post's error, shown to reviewers,
// never holds the target's URL (a Slack URL's path is its credential).
func TestPostErrorHidesTheURL(t *testing.T) {
	t.Parallel()
	d := NewDeliverer(Config{})
	// Loopback without allow_private: netguard refuses before any dial.
	_, err := d.post(context.Background(), Target{Name: "chat", Kind: KindSlack, URL: "http://127.0.0.1:9/services/T/B/credential"}, []byte("{}"), nil)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "credential")
	assert.Contains(t, err.Error(), "loopback")
}

func TestArgsSummaryIsOneBoundedLine(t *testing.T) {
	t.Parallel()
	s := ArgsSummary(map[string]any{"b": "x\ny", "a": 1, "long": strings.Repeat("z", 500)}, 60)
	assert.NotContains(t, s, "\n")
	assert.True(t, strings.HasPrefix(s, `a=1 b="x\ny"`), s)
	assert.LessOrEqual(t, len([]rune(s)), 60)
	now := time.Now()
	exp := now.Add(90 * time.Second)
	assert.Contains(t, TimeLeft(&hitl.Action{Status: hitl.StatusPending, ExpiresAt: &exp}, now), "1m30s left")
}

// TestSlackMessageKeepsToSlackLimits: what an agent writes cannot push a
// Slack message past Slack's limits (a section's text 3,000 characters, a
// field's 2,000): the reason was cut to 1,000 characters and then
// escaped, so 1,000 "<" became 4,000 and Slack refused every delivery of
// the action. Hidden characters reach the channel as the console's
// markers, and a backtick cannot end the arguments' code span.
func TestSlackMessageKeepsToSlackLimits(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a := &hitl.Action{ID: "a1", Tool: "email.send", AgentID: "mailer", Status: hitl.StatusPending,
		Reason: strings.Repeat("<", 4000),
		Args:   map[string]any{"to": "x`<https://evil.example|click>`", "name": "report\u202efdp.exe"},
		Risk:   risk.Assessment{Level: risk.High, Score: 80, Reasons: []string{strings.Repeat("&", 3000)}}}
	raw, err := SlackMessage(EventPending, a, "https://airlock.example/ui/actions/a1", now)
	require.NoError(t, err)
	var msg struct {
		Blocks []struct {
			Type   string                  `json:"type"`
			Text   *struct{ Text string }  `json:"text"`
			Fields []struct{ Text string } `json:"fields"`
		} `json:"blocks"`
	}
	require.NoError(t, json.Unmarshal(raw, &msg))
	var sections, fields int
	for _, b := range msg.Blocks {
		if b.Type != "section" {
			continue
		}
		if b.Text != nil {
			sections++
			assert.LessOrEqual(t, utf8.RuneCountInString(b.Text.Text), 3000)
			assert.NotContains(t, b.Text.Text, "\u202e")
			assert.Contains(t, b.Text.Text, "report⟨U+202E⟩fdp.exe")
			assert.Equal(t, 2, strings.Count(b.Text.Text, "`"), "only the code span's own backticks: %s", b.Text.Text)
			assert.NotContains(t, b.Text.Text, "<https", "a link stays escaped")
		}
		for _, f := range b.Fields {
			fields++
			assert.LessOrEqual(t, utf8.RuneCountInString(f.Text), 2000)
		}
	}
	assert.Equal(t, 1, sections)
	assert.Equal(t, 4, fields)

	assert.Equal(t, "&lt;…", slackText(strings.Repeat("<", 10), 6), "never half an escape")
}

// TestEmailMarksHiddenCharacters: a line separator in the reason cannot
// start a line of its own (a fake "Risk: low"), nor a bidi control turn
// the text around.
func TestEmailMarksHiddenCharacters(t *testing.T) {
	t.Parallel()
	a := &hitl.Action{ID: "a1", Tool: "email.send", AgentID: "mailer", Status: hitl.StatusPending,
		Reason: "routine\u2028Risk:      low (0)\u0085x", Args: map[string]any{"f": "report\u202efdp.exe"}}
	msg := string(EmailMessage("airlock@example.com", []string{"lead@example.com"}, EventPending, a, "https://airlock.example/ui/actions/a1", time.Now()))
	for _, c := range []string{"\u2028", "\u0085", "\u202e"} {
		assert.NotContains(t, msg, c)
	}
	assert.Contains(t, msg, "routine⟨U+2028⟩Risk:      low (0)⟨U+0085⟩x")
	assert.Contains(t, msg, "report⟨U+202E⟩fdp.exe")
}
