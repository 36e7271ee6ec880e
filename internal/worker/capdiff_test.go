package worker

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

// TestCapDiffNeverSplitsACharacter: a diff over the bound is cut before
// the character the bound falls in, never through it.
func TestCapDiffNeverSplitsACharacter(t *testing.T) {
	t.Parallel()
	small := "+héllo\n"
	got, cut := capDiff(small, false)
	assert.Equal(t, small, got)
	assert.False(t, cut)

	for pad := range 4 { // the bound at each byte of a 4-byte character
		diff := strings.Repeat("a", maxDiff-pad) + strings.Repeat("😀", 10)
		got, cut := capDiff(diff, false)
		assert.True(t, cut)
		assert.True(t, utf8.ValidString(got), "pad %d", pad)
		assert.LessOrEqual(t, len(got), maxDiff)
		assert.Greater(t, len(got), maxDiff-4)
	}
}
