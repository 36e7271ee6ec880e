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
		// a reviewer's or admin's cancel, a suspension or a revoked token stops approved and running work
		{StatusApproved, StatusCancelled}: true, {StatusRunning, StatusCancelled}: true,
	}
	for _, from := range all {
		for _, to := range all {
			assert.Equal(t, allowed[[2]Status{from, to}], CanTransition(from, to), "%s -> %s", from, to)
		}
	}
	assert.False(t, Status("done").Valid())
	assert.ElementsMatch(t, all, Statuses())
}

// TestMovesComeFromTheTable: every status change the store makes in SQL
// is a Move, and every pair a Move allows is in the transitions table.
func TestMovesComeFromTheTable(t *testing.T) {
	t.Parallel()
	moves := map[string]Move{"lease": MoveLease, "succeed": MoveSucceed, "fail": MoveFail, "requeue": MoveRequeue,
		"interrupt": MoveInterrupt, "expire": MoveExpire, "stop": MoveStop}
	for name, m := range moves {
		assert.NotEmpty(t, m.From, name)
		for _, from := range m.From {
			assert.True(t, CanTransition(from, m.To), "%s: %s -> %s is not in the table", name, from, m.To)
		}
	}
	assert.Equal(t, []Status{StatusPending, StatusApproved, StatusRunning}, MoveStop.From, "stop: every status the table lets reach cancelled")
	assert.Equal(t, []Status{StatusRunning}, MoveSucceed.From, "a worker completes only what runs")
	assert.Panics(t, func() { newMove(StatusRunning, StatusPending) }, "a pair outside the table is refused")
	assert.Panics(t, func() { newMove(StatusApproved, StatusSucceeded) })
	for _, from := range Statuses() {
		for _, to := range Statuses() {
			err := checkTransition(from, to)
			if from == to || CanTransition(from, to) {
				assert.NoError(t, err, "%s -> %s", from, to)
			} else {
				assert.Error(t, err, "%s -> %s", from, to)
			}
		}
	}
}
