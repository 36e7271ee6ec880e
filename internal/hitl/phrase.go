package hitl

import (
	"crypto/rand"
	"crypto/subtle"
	"strings"
)

// phraseAlphabet has no characters a reader can confuse (no 0/O, 1/I/L, 5/S,
// 2/Z, 8/B).
const phraseAlphabet = "ACDEFGHJKMNPQRTUVWXY34679"

// PhraseCodeLen is the length of the random code in a confirmation phrase.
const PhraseCodeLen = 4

// phraseLens are the code lengths a submit tries in turn when the phrase
// it drew is taken by another pending action of the tool: 4 characters
// (390,625 codes) while the queue is short; past a few collisions the
// queue is full of that tool, and 6 characters (244 million) and then 8
// make a collision as good as impossible, so no submit fails for one.
var phraseLens = [...]int{4, 4, 4, 4, 6, 6, 8, 8, 8, 8}

// NewPhrase returns a confirmation phrase for an action on tool:
// "<tool> <code>". Uniqueness among pending actions is enforced by the store.
func NewPhrase(tool string) string { return newPhrase(tool, PhraseCodeLen) }

// phraseFor returns the phrase of a submit's attempt'th try.
func phraseFor(tool string, attempt int) string {
	return newPhrase(tool, phraseLens[min(attempt, len(phraseLens)-1)])
}

func newPhrase(tool string, n int) string {
	code := make([]byte, n)
	for i := range code {
		code[i] = phraseAlphabet[randIndex(len(phraseAlphabet))]
	}
	return tool + " " + string(code)
}

func randIndex(n int) int {
	var b [1]byte
	limit := 256 - 256%n // reject to avoid modulo bias
	for {
		_, _ = rand.Read(b[:])
		if int(b[0]) < limit {
			return int(b[0]) % n
		}
	}
}

// PhraseMatches reports, in time independent of where they differ, whether
// typed is the action's phrase. Surrounding white space is ignored; case is
// not.
func PhraseMatches(phrase, typed string) bool {
	typed = strings.TrimSpace(typed)
	return phrase != "" && subtle.ConstantTimeCompare([]byte(phrase), []byte(typed)) == 1
}
