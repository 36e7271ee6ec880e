package web

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/airlockhq/airlock/internal/eventbus"
	"github.com/airlockhq/airlock/internal/hitl"
)

// Stream message types (DESIGN.md "HTTP API": GET /api/v1/stream).
const (
	msgCreated = "action.created"
	msgUpdated = "action.updated"
	msgResync  = "resync"
)

// streamMessage is one websocket message.
type streamMessage struct {
	Type   string       `json:"type"`
	Action *hitl.Action `json:"action,omitempty"`
}

// frame is one message encoded for both kinds of viewer: reviewers see the
// confirmation phrase of a pending action, auditors never do.
type frame struct {
	reviewer []byte
	other    []byte
}

func (f *frame) bytes(reviewer bool) []byte {
	if reviewer {
		return f.reviewer
	}
	return f.other
}

// actionLoader loads a batch of actions by ID (store.Store.ActionsByID).
type actionLoader interface {
	ActionsByID(ctx context.Context, ids []string) (map[string]*hitl.Action, error)
}

// hub fans changes out to the websocket clients of this instance. It holds
// one bus subscription for the whole instance, loads each changed action
// once (a batch of changes in one query) and hands the encoded message to
// every client's bounded queue without waiting: a client whose queue is
// full is dropped and reconnects, the others never wait for it.
//
// Per action, every client receives messages in strictly increasing
// version order, action.created first. Changes can reach an instance out of
// order (a decision made on this instance is on the local bus before the
// submit's NOTIFY from another instance arrives), so the hub remembers the
// last version it sent of each recent action: a change it already sent is
// skipped, and the first message about an action that went through pending
// is always action.created.
type hub struct {
	loader    actionLoader
	bus       *eventbus.Bus
	log       *slog.Logger
	clientBuf int
	now       func() time.Time

	mu      sync.Mutex
	clients map[*streamClient]struct{}
	closed  bool

	// sent is the last version sent per action; only the run goroutine
	// touches it.
	sent map[string]sentVersion
	// sub is the hub's bus subscription, made when the hub is created so
	// that no change is missed between construction and run.
	sub   *eventbus.Stream
	unsub func()
}

type sentVersion struct {
	version int
	at      time.Time
}

// Hub tuning.
const (
	// busBuffer is the hub's subscription buffer: changes that arrive while
	// a batch is loading wait here.
	busBuffer = 1 << 16
	// maxBatch bounds the actions loaded in one query.
	maxBatch = 512
	// rememberFor is how long the hub remembers what it sent of an action;
	// changes of one action reach every instance within milliseconds.
	rememberFor = 10 * time.Minute
)

// streamClient is one websocket connection's queue.
type streamClient struct {
	reviewer bool
	// user is the username of a user's stream ("" for other tokens).
	user string
	send chan *frame
	// recheck is signalled when the client's user changed (or changes may
	// have been missed): the connection checks its session again.
	recheck chan struct{}
	// dropped is closed when the client fell behind (or the hub stopped).
	dropped  chan struct{}
	dropOnce sync.Once
	// shutdown is set when the hub stopped (the server is going down).
	shutdown bool
}

func (c *streamClient) drop() { c.dropOnce.Do(func() { close(c.dropped) }) }

func newHub(loader actionLoader, bus *eventbus.Bus, log *slog.Logger, clientBuf int) *hub {
	h := &hub{loader: loader, bus: bus, log: log, clientBuf: clientBuf, now: time.Now,
		clients: map[*streamClient]struct{}{}, sent: map[string]sentVersion{}}
	h.sub, h.unsub = bus.Subscribe(busBuffer)
	return h
}

// add registers a client of user (empty for an agent's or worker's
// token); nil when the hub has stopped.
func (h *hub) add(reviewer bool, user string) *streamClient {
	c := &streamClient{reviewer: reviewer, user: user, send: make(chan *frame, h.clientBuf),
		recheck: make(chan struct{}, 1), dropped: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.clients[c] = struct{}{}
	return c
}

// remove unregisters a client.
func (h *hub) remove(c *streamClient) {
	h.mu.Lock()
	delete(h.clients, c)
	h.mu.Unlock()
}

func (h *hub) clientCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// broadcast queues f for every client, dropping those whose queue is full.
func (h *hub) broadcast(f *frame) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		select {
		case c.send <- f:
		default:
			delete(h.clients, c)
			c.drop()
		}
	}
}

