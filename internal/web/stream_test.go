package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// TestStreamAcrossInstances: two instances on one database, 50 websocket
// clients split over both, 200 actions submitted to instance one and
// decided on instance two. Every client receives every action.created and
// every decision's action.updated, in order per action, nothing lost, while
// a client that never reads holds nobody up.
func TestStreamAcrossInstances(t *testing.T) {
	t.Parallel()
	const clients, actions = 50, 200
	one := apptest.Start(t)
	two := apptest.Start(t, apptest.Options{DatabaseURL: one.DBURL, DataDir: one.Config.DataDir})
	ctx := one.Ctx()
	agent := one.Agent("mailer", askPolicy)
	rita := one.Reviewer("rita")
	decider := client.New(two.URL, rita.Token()) // a session of instance one, used on instance two

	readers := make([]*streamReader, clients)
	for i := range readers {
		base := one.URL
		if i%2 == 1 {
			base = two.URL
		}
		conn, _, err := dial(ctx, base, bearer(rita.Token()))
		require.NoError(t, err)
		t.Cleanup(func() { conn.CloseNow() })
		readers[i] = readStream(ctx, conn)
	}
	// A client on each instance that never reads.
	for _, base := range []string{one.URL, two.URL} {
		stalled, _, err := dial(ctx, base, bearer(rita.Token()))
		require.NoError(t, err)
		t.Cleanup(func() { stalled.CloseNow() })
	}

	// Warm up: every client is registered once it has seen a message.
	warm := map[string]bool{}
	waitFor(t, 30*time.Second, "every client to be subscribed", func() bool {
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"warm-up": true}})
		require.NoError(t, err)
		warm[a.ID] = true
		time.Sleep(100 * time.Millisecond)
		for _, r := range readers {
			if len(r.snapshot()) == 0 {
				return false
			}
		}
		return true
	})

	// Submit on one, decide on two, concurrently.
	var (
		mu        sync.Mutex
		submitted = map[string]time.Time{}
		final     = map[string]string{}
		toDecide  = make(chan string, actions)
		wg        sync.WaitGroup
	)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < actions; i += 8 {
				start := time.Now()
				a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "email.send", Args: map[string]any{"n": i, "to": fmt.Sprintf("user%d@example.com", i)}})
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				submitted[a.ID] = start
				mu.Unlock()
				toDecide <- a.ID
			}
		}()
	}
	var deciders sync.WaitGroup
	for range 4 {
		deciders.Add(1)
		go func() {
			defer deciders.Done()
			for id := range toDecide {
				full, err := decider.Get(ctx, id)
				if !assert.NoError(t, err) {
					continue
				}
				status := "denied"
				num, _ := full.Args["n"].(json.Number)
				if n, _ := num.Int64(); n%2 == 0 {
					_, err = decider.Approve(ctx, id, full.ConfirmationPhrase, "once")
					status = "approved"
				} else {
					_, err = decider.Deny(ctx, id, "not now")
				}
				assert.NoError(t, err)
				mu.Lock()
				final[id] = status
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(toDecide)
	deciders.Wait()
	require.Len(t, final, actions)

	complete := func(r *streamReader) bool {
		done := map[string]bool{}
		for _, m := range r.snapshot() {
			if m.Action != nil && m.Type == "action.updated" && final[m.Action.ID] == m.Action.Status {
				done[m.Action.ID] = true
			}
		}
		return len(done) == actions
	}
	waitFor(t, 60*time.Second, "every client to receive every decision", func() bool {
		for _, r := range readers {
			if !complete(r) {
				return false
			}
		}
		return true
	})

	var latencies []time.Duration
	for i, r := range readers {
		perAction := map[string][]message{}
		for _, m := range r.snapshot() {
			require.NotEqual(t, "resync", m.Type, "client %d was told to resync: something was lost", i)
			if m.Action != nil && !warm[m.Action.ID] {
				perAction[m.Action.ID] = append(perAction[m.Action.ID], m)
			}
		}
		require.Len(t, perAction, actions, "client %d", i)
		for id, msgs := range perAction {
			require.Equal(t, "action.created", msgs[0].Type, "client %d, action %s: created comes first", i, id)
			latencies = append(latencies, msgs[0].at.Sub(submitted[id]))
			last := msgs[len(msgs)-1]
			require.Equal(t, "action.updated", last.Type, "client %d, action %s", i, id)
			require.Equal(t, final[id], last.Action.Status, "client %d, action %s", i, id)
			for j := 1; j < len(msgs); j++ {
				require.Equal(t, "action.updated", msgs[j].Type, "client %d, action %s: one created only", i, id)
				require.False(t, msgs[j].Action.UpdatedAt.Before(msgs[j-1].Action.UpdatedAt), "client %d, action %s: in order", i, id)
				require.False(t, msgs[j-1].Action.Status != "pending" && msgs[j].Action.Status == "pending", "client %d, action %s: never back to pending", i, id)
			}
		}
	}
	slices.Sort(latencies)
	p50, p99 := latencies[len(latencies)/2], latencies[len(latencies)*99/100]
	t.Logf("submit → action.created on %d clients × %d actions: p50 %s, p99 %s, max %s", clients, actions, p50, p99, latencies[len(latencies)-1])
	assert.Less(t, p99, 5*time.Second, "the stalled clients held the others up")
}

// TestStalledClientIsDropped: a client that stops reading stops answering
// pings; the server drops it (ping timeout) while the client next to it
// receives everything. (A queue that overflows is TestHubDropsAClientThat
// FallsBehind.)
func TestStalledClientIsDropped(t *testing.T) {
	t.Parallel()
	st := newStack(t, 64, time.Second, 200*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stalled, _, err := dial(ctx, st.url, bearer(st.token))
	require.NoError(t, err)
	defer stalled.CloseNow()
	conn, _, err := dial(ctx, st.url, bearer(st.token))
	require.NoError(t, err)
	defer conn.CloseNow()
	good := readStream(ctx, conn)
	time.Sleep(200 * time.Millisecond) // both registered

	const n = 40
	for i := range n {
		st.submit(t, ctx, i)
	}
	waitFor(t, 20*time.Second, "the reading client to get every action", func() bool {
		select {
		case <-good.done:
			t.Fatalf("the reading client was dropped: %v", good.err)
		default:
		}
		return len(good.snapshot()) >= n
	})

	// Still not reading well past a ping and its timeout, the stalled client
	// then finds its connection closed.
	time.Sleep(3 * time.Second)
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	var readErr error
	for readErr == nil {
		_, _, readErr = stalled.Read(rctx)
	}
	require.NoError(t, rctx.Err(), "the stalled client was never dropped")

	select {
	case <-good.done:
		t.Fatalf("the reading client was dropped too: %v", good.err)
	default:
	}
}
