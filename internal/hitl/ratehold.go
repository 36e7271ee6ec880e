package hitl

import (
	"sync"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
)

// rateHolds remembers, per agent, until when its per-minute rate
// (settings.rate.per_minute) refuses every new call: the Retry-After of
// the last refusal, when the oldest call of the agent's last minute
// leaves the window. Until then a new call is refused at once (RateHeld),
// before its arguments are decoded, classified, redacted and evaluated
// and without a round trip to the database: an agent past its limit costs
// the server next to nothing, so it cannot slow the others down by
// sending more. The statement that stores a call stays the rule (it
// counts the window); the hold only repeats its answer while that answer
// cannot change, per instance, and a policy that raises the limit applies
// at the latest when the hold ends (at most a minute).
type rateHolds struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// hold records that agentID's calls are refused until t.
func (h *rateHolds) hold(agentID string, t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.until == nil {
		h.until = map[string]time.Time{}
	}
	if t.After(h.until[agentID]) {
		h.until[agentID] = t
	}
	if len(h.until) > 1024 { // drop the ended ones now and then
		for id, u := range h.until {
			if !u.After(t.Add(-time.Minute)) {
				delete(h.until, id)
			}
		}
	}
}

// left is how long agentID's calls are still refused at now (0: not).
func (h *rateHolds) left(agentID string, now time.Time) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	u, ok := h.until[agentID]
	if !ok {
		return 0
	}
	if !u.After(now) {
		delete(h.until, agentID)
		return 0
	}
	return u.Sub(now)
}

// RateHeld returns the refusal a new call of agentID gets at once because
// the agent is past its per-minute rate (see rateHolds), or nil. As in the
// statement, a replay of an idempotency key is no exception.
func (s *Service) RateHeld(agentID string) error {
	left := s.rateHolds.left(agentID, s.now())
	if left <= 0 {
		return nil
	}
	return apperr.RateLimited(left, "agent %s is past its limit of calls a minute (settings.rate.per_minute); retry later", agentID)
}
