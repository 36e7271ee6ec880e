package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

const (
	previewHead = "0123456789abcdef0123456789abcdef01234567"
	previewTree = "89abcdef0123456789abcdef0123456789abcdef"
)

// impactEnv is a server without a worker, a host the test leases as, an
// agent whose exec calls need a reviewer, and a worktree of the agent's.
func impactEnv(t *testing.T) (env *apptest.Env, agent, alice, host *client.Client) {
	t.Helper()
	env = apptest.Start(t)
	ctx := env.Ctx()
	agent = env.Agent("coder", map[string]any{
		"rules": []map[string]any{
			{"id": "trees", "tool": "worktree.*", "effect": "allow"},
			{"id": "commands", "tool": "exec", "effect": "approve"},
		},
		"settings": map[string]any{"escalate_at": "none"},
	})
	alice = env.Reviewer("alice")
	host = workerClient(t, env, "host", "repo:app")
	created := submit(t, agent, "worktree.create", map[string]any{"repo": "app"})
	require.Equal(t, "approved", created.Status)
	job, err := host.Lease(ctx, []string{"worktree.create"}, []string{"repo:app"}, time.Second)
	require.NoError(t, err)
	require.NotNil(t, job)
	_, err = host.Complete(ctx, job.ID, job.Fence, client.JobResult{Worktree: "app/f", Branch: "airlock/f"})
	require.NoError(t, err)
	return env, agent, alice, host
}

// TestExecImpactPreviewContract: the API side of an exec's impact preview,
// driven as a worker would: the exec waits with a preparing preview and
// cannot be approved; the preview job is a kind of its own; a malformed
// state is refused; the ready preview shows reviewers everything and the
// agent only its status; the approval pins the state on the exec's job.
func TestExecImpactPreviewContract(t *testing.T) {
	t.Parallel()
	env, agent, alice, host := impactEnv(t)
	ctx := env.Ctx()
	a := submit(t, agent, "exec", map[string]any{"argv": []any{"cat", "secret.txt"}, "worktree": "app/f"})
	require.Equal(t, "pending", a.Status)
	assert.Equal(t, "preview", a.Decision.Gate)
	assert.JSONEq(t, `{"status":"preparing"}`, string(a.Preview))

	seen, err := alice.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.JSONEq(t, `{"status":"preparing"}`, string(seen.Preview))
	_, err = alice.Approve(ctx, a.ID, seen.ConfirmationPhrase, "")
	assert.Equal(t, http.StatusConflict, client.StatusOf(err), "no approval before the preview: %v", err)

	none, err := host.Lease(ctx, []string{"exec", "worktree.preview"}, []string{"repo:app"}, 0)
	require.NoError(t, err)
	assert.Nil(t, none, "a worker that does not ask for exec.preview never gets it")
	job, err := host.Lease(ctx, []string{"exec.preview"}, []string{"repo:app"}, time.Second)
	require.NoError(t, err)
	require.NotNil(t, job)
	assert.Equal(t, a.ID, job.ActionID)
	assert.Equal(t, "exec", job.Tool)
	statusIs(t, agent, a.ID, "pending")

	for _, bad := range []client.JobResult{
		{Commit: previewHead, Tree: "not-a-tree"},
		{Tree: previewTree},
		{Commit: "abc", Tree: previewTree},
	} {
		_, err = host.Complete(ctx, job.ID, job.Fence, bad)
		assert.Equal(t, http.StatusBadRequest, client.StatusOf(err), "%+v: %v", bad, err)
	}
	_, err = host.Complete(ctx, job.ID, job.Fence, client.JobResult{ExitCode: 0, Stdout: "the secret\n",
		Diff: "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+the secret\n", Commit: previewHead, Tree: previewTree, DurationMS: 12})
	require.NoError(t, err)

	seen, err = alice.Get(ctx, a.ID)
	require.NoError(t, err)
	var p struct {
		Status, Diff, Stdout string
		ExitCode             *int `json:"exit_code"`
		State                struct{ Head, Tree string }
	}
	require.NoError(t, json.Unmarshal(seen.Preview, &p))
	assert.Equal(t, "ready", p.Status)
	assert.Contains(t, p.Diff, "+the secret")
	assert.Equal(t, "the secret\n", p.Stdout)
	require.NotNil(t, p.ExitCode)
	assert.Equal(t, previewHead, p.State.Head)
	assert.Equal(t, previewTree, p.State.Tree)

	mine, err := agent.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.JSONEq(t, `{"status":"ready","state":{"head":"`+previewHead+`","tree":"`+previewTree+`"}}`, string(mine.Preview),
		"the agent does not see what its unapproved command printed or changed")
	page, err := agent.ListActions(ctx, url.Values{})
	if err == nil { // agents may not list; if they may, the list hides it too
		for _, x := range page.Actions {
			assert.NotContains(t, string(x.Preview), "secret")
		}
	}

	_, err = alice.Approve(ctx, a.ID, seen.ConfirmationPhrase, "")
	require.NoError(t, err)
	run, err := host.Lease(ctx, []string{"exec"}, []string{"repo:app"}, time.Second)
	require.NoError(t, err)
	require.NotNil(t, run)
	assert.Equal(t, a.ID, run.ActionID)
	assert.Equal(t, previewHead+":"+previewTree, run.Pin, "the run is pinned to the previewed state")
}

