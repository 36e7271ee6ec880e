package web_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/worker"
	"github.com/airlockhq/airlock/internal/worktree"
)

// pendingMerge is a worktree.merge waiting for a reviewer (rita) whose
// preview no worker has computed yet: a repository svc holding file with
// content, a worktree of it where sedScript edited file, and the merge.
type pendingMerge struct {
	env   *apptest.Env
	agent *client.Client
	merge *client.Action
	// startHost runs a worker host in this process until the returned
	// stop (or the test's end).
	startHost func() (stop func())
}

func newPendingMerge(t *testing.T, file, content, sedScript string) *pendingMerge {
	t.Helper()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	root, repo := gitRepo(t, map[string]string{file: content})

	env := apptest.Start(t) // no embedded worker: the test starts its host when it wants
	ctx := env.Ctx()
	agent := env.Agent("coder", map[string]any{
		"rules": []map[string]any{
			{"id": "merge-review", "tool": "worktree.merge", "effect": "approve", "timeout": "15m"},
			{"id": "worktrees", "tool": "worktree.*", "effect": "allow"},
			{"id": "edit", "tool": "exec", "effect": "allow"},
		},
		"settings": map[string]any{"escalate_at": "none"},
	})
	env.Reviewer("rita")
	pol, err := worker.NewPolicy([]string{"sed"}, false, false)
	require.NoError(t, err)
	tok, err := env.Admin.IssueWorkerToken(ctx, "host", []string{"repo:svc"}, 0)
	require.NoError(t, err)
	repos := map[string]string{"svc": repo}
	startHost := func() (stop func()) {
		w, err := worker.New(worker.Config{Client: env.Client(tok.Token), Repos: repos, LeaseWait: time.Second, Logger: env.Log,
			Executor: &worker.SandboxExecutor{Policy: pol, Worktrees: &worktree.Manager{Repos: repos, Root: filepath.Join(root, "worktrees")}}})
		require.NoError(t, err)
		wctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.Run(wctx)
		}()
		var once bool
		stop = func() {
			if !once {
				once = true
				cancel()
				<-done
			}
		}
		t.Cleanup(stop)
		return stop
	}

	stop := startHost()
	wt, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.create", Args: map[string]any{"repo": "svc"}})
	require.NoError(t, err)
	created := waitStatus(t, agent, wt.ID, "succeeded", "failed")
	require.Equal(t, "succeeded", created.Status, "%s", created.Result)
	name := strings.Split(strings.Split(string(created.Result), `"worktree":"`)[1], `"`)[0]
	edit, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{
		"argv": []any{"sed", "-i", sedScript, file}, "worktree": name}})
	require.NoError(t, err)
	require.Equal(t, "succeeded", waitStatus(t, agent, edit.ID, "succeeded", "failed").Status)
	stop() // no worker: the merge's preview waits

	merge, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.merge", Args: map[string]any{"worktree": name}})
	require.NoError(t, err)
	require.Equal(t, "pending", merge.Status)
	return &pendingMerge{env: env, agent: agent, merge: merge, startHost: startHost}
}