// run feeds the clients until ctx ends, then drops them all.
func (h *hub) run(ctx context.Context) {
	sub, unsubscribe := h.sub, h.unsub
	defer func() { unsubscribe() }()
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	defer h.stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.Overflowed():
			// The hub itself fell behind: start over and tell every client
			// to reload what it shows.
			h.log.Warn("console stream fell behind; clients resync")
			unsubscribe()
			sub, unsubscribe = h.bus.Subscribe(busBuffer)
			h.broadcast(resyncFrame)
		case ev := <-sub.C:
			batch := []eventbus.Event{ev}
		more:
			for len(batch) < maxBatch {
				select {
				case ev := <-sub.C:
					batch = append(batch, ev)
				default:
					break more
				}
			}
			h.handle(ctx, batch)
		case <-sweep.C:
			h.forget()
		}
	}
}

// stop drops every client: the server is shutting down.
func (h *hub) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for c := range h.clients {
		c.shutdown = true
		c.drop()
		delete(h.clients, c)
	}
}

var resyncFrame = func() *frame {
	b, _ := json.Marshal(streamMessage{Type: msgResync})
	return &frame{reviewer: b, other: b}
}()

// recheck asks the clients of user (every client when all) to check their
// session again, without waiting for any of them.
func (h *hub) recheck(user string, all bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		if all || c.user == user {
			select {
			case c.recheck <- struct{}{}:
			default: // one is already pending
			}
		}
	}
}

// handle loads the actions of a batch of changes and broadcasts them.
func (h *hub) handle(ctx context.Context, batch []eventbus.Event) {
	actions := batch[:0:0]
	for _, ev := range batch {
		switch ev.Kind {
		case eventbus.UserChanged:
			h.recheck(ev.User, ev.User == "") // "": a token was revoked; whose is not known
			continue
		case eventbus.Resync:
			h.recheck("", true) // a user change may be among what was missed
		}
		actions = append(actions, ev)
	}
	batch = actions
	if len(batch) == 0 || h.clientCount() == 0 {
		return // nobody listens: a client that connects later loads the queue itself
	}
	ids := make([]string, 0, len(batch))
	seen := make(map[string]bool, len(batch))
	for _, ev := range batch {
		if ev.Kind != eventbus.Resync && !seen[ev.ActionID] {
			seen[ev.ActionID] = true
			ids = append(ids, ev.ActionID)
		}
	}
	loaded, err := h.loader.ActionsByID(ctx, ids)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Error("console stream: loading actions", "err", err)
			h.broadcast(resyncFrame) // what they show may now be stale
		}
		return
	}
	now := h.now()
	for _, ev := range batch {
		if ev.Kind == eventbus.Resync {
			h.broadcast(resyncFrame)
			continue
		}
		a := loaded[ev.ActionID]
		if a == nil {
			continue
		}
		for _, f := range h.frames(ev.Kind, a, now) {
			h.broadcast(f)
		}
	}
}

// frames decides what to send about a (as loaded after a change of kind).
func (h *hub) frames(kind eventbus.Kind, a *hitl.Action, now time.Time) []*frame {
	last, known := h.sent[a.ID]
	if known && a.Version <= last.version {
		return nil // already sent this version (or a newer one)
	}
	h.sent[a.ID] = sentVersion{version: a.Version, at: now}
	// An action that was held for review (it has an expiry) is announced
	// with action.created before any update, whichever change reaches this
	// instance first; older ones only ever get updates.
	wasPending := a.ExpiresAt != nil && now.Sub(a.CreatedAt) < rememberFor
	if !known && (kind == eventbus.Created || wasPending) {
		out := []*frame{encodeFrame(msgCreated, a)}
		if a.Version > 1 {
			out = append(out, encodeFrame(msgUpdated, a))
		}
		return out
	}
	return []*frame{encodeFrame(msgUpdated, a)}
}

// forget drops what was sent of actions not changed for rememberFor.
func (h *hub) forget() {
	cutoff := h.now().Add(-rememberFor)
	for id, s := range h.sent {
		if s.at.Before(cutoff) {
			delete(h.sent, id)
		}
	}
}

func encodeFrame(typ string, a *hitl.Action) *frame {
	rv := a.ForReviewer()
	other := a.ForAuditor()
	other.ConfirmationPhrase = ""
	r, err1 := json.Marshal(streamMessage{Type: typ, Action: &rv})
	o, err2 := json.Marshal(streamMessage{Type: typ, Action: &other})
	if err1 != nil || err2 != nil {
		return resyncFrame // cannot happen for a stored action; fail towards reloading
	}
	return &frame{reviewer: r, other: o}
}
