package metrics

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/risk"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	return string(body)
}

// TestToolLabel: only tools the namer accepts are labelled by name, at
// most maxTools of them; a name once labelled keeps its label; without a
// namer every tool is other.
func TestToolLabel(t *testing.T) {
	t.Parallel()
	m := New(nil)
	submit := func(agent, tool string) {
		m.Submitted(&hitl.Action{AgentID: agent, Tool: tool, Decision: hitl.Decision{Effect: "allow"}, Risk: risk.Assessment{Level: "low"}})
	}
	submit("a", "fs.read")
	assert.Contains(t, scrape(t, m), `tool="other"} 1`, "no namer: nothing is named")

	named := map[string]bool{"fs.read": true}
	m.NameTools(func(agentID, tool string) bool {
		return agentID == "a" && (named[tool] || strings.HasPrefix(tool, "glob."))
	})
	submit("a", "fs.read")
	submit("b", "junk")
	submit("a", "junk")
	text := scrape(t, m)
	assert.Contains(t, text, `tool="fs.read"} 1`)
	assert.Contains(t, text, `tool="other"} 3`)
	assert.NotContains(t, text, `tool="junk"`)

	delete(named, "fs.read")
	submit("a", "fs.read")
	assert.Contains(t, scrape(t, m), `tool="fs.read"} 2`, "a labelled name keeps its label")
	for i := range maxTools + 5 {
		submit("a", fmt.Sprintf("glob.t%03d", i))
	}
	text = scrape(t, m)
	assert.Equal(t, maxTools, strings.Count(text, "airlock_actions_submitted_total{")-1, "maxTools names and other")
	assert.Contains(t, text, `tool="other"} 9`, "past the bound a named tool is other too")
}

// TestAuditSealing: the sealer's state is scraped as it is then.
func TestAuditSealing(t *testing.T) {
	t.Parallel()
	m := New(nil)
	st := audit.SealerStats{LockMissed: 41, Lag: 12500 * time.Millisecond, WatermarksRefused: 1, CheckpointsSkipped: 2}
	m.AuditSealing(func() audit.SealerStats { return st })
	text := scrape(t, m)
	for _, want := range []string{"airlock_audit_seal_lock_missed_rounds 41", "airlock_audit_seal_lag_seconds 12.5",
		"airlock_audit_seal_watermarks_refused_total 1", "airlock_audit_checkpoints_skipped_total 2"} {
		assert.Contains(t, text, want)
	}
	st.LockMissed = 0
	assert.Contains(t, scrape(t, m), "airlock_audit_seal_lock_missed_rounds 0")
}
