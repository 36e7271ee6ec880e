package connlimit_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/connlimit"
)

func TestCapPerKeyAndRelease(t *testing.T) {
	l := connlimit.New(2, time.Second, "long polls", "AIRLOCK_MAX_LONG_POLLS")
	r1, ok := l.Acquire("agent:a")
	require.True(t, ok)
	r2, ok := l.Acquire("agent:a")
	require.True(t, ok)
	_, ok = l.Acquire("agent:a")
	assert.False(t, ok, "the third of a key over a cap of 2 is refused")
	rb, ok := l.Acquire("agent:b")
	assert.True(t, ok, "another key is not affected")

	r1()
	r1() // a second release gives nothing back twice
	assert.Equal(t, 1, l.Held("agent:a"))
	r3, ok := l.Acquire("agent:a")
	assert.True(t, ok, "a released slot is free again")
	_, ok = l.Acquire("agent:a")
	assert.False(t, ok, "and only one: releasing twice freed one slot")

	r2()
	r3()
	rb()
	held, keys, refused := l.Stats()
	assert.Equal(t, 0, held)
	assert.Equal(t, 0, keys, "a key holding nothing is forgotten")
	assert.EqualValues(t, 2, refused)
}

func TestRefusalIsRateLimitedWithRetryAfter(t *testing.T) {
	l := connlimit.New(1, 3*time.Second, "streams", "AIRLOCK_MAX_STREAMS")
	p := &auth.Principal{Kind: auth.KindUser, Subject: "rita", TokenID: "t1"}
	release, err := l.Enter(p)
	require.NoError(t, err)
	// Another token of the same user counts with the first.
	_, err = l.Enter(&auth.Principal{Kind: auth.KindUser, Subject: "rita", TokenID: "t2"})
	e, ok := apperr.As(err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, apperr.CodeRateLimited, e.Code)
	assert.Equal(t, 3*time.Second, e.RetryAfter)
	assert.Contains(t, e.Message, "AIRLOCK_MAX_STREAMS")
	// An agent of the same name is another caller.
	ra, err := l.Enter(&auth.Principal{Kind: auth.KindAgent, Subject: "rita"})
	require.NoError(t, err)
	ra()
	release()
	_, err = l.Enter(p)
	assert.NoError(t, err)
}

func TestNilLimiterAllowsEverything(t *testing.T) {
	var l *connlimit.Limiter
	for range 1000 {
		release, ok := l.Acquire("k")
		require.True(t, ok)
		release()
	}
	held, keys, refused := l.Stats()
	assert.Zero(t, held+keys)
	assert.Zero(t, refused)
}

// TestConcurrentAcquireNeverPassesTheCap has 300 goroutines take a slot of
// one key at once, each holding it until every one has tried: exactly the
// cap succeed.
func TestConcurrentAcquireNeverPassesTheCap(t *testing.T) {
	const max, tries = 7, 300
	l := connlimit.New(max, time.Second, "long polls", "AIRLOCK_MAX_LONG_POLLS")
	var wg sync.WaitGroup
	var got atomic.Int32
	start := make(chan struct{})
	releases := make(chan func(), tries)
	for range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			release, ok := l.Acquire("user:rita")
			if ok {
				got.Add(1)
				releases <- release
			}
		}()
	}
	close(start)
	wg.Wait()
	close(releases)
	assert.EqualValues(t, max, got.Load())
	assert.Equal(t, max, l.Held("user:rita"))
	for release := range releases {
		release()
	}
	held, keys, _ := l.Stats()
	assert.Zero(t, held)
	assert.Zero(t, keys)
}

// TestHammer takes and gives back slots of a few keys from many
// goroutines (run with -race): no key ever holds more than the cap, no
// count is lost, releasing twice never gives back twice, and when every
// goroutine is done nothing is held and no key is left.
func TestHammer(t *testing.T) {
	const max, goroutines, rounds, nkeys = 5, 64, 2000, 4
	l := connlimit.New(max, time.Second, "long polls", "AIRLOCK_MAX_LONG_POLLS")
	var inUse [nkeys]atomic.Int32
	var over atomic.Int32
	var acquired, refused atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []func()
			var mineKey []int
			for i := range rounds {
				k := (g + i) % nkeys
				if release, ok := l.Acquire(fmt.Sprintf("agent:%d", k)); ok {
					acquired.Add(1)
					if inUse[k].Add(1) > max {
						over.Add(1)
					}
					mine = append(mine, release)
					mineKey = append(mineKey, k)
				} else {
					refused.Add(1)
				}
				// Give back some of what this goroutine holds, some twice.
				if len(mine) > 0 && (i%3 == 0 || len(mine) > 2) {
					j := i % len(mine)
					inUse[mineKey[j]].Add(-1)
					mine[j]()
					if i%5 == 0 {
						mine[j]()
					}
					mine = append(mine[:j], mine[j+1:]...)
					mineKey = append(mineKey[:j], mineKey[j+1:]...)
				}
			}
			for j, release := range mine {
				inUse[mineKey[j]].Add(-1)
				release()
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, over.Load(), "a key held more than the cap")
	held, keys, nrefused := l.Stats()
	assert.Zero(t, held, "every slot was given back")
	assert.Zero(t, keys, "no key holding nothing is kept")
	assert.EqualValues(t, refused.Load(), nrefused)
	assert.Positive(t, acquired.Load())
	assert.Positive(t, refused.Load(), "the cap was reached")
	for k := range nkeys {
		assert.Zero(t, l.Held(fmt.Sprintf("agent:%d", k)))
	}
}
