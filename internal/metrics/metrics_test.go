package metrics

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
