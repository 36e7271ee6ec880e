package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNamesTool(t *testing.T) {
	t.Parallel()
	set := setup(t, designFleet, designPolicy)
	for tool, named := range map[string]bool{
		"fs.read":       true,  // exact, in both policies
		"payments.send": true,  // exact, agent policy
		"shell.exec":    true,  // glob shell.*
		"shell":         false, // the glob needs the dot
		"junk.tool":     false, // only the fleet's "*" matches it
		"":              false,
	} {
		assert.Equal(t, named, set.NamesTool(tool), tool)
	}
	fleetOnly := setup(t, designFleet, "")
	assert.True(t, fleetOnly.NamesTool("fs.read"), "a fleet rule names a tool for every agent")
	assert.False(t, fleetOnly.NamesTool("payments.send"))
	assert.False(t, Set{}.NamesTool("fs.read"), "no policy names nothing")
}
