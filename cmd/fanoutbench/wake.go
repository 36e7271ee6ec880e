package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/airlockhq/airlock/client"
)

// The wake-up benchmark (issue 14's "decision → waiting agent"): waiters
// agents, each with one pending action, long-poll it on instance 2
// (GET /api/v1/actions/{id}?wait=60s); a reviewer on instance 1 approves
// them over HTTP one after another, oldest first. The latency is from the
// start of the approve request to the agent's poll returning with the
// decision. An agent whose action was decided submits the next one and
// waits again, so that waiters agents are waiting throughout.

// queued is a pending action whose agent is (about to be) long-polling it.
type queued struct {
	id string
	at time.Time // when its agent started waiting
}

// wakeResult is the wake-up run's figures.
type wakeResult struct {
	latencies []time.Duration // sorted
	raced     int             // approvals that reached the server before the poll (not counted)
}

// queueMargin is how long an action waits in the queue at least before it
// is approved, so that its agent's poll is registered on instance 2 first
// (with waiters agents queued it waits far longer anyway).
const queueMargin = 500 * time.Millisecond

func runWake(ctx context.Context, admin, reviewer *client.Client, url2 string, waiters int, d time.Duration) (wakeResult, error) {
	var res wakeResult
	policy := map[string]any{"rules": []map[string]any{
		{"id": "ask", "tool": "deploy.release", "effect": "approve", "timeout": "1h"}}}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: waiters * 2, MaxIdleConnsPerHost: waiters * 2}}
	agents := make([]*client.Client, waiters)
	for i := range agents {
		id := fmt.Sprintf("waiter-%03d", i)
		if err := admin.CreateAgent(ctx, id, id); err != nil {
			return res, err
		}
		if _, err := admin.PutAgentPolicy(ctx, id, policy); err != nil {
			return res, err
		}
		tok, err := admin.IssueAgentToken(ctx, id, 0)
		if err != nil {
			return res, err
		}
		agents[i] = client.New(url2, tok.Token).WithHTTPClient(hc)
	}

	var mu sync.Mutex
	approveStart := map[string]time.Time{}
	pollStart := map[string]time.Time{}
	returned := map[string]time.Time{}
	queue := make(chan queued, waiters*2)
	agentCtx, stopAgents := context.WithCancel(ctx)
	defer stopAgents()
	errc := make(chan error, waiters)
	var wg sync.WaitGroup
	for w, agent := range agents {
		wg.Go(func() {
			for n := 0; agentCtx.Err() == nil; n++ {
				a, err := agent.Submit(agentCtx, client.SubmitRequest{Tool: "deploy.release",
					Args: map[string]any{"service": "billing", "version": fmt.Sprintf("1.%d.%d", w, n)}})
				if err != nil {
					if agentCtx.Err() == nil {
						errc <- fmt.Errorf("waiter %d: submit: %w", w, err)
					}
					return
				}
				if a.Status != "pending" {
					errc <- fmt.Errorf("waiter %d: submitted %s, want pending", w, a.Status)
					return
				}
				queue <- queued{id: a.ID, at: time.Now()}
				for {
					t0 := time.Now()
					var got client.Action
					_, err := agent.Do(agentCtx, http.MethodGet, "/api/v1/actions/"+url.PathEscape(a.ID)+"?wait=60s", nil, &got)
					at := time.Now()
					if err != nil {
						if agentCtx.Err() == nil {
							errc <- fmt.Errorf("waiter %d: poll: %w", w, err)
						}
						return
					}
					if got.Pending() {
						continue
					}
					if got.Status != "approved" {
						errc <- fmt.Errorf("waiter %d: %s, want approved", w, got.Status)
						return
					}
					mu.Lock()
					pollStart[a.ID], returned[a.ID] = t0, at
					mu.Unlock()
					break
				}
			}
		})
	}

	// The reviewer, oldest first, until d is over.
	deadline := time.Now().Add(d)
	var failed error
	for time.Now().Before(deadline) && failed == nil {
		var q queued
		select {
		case q = <-queue:
		case failed = <-errc:
			continue
		case <-time.After(time.Until(deadline)):
			continue
		}
		time.Sleep(time.Until(q.at.Add(queueMargin)))
		a, err := reviewer.Get(ctx, q.id) // its confirmation phrase, untimed
		if err != nil {
			failed = fmt.Errorf("reviewer: get: %w", err)
			break
		}
		t0 := time.Now()
		if _, err := reviewer.Approve(ctx, q.id, a.ConfirmationPhrase, ""); err != nil {
			failed = fmt.Errorf("reviewer: approve: %w", err)
			break
		}
		mu.Lock()
		approveStart[q.id] = t0
		mu.Unlock()
	}
	// Every approved action's agent hears of it (10 s at most).
	settle := time.Now().Add(10 * time.Second)
	for failed == nil {
		mu.Lock()
		heard := 0
		for id := range approveStart {
			if _, ok := returned[id]; ok {
				heard++
			}
		}
		all := heard == len(approveStart)
		mu.Unlock()
		if all {
			break
		}
		if time.Now().After(settle) {
			failed = fmt.Errorf("%d of %d approved actions' agents did not hear within 10 s", len(approveStart)-heard, len(approveStart))
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopAgents()
	wg.Wait()
	close(errc)
	for err := range errc {
		failed = errors.Join(failed, err)
	}
	if failed != nil {
		return res, failed
	}
	for id, t0 := range approveStart {
		if pollStart[id].After(t0) {
			res.raced++
			continue
		}
		res.latencies = append(res.latencies, returned[id].Sub(t0))
	}
	slices.Sort(res.latencies)
	if len(res.latencies) == 0 {
		return res, fmt.Errorf("no wake-up measured")
	}
	return res, nil
}
