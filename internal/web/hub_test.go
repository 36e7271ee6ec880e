package web

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/eventbus"
	"github.com/airlockhq/airlock/internal/hitl"
)

// fakeLoader serves actions from a map the test changes.
type fakeLoader struct {
	mu      sync.Mutex
	actions map[string]*hitl.Action
}

func (f *fakeLoader) set(a hitl.Action) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions[a.ID] = &a
}

func (f *fakeLoader) ActionsByID(_ context.Context, ids []string) (map[string]*hitl.Action, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]*hitl.Action{}
	for _, id := range ids {
		if a, ok := f.actions[id]; ok {
			cp := *a
			out[id] = &cp
		}
	}
	return out, nil
}

type received struct {
	Type   string       `json:"type"`
	Action *hitl.Action `json:"action"`
}

func hubSetup(t *testing.T, clientBuf int) (*hub, *fakeLoader, *eventbus.Bus) {
	t.Helper()
	loader := &fakeLoader{actions: map[string]*hitl.Action{}}
	bus := eventbus.New()
	h := newHub(loader, bus, slog.New(slog.NewTextHandler(io.Discard, nil)), clientBuf)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h, loader, bus
}

func next(t *testing.T, c *streamClient) received {
	t.Helper()
	select {
	case f := <-c.send:
		var m received
		require.NoError(t, json.Unmarshal(f.bytes(c.reviewer), &m))
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no message")
	}
	return received{}
}

func pendingAction(id string, version int, status hitl.Status) hitl.Action {
	now := time.Now().UTC()
	exp := now.Add(time.Hour)
	return hitl.Action{ID: id, Tool: "email.send", Status: status, Version: version, Phrase: "email.send 7KQ2",
		CreatedAt: now, UpdatedAt: now, ExpiresAt: &exp, RequiredApprovals: 1}
}

func TestHubOrdersMessagesPerAction(t *testing.T) {
	t.Parallel()
	h, loader, bus := hubSetup(t, 64)
	reviewer := h.add(true, "")
	auditor := h.add(false, "")

	t.Run("created then updated, phrase only for reviewers", func(t *testing.T) {
		loader.set(pendingAction("a1", 1, hitl.StatusPending))
		bus.Publish(eventbus.Event{Kind: eventbus.Created, ActionID: "a1"})
		m := next(t, reviewer)
		assert.Equal(t, msgCreated, m.Type)
		assert.Equal(t, "email.send 7KQ2", m.Action.ConfirmationPhrase)
		m = next(t, auditor)
		assert.Equal(t, msgCreated, m.Type)
		assert.Empty(t, m.Action.ConfirmationPhrase, "auditors never see the phrase")

		loader.set(pendingAction("a1", 2, hitl.StatusApproved))
		bus.Publish(eventbus.Event{Kind: eventbus.Updated, ActionID: "a1"})
		m = next(t, reviewer)
		assert.Equal(t, msgUpdated, m.Type)
		assert.Equal(t, hitl.StatusApproved, m.Action.Status)
		next(t, auditor)
	})

	t.Run("a decision that arrives before the submit is announced as created first", func(t *testing.T) {
		loader.set(pendingAction("a2", 2, hitl.StatusDenied))
		bus.Publish(eventbus.Event{Kind: eventbus.Updated, ActionID: "a2"})
		bus.Publish(eventbus.Event{Kind: eventbus.Created, ActionID: "a2"}) // the late NOTIFY: skipped
		m := next(t, reviewer)
		assert.Equal(t, msgCreated, m.Type)
		m = next(t, reviewer)
		assert.Equal(t, msgUpdated, m.Type)
		assert.Equal(t, hitl.StatusDenied, m.Action.Status)

		loader.set(pendingAction("a3", 1, hitl.StatusPending))
		bus.Publish(eventbus.Event{Kind: eventbus.Created, ActionID: "a3"})
		m = next(t, reviewer)
		assert.Equal(t, "a3", m.Action.ID, "nothing more was sent about a2")
		// The auditor got the same three; take them so the next subtest
		// starts from an empty queue (the hub delivers asynchronously).
		for _, want := range []string{"a2", "a2", "a3"} {
			assert.Equal(t, want, next(t, auditor).Action.ID)
		}
	})

	t.Run("resync reaches every client", func(t *testing.T) {
		bus.Publish(eventbus.Event{Kind: eventbus.Resync})
		assert.Equal(t, msgResync, next(t, reviewer).Type)
		assert.Equal(t, msgResync, next(t, auditor).Type)
	})
}

func TestHubDropsAClientThatFallsBehind(t *testing.T) {
	t.Parallel()
	h, loader, bus := hubSetup(t, 2)
	slow := h.add(true, "")
	fast := h.add(true, "")
	for i := range 5 {
		id := "s" + string(rune('a'+i))
		loader.set(pendingAction(id, 1, hitl.StatusPending))
		bus.Publish(eventbus.Event{Kind: eventbus.Created, ActionID: id})
		assert.Equal(t, id, next(t, fast).Action.ID, "the fast client gets every message at once")
	}
	select {
	case <-slow.dropped:
	case <-time.After(5 * time.Second):
		t.Fatal("the client that did not read was not dropped")
	}
	assert.Equal(t, 1, h.clientCount())
}
