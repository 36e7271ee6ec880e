package main

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCollectCountsOnlyTheTimedSubmits(t *testing.T) {
	t.Parallel()
	const ms = int64(time.Millisecond)
	submitted := map[string]int64{"a": 1000 * ms, "b": 2000 * ms}
	revs := []*reviewer{
		// Instance 1: both received, and a warm-up message after the reset.
		{inst: 0, seen: map[string]int64{"a": 1010 * ms, "b": 2030 * ms, "warm": 900 * ms}},
		// Instance 2: b never arrived, and the connection ended.
		{inst: 1, seen: map[string]int64{"a": 1020 * ms, "warm": 950 * ms}, err: errors.New("closed")},
	}
	s := collect(revs, submitted, 0)
	assert.Equal(t, 1, s.Missing, "b on instance 2")
	assert.Equal(t, 1, s.Dropped)
	assert.Equal(t, [3]int{2, 1, 3}, s.Samples)
	assert.Equal(t, 30*time.Millisecond, s.Max[0])
	assert.Equal(t, 20*time.Millisecond, s.Max[1])
	assert.Equal(t, 30*time.Millisecond, s.Max[2])
	assert.Equal(t, 20*time.Millisecond, s.P50[2], "10, 20, 30 ms")
}

func TestCollectWithNothingReceived(t *testing.T) {
	t.Parallel()
	s := collect([]*reviewer{{seen: map[string]int64{}}}, map[string]int64{"a": 1}, 0)
	assert.Equal(t, 1, s.Missing)
	assert.Equal(t, [3]int{0, 0, 0}, s.Samples)
	assert.Zero(t, s.P99[2])
}
