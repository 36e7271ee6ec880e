package store_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/eventbus"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/testdb"
)

// next returns the next event on s, failing after a while.
func nextEvent(t *testing.T, s *eventbus.Stream) eventbus.Event {
	t.Helper()
	select {
	case ev := <-s.C:
		return ev
	case <-time.After(20 * time.Second):
		t.Fatal("no event")
	}
	return eventbus.Event{}
}

// notifierSetup returns a context that ends with the test, a pool on a
// database of its own and a quiet logger.
func notifierSetup(t *testing.T) (context.Context, *pgxpool.Pool, *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pool, err := pgxpool.New(ctx, testdb.URL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil))
}

// TestNotifierCarriesChangesBetweenInstances: what one instance publishes
// reaches the other's bus with its kind and action ID; changes it could not
// send turn into a resync on the other side.
func TestNotifierCarriesChangesBetweenInstances(t *testing.T) {
	t.Parallel()
	ctx, pool, log := notifierSetup(t)

	busB := eventbus.New()
	sub, unsub := busB.Subscribe(1 << 18)
	defer unsub()
	b := store.NewNotifier(pool, busB, log)
	go b.Run(ctx)
	require.Equal(t, eventbus.Resync, nextEvent(t, sub).Kind, "B resyncs when its LISTEN starts")

	busA := eventbus.New()
	a := store.NewNotifier(pool, busA, log)
	// Before A runs, more changes than its queue holds: some are lost.
	created := uuid.NewString()
	a.Publish(eventbus.Event{Kind: eventbus.Created, ActionID: created})
	for range 70_000 {
		a.Publish(eventbus.Event{Kind: eventbus.Updated, ActionID: uuid.NewString()})
	}
	go a.Run(ctx)

	first := nextEvent(t, sub)
	assert.Equal(t, eventbus.Event{Kind: eventbus.Created, ActionID: created}, first, "kind and ID cross over, in order")
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-sub.C:
			if ev.Kind == eventbus.Resync {
				return // B was told it may have missed changes
			}
		case <-deadline:
			t.Fatal("the lost changes never caused a resync on the other instance")
		}
	}
}

// TestNotifierCarriesCancelledCalls: an MCP client's cancelled call
// crosses to the other instances' call watchers with its names exactly,
// whatever bytes they hold (the payload's separators included); one whose
// names would not fit in a NOTIFY is not sent, and what follows it is.
func TestNotifierCarriesCancelledCalls(t *testing.T) {
	t.Parallel()
	ctx, pool, log := notifierSetup(t)

	busB := eventbus.New()
	heard := make(chan eventbus.Call, 10)
	defer busB.WatchCalls(func(c eventbus.Call) { heard <- c })()
	sub, unsub := busB.Subscribe(16)
	defer unsub()
	b := store.NewNotifier(pool, busB, log)
	go b.Run(ctx)
	require.Equal(t, eventbus.Resync, nextEvent(t, sub).Kind, "B listens")

	a := store.NewNotifier(pool, eventbus.New(), log)
	go a.Run(ctx)
	odd := eventbus.Call{Agent: "coder", Session: "s|1,c:2.3", ID: []byte(`"a,b:c.d|\u0000é"`)}
	tooLong := eventbus.Call{Agent: "coder", Session: "s1", ID: []byte(`"` + strings.Repeat("x", 1000) + `"`)}
	last := eventbus.Call{Agent: "coder", Session: "", ID: []byte(`8`)}
	for _, c := range []eventbus.Call{odd, tooLong, last} {
		a.Publish(eventbus.Event{Kind: eventbus.CallCancelled, Call: &c})
	}
	var got []eventbus.Call
	for len(got) < 2 {
		select {
		case c := <-heard:
			got = append(got, c)
		case <-time.After(20 * time.Second):
			t.Fatal("no cancelled call crossed over")
		}
	}
	assert.Equal(t, []eventbus.Call{odd, last}, got)
}
