package hitl

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPhrase(t *testing.T) {
	t.Parallel()
	p := NewPhrase("payments.send")
	assert.Regexp(t, regexp.MustCompile(`^payments\.send [`+phraseAlphabet+`]{4}$`), p)
	assert.True(t, PhraseMatches(p, p))
	assert.True(t, PhraseMatches(p, "  "+p+"\n"))
	assert.False(t, PhraseMatches(p, strings.ToLower(p)))
	assert.False(t, PhraseMatches(p, "payments.send"))
	assert.False(t, PhraseMatches("", ""), "an action without a phrase can never be approved")
	seen := map[string]bool{}
	for range 200 {
		seen[NewPhrase("x")] = true
	}
	assert.Greater(t, len(seen), 190, "codes are random")
}

func TestTransitions(t *testing.T) {
	t.Parallel()
	all := []Status{StatusPending, StatusApproved, StatusDenied, StatusExpired, StatusCancelled, StatusRunning, StatusSucceeded, StatusFailed}
	allowed := map[[2]Status]bool{
		{StatusPending, StatusApproved}: true, {StatusPending, StatusDenied}: true, {StatusPending, StatusExpired}: true,
		{StatusPending, StatusCancelled}: true, {StatusApproved, StatusRunning}: true, {StatusApproved, StatusSucceeded}: true,
		{StatusApproved, StatusFailed}: true, {StatusRunning, StatusSucceeded}: true, {StatusRunning, StatusFailed}: true, {StatusRunning, StatusApproved}: true,
	}
	for _, from := range all {
		for _, to := range all {
			assert.Equal(t, allowed[[2]Status{from, to}], CanTransition(from, to), "%s -> %s", from, to)
		}
	}
	assert.False(t, Status("done").Valid())
}
