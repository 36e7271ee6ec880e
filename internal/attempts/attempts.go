// Package attempts counts attempts per key in a sliding window, in a table
// of bounded size: when the table is full, the key whose last attempt is
// the oldest is evicted (least recently used), so a flood of new keys pushes
// out stale entries one by one instead of wiping what the table knows.
package attempts

import (
	"container/list"
	"sync"
	"time"
)

// Table counts attempts per key: at most Limit in any Window. It is safe
// for concurrent use.
type Table struct {
	mu      sync.Mutex
	limit   int
	window  time.Duration
	maxKeys int
	epoch   time.Time // attempt times are kept as offsets from it
	order   *list.List
	byKey   map[string]*list.Element
}

type entry struct {
	key  string
	hits []time.Duration // offsets from epoch, oldest first
	gone bool            // evicted or deleted
}

// New returns a Table allowing limit attempts per key in window, holding at
// most maxKeys keys.
func New(limit int, window time.Duration, maxKeys int) *Table {
	return &Table{limit: max(limit, 1), window: window, maxKeys: max(maxKeys, 1),
		epoch: time.Now(), order: list.New(), byKey: map[string]*list.Element{}}
}

// Ticket is one recorded attempt; Cancel takes it back.
type Ticket struct {
	t  *Table
	e  *entry
	at time.Duration
}

// Wait reports how long key must wait at now before an attempt is allowed
// (0: allowed now), without recording anything.
func (t *Table) Wait(key string, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	el, ok := t.byKey[key]
	if !ok {
		return 0
	}
	e := el.Value.(*entry)
	return t.wait(e, t.offset(now))
}

// Take records an attempt for key at now if key has fewer than the limit in
// the window; else it records nothing and returns how long to wait.
func (t *Table) Take(key string, now time.Time) (*Ticket, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at := t.offset(now)
	el, ok := t.byKey[key]
	if !ok {
		for len(t.byKey) >= t.maxKeys {
			t.remove(t.order.Back())
		}
		el = t.order.PushFront(&entry{key: key})
		t.byKey[key] = el
	}
	e := el.Value.(*entry)
	if d := t.wait(e, at); d > 0 {
		return nil, d
	}
	e.hits = append(e.hits, at)
	t.order.MoveToFront(el)
	return &Ticket{t: t, e: e, at: at}, 0
}

// Cancel takes the attempt back (it did not count: a success, or an attempt
// that was never made). A key left with no attempts leaves the table.
// Cancelling twice, or after the key was evicted, does nothing.
func (k *Ticket) Cancel() {
	if k == nil {
		return
	}
	t := k.t
	t.mu.Lock()
	defer t.mu.Unlock()
	e := k.e
	k.e = nil
	if e == nil || e.gone {
		return
	}
	for i := len(e.hits) - 1; i >= 0; i-- {
		if e.hits[i] == k.at {
			e.hits = append(e.hits[:i], e.hits[i+1:]...)
			break
		}
	}
	if len(e.hits) == 0 {
		t.remove(t.byKey[e.key])
	}
}

// Len is the number of keys held.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byKey)
}

// Count is the number of attempts key has in the window at now.
func (t *Table) Count(key string, now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	el, ok := t.byKey[key]
	if !ok {
		return 0
	}
	e := el.Value.(*entry)
	t.expire(e, t.offset(now))
	return len(e.hits)
}

func (t *Table) offset(now time.Time) time.Duration { return now.Sub(t.epoch) }

// expire drops e's attempts that left the window.
func (t *Table) expire(e *entry, at time.Duration) {
	n := 0
	for n < len(e.hits) && e.hits[n] <= at-t.window {
		n++
	}
	if n > 0 {
		e.hits = append(e.hits[:0], e.hits[n:]...)
	}
}

// wait is how long e must wait at at (0: an attempt is allowed).
func (t *Table) wait(e *entry, at time.Duration) time.Duration {
	t.expire(e, at)
	if len(e.hits) < t.limit {
		return 0
	}
	// The attempt that frees a place is the limit-th newest.
	return max(e.hits[len(e.hits)-t.limit]+t.window-at, time.Nanosecond)
}

func (t *Table) remove(el *list.Element) {
	if el == nil {
		return
	}
	e := el.Value.(*entry)
	e.gone = true
	t.order.Remove(el)
	delete(t.byKey, e.key)
}
