package eventbus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-time.After(50 * time.Millisecond):
		return false
	}
}

func TestWaitWakesOnlyItsAction(t *testing.T) {
	t.Parallel()
	b := New()
	a, stopA := b.Wait("a")
	defer stopA()
	other, stopOther := b.Wait("b")
	defer stopOther()
	b.Publish(Event{Kind: Updated, ActionID: "a"})
	assert.True(t, closed(a))
	assert.False(t, closed(other))
	b.Publish(Event{Kind: Resync})
	assert.True(t, closed(other), "resync wakes every waiter")
}

func TestSlowStreamIsDroppedWithoutBlocking(t *testing.T) {
	t.Parallel()
	b := New()
	slow, stopSlow := b.Subscribe(2)
	defer stopSlow()
	fast, stopFast := b.Subscribe(100)
	defer stopFast()
	for i := range 10 {
		b.Publish(Event{Kind: Created, ActionID: string(rune('a' + i))})
	}
	assert.True(t, closed(slow.Overflowed()))
	assert.Len(t, fast.C, 10)
	assert.Len(t, slow.C, 2)
}

// TestCancelledCallsReachTheCallWatchersOnly: a CallCancelled event names
// no action, so it wakes no waiter and reaches no stream (the console's
// would load an action of id ""); every call watcher hears it until its
// watch ends.
func TestCancelledCallsReachTheCallWatchersOnly(t *testing.T) {
	t.Parallel()
	b := New()
	w, stopW := b.Wait("")
	defer stopW()
	anyAction, stopAny := b.WaitAny()
	defer stopAny()
	s, stopS := b.Subscribe(10)
	defer stopS()
	var heard []Call
	unwatch := b.WatchCalls(func(c Call) { heard = append(heard, c) })
	call := Call{Agent: "coder", Session: "s1", ID: []byte(`7`)}
	b.Publish(Event{Kind: CallCancelled, Call: &call})
	assert.Equal(t, []Call{call}, heard)
	assert.False(t, closed(w))
	assert.False(t, closed(anyAction))
	assert.Empty(t, s.C)
	unwatch()
	b.Publish(Event{Kind: CallCancelled, Call: &call})
	assert.Len(t, heard, 1, "an ended watch hears nothing more")
}
