package worker_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/worker"
)

// TestHangingHeartbeatStopsTheRunBeforeTheLeaseRunsOut: the worker's
// heartbeats reach a server that never answers them (a hung proxy, a
// partition that drops packets), while everything else goes through. The
// worker cannot renew its lease, so it must stop the run before the lease
// runs out: once the server has given the job up (failed as interrupted;
// a retryable one would go to another worker), nothing of the run is
// left. Before, a heartbeat waited as long as the HTTP client's timeout
// (90 s), far past the lease, and the command ran on meanwhile.
func TestHangingHeartbeatStopsTheRunBeforeTheLeaseRunsOut(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	pol, err := worker.NewPolicy([]string{"sleep"}, false, false)
	require.NoError(t, err)
	ws := workspace(t)
	env := apptest.Start(t, apptest.Options{LeaseTTL: 3 * time.Second, ExpiryEvery: 50 * time.Millisecond, ExecPolicy: &pol})
	agent := env.Agent("runner", execPolicy)
	ctx := env.Ctx()

	// A loopback proxy to the server that holds heartbeats once told to.
	target, err := url.Parse(env.URL)
	require.NoError(t, err)
	forward := httputil.NewSingleHostReverseProxy(target)
	var hang atomic.Bool
	release := make(chan struct{})
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang.Load() && strings.HasSuffix(r.URL.Path, "/heartbeat") {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	t.Cleanup(func() { close(release) }) // runs first: no request is held when the proxy closes

	tok, err := env.Admin.IssueWorkerToken(ctx, "host-hb", []string{"workspace:main"}, 0)
	require.NoError(t, err)
	w, err := worker.New(worker.Config{
		Client:     client.New(proxy.URL, tok.Token),
		Workspaces: map[string]string{"main": ws},
		Executor:   &worker.SandboxExecutor{Workspaces: map[string]string{"main": ws}, Policy: pol},
		LeaseWait:  time.Second,
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(context.Background())
	var running sync.WaitGroup
	running.Go(func() { w.Run(runCtx) })
	t.Cleanup(func() { stop(); running.Wait() })

	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{"argv": []any{"sleep", "31.75"}, "workspace": "main"}})
	require.NoError(t, err)
	require.Equal(t, "approved", a.Status, "%+v", a.Decision)
	eventually(t, 20*time.Second, "the sandboxed sleep", func() bool { return sandboxed(t, "sleep", "31.75") })
	hang.Store(true)

	eventually(t, 20*time.Second, "the lease to run out", func() bool { return statusOf(t, agent, a.ID) == "failed" })
	assert.Zero(t, processes(t, "sleep 31.75"), "the run outlived its lease")
	got, err := agent.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Contains(t, string(got.Result), "interrupted")
}
