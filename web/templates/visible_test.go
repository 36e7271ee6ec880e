package templates

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestVisible(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []Piece{{Text: "report"}, {Mark: "⟨U+202E⟩", Title: "U+202E RIGHT-TO-LEFT OVERRIDE (bidi)"}, {Text: "fdp.exe"}},
		Visible("report\u202efdp.exe"))
	assert.Equal(t, "amount⟨U+200B⟩", VisibleString("amount\u200b"))
	assert.Equal(t, "plain\ttext\n", VisibleString("plain\ttext\n"))
	assert.Equal(t, []Piece{{Text: "sh"}, {Mark: "⟨NUL⟩", Title: "control byte 0x00 in the file"}, {Mark: "⟨not UTF-8⟩", Title: "a byte that is not UTF-8 in the file"}},
		VisibleDiffLine("sh\u2400\ufffd"))
	assert.Equal(t, []Piece{{Text: "sh\u2400"}}, Visible("sh\u2400"), "outside diffs a control picture is just a character")
}