// TestApprovalBoundToThePreviewRead: an approval that sends back the
// preview_sha256 it read approves that preview only. A reviewer who read
// the exec while its impact was being prepared cannot approve once the
// impact has landed (409, nothing recorded), nor with a digest of their
// own; the action read again approves. Only reviewers see the digest,
// only while pending. Before, the API had no way to bind an approval to
// what was read: between the CLI's last read and its approval, a preview
// could land unseen.
func TestApprovalBoundToThePreviewRead(t *testing.T) {
	t.Parallel()
	env, agent, alice, host := impactEnv(t)
	ctx := env.Ctx()
	a := submit(t, agent, "exec", map[string]any{"argv": []any{"cat", "secret.txt"}, "worktree": "app/f"})
	preparing, err := alice.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.JSONEq(t, `{"status":"preparing"}`, string(preparing.Preview))
	assert.Empty(t, preparing.PreviewSHA256, "nothing stored, nothing named")

	job, err := host.Lease(ctx, []string{"exec.preview"}, []string{"repo:app"}, time.Second)
	require.NoError(t, err)
	require.NotNil(t, job)
	_, err = host.Complete(ctx, job.ID, job.Fence, client.JobResult{Stdout: "the secret\n",
		Diff: "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+the secret\n", Commit: previewHead, Tree: previewTree, DurationMS: 12})
	require.NoError(t, err)

	_, err = alice.ApproveShown(ctx, preparing, preparing.ConfirmationPhrase, "", "")
	assert.Equal(t, http.StatusConflict, client.StatusOf(err), "read while preparing: %v", err)
	ready, err := alice.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, "pending", ready.Status)
	assert.Empty(t, ready.Approvals, "the refused approval left nothing")
	assert.Regexp(t, `^[0-9a-f]{64}$`, ready.PreviewSHA256)

	forged := *ready
	forged.PreviewSHA256 = strings.Repeat("0", 64)
	_, err = alice.ApproveShown(ctx, &forged, ready.ConfirmationPhrase, "", "")
	assert.Equal(t, http.StatusConflict, client.StatusOf(err), "a digest of another preview: %v", err)

	mine, err := agent.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Empty(t, mine.PreviewSHA256, "the agent is not shown it")

	got, err := alice.ApproveShown(ctx, ready, ready.ConfirmationPhrase, "", "")
	require.NoError(t, err)
	assert.Equal(t, "approved", got.Status)
	assert.Empty(t, got.PreviewSHA256, "named only while pending")
}

