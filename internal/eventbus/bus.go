// Package eventbus is the in-process fan-out of action changes. Long-polling
// agents wait on one action; console streams watch every change. The bus is
// fed by the instance's single LISTEN connection (changes made by any server
// instance) and directly by local commits, so waiters never poll Postgres.
package eventbus

import (
	"maps"
	"slices"
	"sync"
)

// Kind says what happened to an action.
type Kind string

// Change kinds, matching the websocket event types.
const (
	Created Kind = "action.created"
	Updated Kind = "action.updated"
	// Resync tells subscribers that changes may have been missed (the LISTEN
	// connection was re-established) and they must reload what they show.
	Resync Kind = "resync"
	// UserChanged says a user was disabled, deleted or changed: open
	// streams of that user check their session again at once. It carries
	// User, not ActionID; an empty User means every open stream (a token
	// was revoked by id).
	UserChanged Kind = "user.changed"
	// CallCancelled says an MCP client cancelled a tool call it sent
	// (notifications/cancelled) on an instance that may not be the one
	// holding the call for its decision. It carries Call, not ActionID,
	// and reaches the call watchers only (WatchCalls).
	CallCancelled Kind = "call.cancelled"
)

// Event is one change. It carries only the action ID: receivers load the
// row, so an event never holds stale or unredacted data.
type Event struct {
	Kind     Kind
	ActionID string
	// User is the username of a UserChanged event ("": every user).
	User string
	// Call is the cancelled call of a CallCancelled event (a pointer: the
	// queues of events stay as small as they were).
	Call *Call
}

// Call names a tool call of an MCP session: the agent that sent it, its
// Mcp-Session-Id, and its JSON-RPC id as the client wrote it.
type Call struct {
	Agent   string
	Session string
	ID      []byte
}

// Bus delivers events to subscribers without ever blocking the publisher.
type Bus struct {
	mu      sync.Mutex
	waiters map[string]map[*waiter]struct{}
	any     map[*waiter]struct{}
	streams map[*Stream]struct{}
	calls   map[*callWatcher]struct{}
}

type callWatcher struct{ fn func(Call) }

type waiter struct{ ch chan struct{} }

// New returns an empty bus.
func New() *Bus {
	return &Bus{waiters: map[string]map[*waiter]struct{}{}, any: map[*waiter]struct{}{}, streams: map[*Stream]struct{}{},
		calls: map[*callWatcher]struct{}{}}
}

// Wait returns a channel closed at the next event for actionID (or the next
// Resync), and a function to call when no longer waiting.
func (b *Bus) Wait(actionID string) (<-chan struct{}, func()) {
	w := &waiter{ch: make(chan struct{})}
	b.mu.Lock()
	set := b.waiters[actionID]
	if set == nil {
		set = map[*waiter]struct{}{}
		b.waiters[actionID] = set
	}
	set[w] = struct{}{}
	b.mu.Unlock()
	return w.ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if set, ok := b.waiters[actionID]; ok {
			delete(set, w)
			if len(set) == 0 {
				delete(b.waiters, actionID)
			}
		}
	}
}

// WaitAny returns a channel closed at the next event of any action (workers
// waiting for a lease use it), and a function to call when no longer
// waiting.
func (b *Bus) WaitAny() (<-chan struct{}, func()) {
	w := &waiter{ch: make(chan struct{})}
	b.mu.Lock()
	b.any[w] = struct{}{}
	b.mu.Unlock()
	return w.ch, func() {
		b.mu.Lock()
		delete(b.any, w)
		b.mu.Unlock()
	}
}

// Stream is a subscription to every event, with a bounded buffer. A stream
// that falls behind is marked overflowed and receives nothing more; its
// owner drops the client, which reconnects and resyncs.
type Stream struct {
	C          chan Event
	overflowed chan struct{}
	once       sync.Once
}

// Overflowed is closed when the stream missed an event.
func (s *Stream) Overflowed() <-chan struct{} { return s.overflowed }

// Subscribe returns a stream of all events buffered up to size, and a
// function that ends the subscription.
func (b *Bus) Subscribe(size int) (*Stream, func()) {
	s := &Stream{C: make(chan Event, size), overflowed: make(chan struct{})}
	b.mu.Lock()
	b.streams[s] = struct{}{}
	b.mu.Unlock()
	return s, func() {
		b.mu.Lock()
		delete(b.streams, s)
		b.mu.Unlock()
	}
}

// WatchCalls calls fn with the Call of every CallCancelled event, on the
// publisher's goroutine: fn must not block. The function returned ends
// the watch.
func (b *Bus) WatchCalls(fn func(Call)) func() {
	w := &callWatcher{fn: fn}
	b.mu.Lock()
	b.calls[w] = struct{}{}
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		delete(b.calls, w)
		b.mu.Unlock()
	}
}

// Publish delivers ev to the waiters of its action (or all waiters for
// Resync) and to every stream; a CallCancelled event to the call watchers
// only.
func (b *Bus) Publish(ev Event) {
	if ev.Kind == CallCancelled {
		if ev.Call == nil {
			return
		}
		b.mu.Lock()
		watchers := slices.Collect(maps.Keys(b.calls))
		b.mu.Unlock()
		for _, w := range watchers {
			w.fn(*ev.Call)
		}
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev.Kind {
	case UserChanged:
		// No action changed: nobody waiting for one is woken.
	case Resync:
		for id, set := range b.waiters {
			for w := range set {
				close(w.ch)
			}
			delete(b.waiters, id)
		}
	default:
		if set, ok := b.waiters[ev.ActionID]; ok {
			for w := range set {
				close(w.ch)
			}
			delete(b.waiters, ev.ActionID)
		}
	}
	if ev.Kind != UserChanged {
		for w := range b.any {
			close(w.ch)
			delete(b.any, w)
		}
	}
	for s := range b.streams {
		select {
		case s.C <- ev:
		default:
			s.once.Do(func() { close(s.overflowed) })
			delete(b.streams, s)
		}
	}
}
