package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/airlockhq/airlock/internal/eventbus"
)

// notifyChannel is the Postgres channel action changes travel on.
const notifyChannel = "airlock_actions"

// maxPayload keeps NOTIFY payloads under Postgres's 8000-byte limit.
const maxPayload = 7000

// Notifier carries action changes between server instances: it coalesces
// this instance's changes into few NOTIFYs (payload: instance id and action
// IDs only) and feeds other instances' changes into the local bus from one
// LISTEN connection.
//
// A change that cannot be sent (queue full, NOTIFY failed) is not retried
// by itself: the next NOTIFY carries a resync marker instead, and every
// other instance publishes eventbus.Resync so that its waiters and console
// streams reload what they show.
type Notifier struct {
	pool     *pgxpool.Pool
	bus      *eventbus.Bus
	log      *slog.Logger
	instance string
	queue    chan eventbus.Event
	// lost is set when a change could not be sent to the other instances.
	lost atomic.Bool
}

// resyncItem is the payload item that tells other instances to resync.
const resyncItem = "r:,"

// lostRetry is how often a pending resync marker is sent while no other
// change comes along to carry it.
const lostRetry = 250 * time.Millisecond

// NewNotifier returns a Notifier; call Run to start it.
func NewNotifier(pool *pgxpool.Pool, bus *eventbus.Bus, log *slog.Logger) *Notifier {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &Notifier{pool: pool, bus: bus, log: log, instance: hex.EncodeToString(b), queue: make(chan eventbus.Event, 65536)}
}

// maxCallItem bounds the payload item of a CallCancelled event, so that
// a payload (items up to maxPayload, then one more) stays under
// Postgres's limit. A longer one is not sent: its call stays held until
// it is decided or its client goes away.
const maxCallItem = 900

// Publish queues ev for other instances. It never blocks: if the queue is
// full the event is dropped and other instances resync.
func (n *Notifier) Publish(ev eventbus.Event) {
	if ev.Kind == eventbus.CallCancelled && len(encodeEvent(ev)) > maxCallItem {
		n.log.Warn("notify: a cancelled call's names are too long to tell other instances", "agent", ev.Call.Agent)
		return
	}
	select {
	case n.queue <- ev:
	default:
		n.lost.Store(true)
		n.log.Warn("notify queue full; dropping event, other instances will resync", "action", ev.ActionID, "user", ev.User)
	}
}

// Run publishes and listens until ctx ends.
func (n *Notifier) Run(ctx context.Context) {
	go n.listen(ctx)
	n.publish(ctx)
}

// publish sends queued events, batching whatever arrived within a
// millisecond of the first into one NOTIFY.
func (n *Notifier) publish(ctx context.Context) {
	var sb strings.Builder
	flush := func() {
		if n.lost.Swap(false) {
			sb.WriteString(resyncItem)
		}
		if sb.Len() == 0 {
			return
		}
		payload := n.instance + "|" + sb.String()
		sb.Reset()
		if _, err := n.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, payload); err != nil && ctx.Err() == nil {
			n.lost.Store(true)
			n.log.Error("notify failed; other instances will resync", "err", err)
		}
	}
	retry := time.NewTicker(lostRetry)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-retry.C:
			if n.lost.Load() {
				flush()
			}
		case ev := <-n.queue:
			sb.WriteString(encodeEvent(ev))
			deadline := time.After(time.Millisecond)
		batch:
			for sb.Len() < maxPayload {
				select {
				case ev := <-n.queue:
					sb.WriteString(encodeEvent(ev))
				case <-deadline:
					break batch
				}
			}
			flush()
		}
	}
}

// encodeEvent is one payload item: "c:<id>," (created), "u:<id>,"
// (updated), "s:<username>," (a user's sessions must be checked; a
// username holds no ',' or ':') or "m:<agent>.<session>.<call id>,"
// (a cancelled MCP call, each name in unpadded base64url).
func encodeEvent(ev eventbus.Event) string {
	switch ev.Kind {
	case eventbus.Created:
		return "c:" + ev.ActionID + ","
	case eventbus.UserChanged:
		return "s:" + ev.User + ","
	case eventbus.CallCancelled:
		if ev.Call == nil {
			return ""
		}
		b64 := base64.RawURLEncoding
		return "m:" + b64.EncodeToString([]byte(ev.Call.Agent)) + "." + b64.EncodeToString([]byte(ev.Call.Session)) +
			"." + b64.EncodeToString(ev.Call.ID) + ","
	}
	return "u:" + ev.ActionID + ","
}

// decodeCall reads the names of an "m:" item: nil for any item
// encodeEvent does not write.
func decodeCall(item string) *eventbus.Call {
	parts := strings.Split(item, ".")
	if len(parts) != 3 {
		return nil
	}
	var names [3][]byte
	for i, p := range parts {
		b, err := base64.RawURLEncoding.Strict().DecodeString(p)
		if err != nil {
			return nil
		}
		names[i] = b
	}
	if len(names[2]) == 0 {
		return nil
	}
	return &eventbus.Call{Agent: string(names[0]), Session: string(names[1]), ID: names[2]}
}

// listen holds one LISTEN connection, reconnecting on failure. After every
// (re)connect it publishes Resync, since changes may have been missed.
func (n *Notifier) listen(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := n.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		n.log.Warn("listen connection lost; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (n *Notifier) listenOnce(ctx context.Context) error {
	conn, err := n.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection's session state (LISTEN) must not return to the pool.
	pgc := conn.Hijack()
	defer pgc.Close(context.WithoutCancel(ctx))
	if _, err := pgc.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	n.bus.Publish(eventbus.Event{Kind: eventbus.Resync})
	for {
		note, err := pgc.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		from, ids, ok := strings.Cut(note.Payload, "|")
		if !ok || from == n.instance {
			continue // our own change: the local bus already has it
		}
		for item := range strings.SplitSeq(ids, ",") {
			kind, id, ok := strings.Cut(item, ":")
			if !ok {
				continue
			}
			ev := eventbus.Event{Kind: eventbus.Updated, ActionID: id}
			switch kind {
			case "c":
				ev.Kind = eventbus.Created
			case "r":
				// The sender lost changes: everything may be stale.
				ev = eventbus.Event{Kind: eventbus.Resync}
			case "s":
				ev = eventbus.Event{Kind: eventbus.UserChanged, User: id}
			case "m":
				c := decodeCall(id)
				if c == nil {
					continue
				}
				ev = eventbus.Event{Kind: eventbus.CallCancelled, Call: c}
			}
			n.bus.Publish(ev)
		}
	}
}
