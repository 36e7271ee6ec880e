package attempts

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLimitInSlidingWindow(t *testing.T) {
	t.Parallel()
	tab := New(3, time.Minute, 100)
	t0 := time.Now()
	for i := range 3 {
		tk, wait := tab.Take("k", t0.Add(time.Duration(i)*time.Second))
		require.NotNil(t, tk, "attempt %d", i+1)
		assert.Zero(t, wait)
	}
	tk, wait := tab.Take("k", t0.Add(10*time.Second))
	assert.Nil(t, tk, "the 4th attempt in the window is refused")
	assert.Equal(t, 50*time.Second, wait, "until the oldest attempt leaves the window")
	assert.Equal(t, 50*time.Second, tab.Wait("k", t0.Add(10*time.Second)))
	assert.Equal(t, 3, tab.Count("k", t0.Add(10*time.Second)), "a refused attempt is not recorded")

	tk, _ = tab.Take("k", t0.Add(time.Minute))
	assert.NotNil(t, tk, "the oldest attempt has left the window")
	assert.Zero(t, tab.Wait("other", t0), "other keys are not affected")
}

func TestCancelTakesAnAttemptBack(t *testing.T) {
	t.Parallel()
	tab := New(2, time.Minute, 100)
	now := time.Now()
	for range 10 {
		tk, _ := tab.Take("k", now)
		require.NotNil(t, tk)
		tk.Cancel()
		tk.Cancel() // twice is harmless
	}
	assert.Equal(t, 0, tab.Count("k", now))
	assert.Equal(t, 0, tab.Len(), "a key with no attempts leaves the table")
	a, _ := tab.Take("k", now)
	b, _ := tab.Take("k", now)
	require.NotNil(t, a)
	require.NotNil(t, b)
	c, _ := tab.Take("k", now)
	assert.Nil(t, c)
	a.Cancel()
	assert.Equal(t, 1, tab.Count("k", now), "only the cancelled attempt went")
}

// TestFullTableEvictsTheOldest: a flood of new keys pushes out the least
// recently used keys one by one; the recent ones keep their counts (the
// old limiter wiped the whole table once it passed its size).
func TestFullTableEvictsTheOldest(t *testing.T) {
	t.Parallel()
	const size = 100
	tab := New(3, time.Minute, size)
	now := time.Now()
	for range 3 {
		_, _ = tab.Take("victim", now)
	}
	require.NotZero(t, tab.Wait("victim", now), "victim is at its limit")
	for i := range 10 * size {
		_, _ = tab.Take(fmt.Sprintf("junk-%d", i), now)
		if i < size-1 {
			// victim is refused again and again, it stays at its limit
			_, _ = tab.Take("victim", now)
		}
	}
	assert.Equal(t, size, tab.Len(), "the table never holds more than its size")
	assert.Zero(t, tab.Count("junk-0", now), "the oldest junk key was evicted")
	assert.Equal(t, 1, tab.Count(fmt.Sprintf("junk-%d", 10*size-1), now), "the newest key is kept")

	// A table that is full but not flooded keeps a recent key's count.
	tab = New(3, time.Minute, size)
	for i := range size - 1 {
		_, _ = tab.Take(fmt.Sprintf("old-%d", i), now)
	}
	for range 3 {
		_, _ = tab.Take("victim", now.Add(time.Second))
	}
	_, _ = tab.Take("new", now.Add(2*time.Second)) // full: evicts old-0, not everything
	assert.Equal(t, size, tab.Len())
	assert.Equal(t, 3, tab.Count("victim", now.Add(2*time.Second)), "the recent key keeps its count")
	assert.NotZero(t, tab.Wait("victim", now.Add(2*time.Second)), "and stays refused")
	assert.Zero(t, tab.Count("old-0", now), "the least recently used key went")
	assert.Equal(t, 1, tab.Count("old-1", now), "one eviction per new key")
}

func TestCancelAfterEvictionDoesNothing(t *testing.T) {
	t.Parallel()
	tab := New(2, time.Minute, 1)
	now := time.Now()
	a, _ := tab.Take("a", now)
	require.NotNil(t, a)
	_, _ = tab.Take("b", now) // evicts a
	_, _ = tab.Take("a", now) // a again, evicts b
	a.Cancel()                // the first a's attempt is gone already
	assert.Equal(t, 1, tab.Count("a", now))
}