// TestExecImpactPreviewDecidedMeanwhile: a preview completed after its
// exec was denied is refused with 409 (the worker stops reporting it) and
// the job is done.
func TestExecImpactPreviewDecidedMeanwhile(t *testing.T) {
	t.Parallel()
	env, agent, alice, host := impactEnv(t)
	ctx := env.Ctx()
	a := submit(t, agent, "exec", map[string]any{"argv": []any{"ls"}, "worktree": "app/f"})
	job, err := host.Lease(ctx, []string{"exec.preview"}, []string{"repo:app"}, time.Second)
	require.NoError(t, err)
	require.NotNil(t, job)
	_, err = alice.Deny(ctx, a.ID, "not now")
	require.NoError(t, err)
	_, err = host.Complete(ctx, job.ID, job.Fence, client.JobResult{Commit: previewHead, Tree: previewTree})
	assert.Equal(t, http.StatusConflict, client.StatusOf(err), "%v", err)
	_, err = host.Complete(ctx, job.ID, job.Fence, client.JobResult{Commit: previewHead, Tree: previewTree})
	assert.Equal(t, http.StatusConflict, client.StatusOf(err), "the job is done: %v", err)
	statusIs(t, agent, a.ID, "denied")
}

// TestExecImpactPreviewStoppedWithItsAction: a deny, the agent's cancel or
// the expiry of an exec whose preview is being prepared tells the preview's
// worker to stop (a denied command does not keep a worker slot busy).
func TestExecImpactPreviewStoppedWithItsAction(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t, apptest.Options{ExpiryEvery: 20 * time.Millisecond})
	ctx := env.Ctx()
	agent := env.Agent("coder", map[string]any{
		"rules": []map[string]any{
			{"id": "trees", "tool": "worktree.*", "effect": "allow"},
			{"id": "quick", "tool": "exec", "effect": "approve", "timeout": "1s", "when": `args.argv[0] == "wc"`},
			{"id": "commands", "tool": "exec", "effect": "approve"},
		},
		"settings": map[string]any{"escalate_at": "none"},
	})
	alice := env.Reviewer("alice")
	host := workerClient(t, env, "host", "repo:app")
	created := submit(t, agent, "worktree.create", map[string]any{"repo": "app"})
	job, err := host.Lease(ctx, []string{"worktree.create"}, []string{"repo:app"}, time.Second)
	require.NoError(t, err)
	require.Equal(t, created.ID, job.ActionID)
	_, err = host.Complete(ctx, job.ID, job.Fence, client.JobResult{Worktree: "app/f", Branch: "airlock/f"})
	require.NoError(t, err)

	for name, decide := range map[string]func(id string){
		"denied": func(id string) {
			_, err := alice.Deny(ctx, id, "no")
			require.NoError(t, err)
		},
		"cancelled by the agent": func(id string) {
			_, err := agent.Cancel(ctx, id)
			require.NoError(t, err)
		},
		"expired": func(id string) {
			for statusIs := ""; statusIs != "expired"; time.Sleep(20 * time.Millisecond) {
				a, err := alice.Get(ctx, id)
				require.NoError(t, err)
				statusIs = a.Status
			}
		},
	} {
		argv := []any{"ls"}
		if name == "expired" {
			argv = []any{"wc", "-l", "x"}
		}
		a := submit(t, agent, "exec", map[string]any{"argv": argv, "worktree": "app/f"})
		require.Equal(t, "pending", a.Status, name)
		job, err := host.Lease(ctx, []string{"exec.preview"}, []string{"repo:app"}, time.Second)
		require.NoError(t, err)
		require.NotNil(t, job, name)
		require.Equal(t, a.ID, job.ActionID, name)
		decide(a.ID)
		ans, err := host.Heartbeat(ctx, job.ID, job.Fence)
		require.NoError(t, err, name)
		assert.True(t, ans.Stop, "%s: the preview's worker is told to stop", name)
	}
}
