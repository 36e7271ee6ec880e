package notify

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/hitl"
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
