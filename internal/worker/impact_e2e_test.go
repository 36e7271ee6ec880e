package worker_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/sandbox"
)

// impactPreview is an exec's impact preview as the API returns it.
type impactPreview struct {
	Status string
	Diff   string
	Error  string
	Flags  []string
	State  *struct{ Head, Tree string }
	// ExitCode is a pointer: the agent's view has none.
	ExitCode *int `json:"exit_code"`
	Stdout   string
	Note     string
}

// impactSetup is a served repository, an agent whose exec calls need a
// reviewer, a reviewer, and a worktree with an uncommitted change.
func impactSetup(t *testing.T, settings map[string]any) (env *apptest.Env, agent, alice *client.Client, wt, dir string) {
	t.Helper()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	root := workspace(t)
	repo := filepath.Join(root, "repo")
	gitIn(t, root, "init", "-q", "-b", "main", repo)
	require.NoError(t, os.WriteFile(filepath.Join(repo, "app.txt"), []byte("line one\nline two\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "old.txt"), []byte("to be removed\n"), 0o644))
	gitIn(t, repo, "add", ".")
	gitIn(t, repo, "commit", "-q", "-m", "initial")
	env = apptest.Start(t, apptest.Options{Worker: "embedded", Repos: map[string]string{"app": repo}})
	if settings == nil {
		settings = map[string]any{}
	}
	settings["escalate_at"] = "none"
	agent = env.Agent("coder", map[string]any{
		"rules": []map[string]any{
			{"id": "worktrees", "tool": "worktree.*", "effect": "allow"},
			{"id": "files", "tool": "fs.*", "effect": "allow"},
			{"id": "commands", "tool": "exec", "effect": "approve"},
		},
		"settings": settings,
	})
	alice = env.Reviewer("alice")
	ctx := env.Ctx()
	created, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.create", Args: map[string]any{"repo": "app"}})
	require.NoError(t, err)
	wt = result(t, waitFinal(t, agent, created.ID)).Worktree
	require.NotEmpty(t, wt)
	// An uncommitted change: the preview's diff is against the worktree
	// as it is, not against its HEAD.
	wrote, err := agent.Submit(ctx, client.SubmitRequest{Tool: "fs.write", Args: map[string]any{"worktree": wt, "path": "notes.txt", "content": "draft\n"}})
	require.NoError(t, err)
	require.Equal(t, "succeeded", waitFinal(t, agent, wrote.ID).Status)
	_, name, _ := strings.Cut(wt, "/")
	return env, agent, alice, wt, filepath.Join(env.Config.DataDir, "worktrees", "app", name)
}

// previewReady waits until the impact preview of exec action id is no
// longer preparing, as c sees it.
func previewReady(t *testing.T, c *client.Client, id string) (*client.Action, impactPreview) {
	t.Helper()
	var a *client.Action
	var p impactPreview
	eventually(t, 60*time.Second, "the impact preview", func() bool {
		var err error
		a, err = c.Get(context.Background(), id)
		require.NoError(t, err)
		require.NotEmpty(t, a.Preview, "a pending exec in a worktree shows its preview (preparing at first)")
		p = impactPreview{}
		require.NoError(t, json.Unmarshal(a.Preview, &p))
		require.Contains(t, []string{"preparing", "ready", "failed"}, p.Status)
		return p.Status != "preparing"
	})
	return a, p
}

// snapshot reads every file under dir (.git included) with its mode.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		info, err := d.Info()
		require.NoError(t, err)
		rel, _ := filepath.Rel(dir, p)
		v := info.Mode().String()
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			v += " " + string(b)
		}
		out[rel] = v
		return nil
	}))
	return out
}

// TestExecImpactPreview: a pending exec in a worktree is first run on a
// copy; the reviewer sees the diff it makes (the agent only that there is
// one) while the worktree and its repository stay untouched; once
// approved, the real run makes exactly the previewed diff.
func TestExecImpactPreview(t *testing.T) {
	t.Parallel()
	env, agent, alice, wt, dir := impactSetup(t, nil)
	ctx := env.Ctx()
	before := snapshot(t, dir)
	headBefore := gitIn(t, dir, "rev-parse", "HEAD")
	commonDir := gitIn(t, dir, "rev-parse", "--path-format=absolute", "--git-common-dir")
	gitBefore := snapshot(t, commonDir)

	sub, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{
		"argv": []any{"sed", "-i", "s/line two/line 2/", "app.txt"}, "worktree": wt}})
	require.NoError(t, err)
	require.Equal(t, "pending", sub.Status, "%+v", sub.Decision)
	assert.Equal(t, "preview", sub.Decision.Gate, "the exec waits for its impact preview")

	seen, p := previewReady(t, alice, sub.ID)
	require.Equal(t, "ready", p.Status, "preview error: %s", p.Error)
	assert.Contains(t, p.Diff, "--- a/app.txt\n+++ b/app.txt\n@@ -1,2 +1,2 @@\n line one\n-line two\n+line 2\n")
	assert.NotContains(t, p.Diff, "notes.txt\n", "the uncommitted notes.txt is part of the state the preview starts from")
	require.NotNil(t, p.State)
	assert.Equal(t, headBefore, p.State.Head)
	assert.Len(t, p.State.Tree, 40)
	require.NotNil(t, p.ExitCode)
	assert.Equal(t, 0, *p.ExitCode)

	// The preview changed nothing outside its copy.
	assert.Equal(t, before, snapshot(t, dir), "the worktree is untouched by the preview")
	assert.Equal(t, gitBefore, snapshot(t, commonDir), "the repository is untouched by the preview")

	// The agent sees that a preview is ready, not what it shows.
	mine, err := agent.Get(ctx, sub.ID)
	require.NoError(t, err)
	var agentView impactPreview
	require.NoError(t, json.Unmarshal(mine.Preview, &agentView))
	assert.Equal(t, "ready", agentView.Status)
	assert.Empty(t, agentView.Diff)
	assert.Empty(t, agentView.Stdout)
	assert.Nil(t, agentView.ExitCode)

	_, err = alice.Approve(ctx, sub.ID, seen.ConfirmationPhrase, "")
	require.NoError(t, err)
	done := waitFinal(t, agent, sub.ID)
	require.Equal(t, "succeeded", done.Status, "%s", done.Result)
	assert.Equal(t, p.Diff, result(t, done).Diff, "the real run made exactly the previewed diff")
	b, err := os.ReadFile(filepath.Join(dir, "app.txt"))
	require.NoError(t, err)
	assert.Equal(t, "line one\nline 2\n", string(b))

	// The approval recorded the state it pinned.
	auditor := env.Auditor("audrey")
	events, err := auditor.Audit(ctx, url.Values{"action_id": {sub.ID}, "kind": {"action.approved"}})
	require.NoError(t, err)
	require.Len(t, events.Events, 1)
	assert.Equal(t, p.State.Head+":"+p.State.Tree, events.Events[0].Data["preview_state"])
}

// TestExecImpactPreviewRefusesAChangedWorktree: when the worktree changes
// between the preview and the approved run, the run is refused (nothing
// runs), the action fails with the reason, and the refusal is audited.
func TestExecImpactPreviewRefusesAChangedWorktree(t *testing.T) {
	t.Parallel()
	env, agent, alice, wt, dir := impactSetup(t, nil)
	ctx := env.Ctx()
	sub, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{
		"argv": []any{"sed", "-i", "s/line one/line 1/", "app.txt"}, "worktree": wt}})
	require.NoError(t, err)
	require.Equal(t, "pending", sub.Status)
	seen, p := previewReady(t, alice, sub.ID)
	require.Equal(t, "ready", p.Status, p.Error)

	// Another change lands in the worktree after the preview.
	changed, err := agent.Submit(ctx, client.SubmitRequest{Tool: "fs.write", Args: map[string]any{"worktree": wt, "path": "notes.txt", "content": "changed since\n"}})
	require.NoError(t, err)
	require.Equal(t, "succeeded", waitFinal(t, agent, changed.ID).Status)

	_, err = alice.Approve(ctx, sub.ID, seen.ConfirmationPhrase, "")
	require.NoError(t, err)
	done := waitFinal(t, agent, sub.ID)
	require.Equal(t, "failed", done.Status)
	r := result(t, done)
	assert.Contains(t, r.Error, "changed since its impact preview")
	assert.Contains(t, r.Error, "nothing ran")
	b, err := os.ReadFile(filepath.Join(dir, "app.txt"))
	require.NoError(t, err)
	assert.Equal(t, "line one\nline two\n", string(b), "the command did not run")

	events, err := env.Auditor("audrey").Audit(ctx, url.Values{"action_id": {sub.ID}, "kind": {"action.result"}})
	require.NoError(t, err)
	require.Len(t, events.Events, 1)
	res, _ := events.Events[0].Data["result"].(map[string]any)
	assert.Contains(t, res["error"], "changed since its impact preview", "the refusal is audited")
}

// TestExecImpactPreviewFailedCannotBeApproved: a preview that fails (here:
// a diff larger than a reviewer can be shown) leaves the exec pending with
// the failure shown; it cannot be approved, only denied.
func TestExecImpactPreviewFailedCannotBeApproved(t *testing.T) {
	t.Parallel()
	env, agent, alice, wt, dir := impactSetup(t, nil)
	ctx := env.Ctx()
	big := strings.Repeat("a line of text that makes the file large\n", 16<<10) // 656 KiB
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.txt"), []byte(big), 0o644))
	sub, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{
		"argv": []any{"cp", "big.txt", "big2.txt"}, "worktree": wt}})
	require.NoError(t, err)
	require.Equal(t, "pending", sub.Status)
	seen, p := previewReady(t, alice, sub.ID)
	require.Equal(t, "failed", p.Status)
	assert.Contains(t, p.Error, "over the 512 KiB a reviewer can be shown")
	assert.Equal(t, "pending", seen.Status, "a failed preview leaves the action pending")

	_, err = alice.Approve(ctx, sub.ID, seen.ConfirmationPhrase, "")
	require.Error(t, err)
	assert.Equal(t, http.StatusConflict, client.StatusOf(err), "%v", err)
	assert.Contains(t, err.Error(), "impact preview failed")
	denied, err := alice.Deny(ctx, sub.ID, "too big to review")
	require.NoError(t, err)
	assert.Equal(t, "denied", denied.Status)
	assert.NoFileExists(t, filepath.Join(dir, "big2.txt"))
}

// TestExecImpactPreviewOff: with settings.exec_preview false a pending
// exec has no preview and can be approved at once.
func TestExecImpactPreviewOff(t *testing.T) {
	t.Parallel()
	env, agent, alice, wt, dir := impactSetup(t, map[string]any{"exec_preview": false})
	ctx := env.Ctx()
	sub, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{
		"argv": []any{"sed", "-i", "s/line one/line 1/", "app.txt"}, "worktree": wt}})
	require.NoError(t, err)
	require.Equal(t, "pending", sub.Status)
	assert.Empty(t, sub.Decision.Gate)
	seen, err := alice.Get(ctx, sub.ID)
	require.NoError(t, err)
	assert.Empty(t, seen.Preview)
	_, err = alice.Approve(ctx, sub.ID, seen.ConfirmationPhrase, "")
	require.NoError(t, err)
	done := waitFinal(t, agent, sub.ID)
	require.Equal(t, "succeeded", done.Status, "%s", done.Result)
	b, err := os.ReadFile(filepath.Join(dir, "app.txt"))
	require.NoError(t, err)
	assert.Equal(t, "line 1\nline two\n", string(b))
}

// TestExecImpactPreviewPreparing: until a worker has prepared the preview
// the exec shows it as preparing and no reviewer can approve it; the
// preview is then prepared and the exec approvable.
func TestExecImpactPreviewPreparing(t *testing.T) {
	t.Parallel()
	env, agent, alice, wt, _ := impactSetup(t, nil)
	env.Config.Worker = "off" // no worker leases the preview job now
	env.Restart()
	ctx := env.Ctx()
	sub, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{
		"argv": []any{"sed", "-i", "s/line one/line 1/", "app.txt"}, "worktree": wt}})
	require.NoError(t, err)
	require.Equal(t, "pending", sub.Status, "%+v", sub.Decision)
	seen, err := alice.Get(ctx, sub.ID)
	require.NoError(t, err)
	assert.JSONEq(t, `{"status":"preparing"}`, string(seen.Preview))
	_, err = alice.Approve(ctx, sub.ID, seen.ConfirmationPhrase, "")
	require.Error(t, err)
	assert.Equal(t, http.StatusConflict, client.StatusOf(err), "%v", err)
	assert.Contains(t, err.Error(), "impact preview is not ready yet")
	still, err := alice.Get(ctx, sub.ID)
	require.NoError(t, err)
	assert.Equal(t, "pending", still.Status)
	assert.Empty(t, still.Approvals)

	env.Config.Worker = "embedded"
	env.Restart()
	seen, p := previewReady(t, alice, sub.ID)
	require.Equal(t, "ready", p.Status, p.Error)
	assert.Contains(t, p.Diff, "-line one\n+line 1\n")
	_, err = alice.Approve(ctx, sub.ID, seen.ConfirmationPhrase, "")
	require.NoError(t, err)
	done := waitFinal(t, agent, sub.ID)
	require.Equal(t, "succeeded", done.Status, "%s", done.Result)
	assert.Equal(t, p.Diff, result(t, done).Diff)
}

// TestExecImpactPreviewTimeout: a command that does not finish within its
// timeout in the copy fails the preview (its effect is not known): the
// exec stays pending with the reason and cannot be approved.
func TestExecImpactPreviewTimeout(t *testing.T) {
	t.Parallel()
	env, agent, alice, wt, dir := impactSetup(t, nil)
	ctx := env.Ctx()
	before := snapshot(t, dir)
	sub, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{
		"argv": []any{"sed", "-n", ":a;ba", "app.txt"}, "worktree": wt, "timeout_s": 1}})
	require.NoError(t, err)
	require.Equal(t, "pending", sub.Status, "%+v", sub.Decision)
	seen, p := previewReady(t, alice, sub.ID)
	require.Equal(t, "failed", p.Status)
	assert.Contains(t, p.Error, "did not finish in the preview")
	assert.Contains(t, p.Error, "timeout")
	_, err = alice.Approve(ctx, sub.ID, seen.ConfirmationPhrase, "")
	assert.Equal(t, http.StatusConflict, client.StatusOf(err), "%v", err)
	statusIs := func() string { a, err := alice.Get(ctx, sub.ID); require.NoError(t, err); return a.Status }
	assert.Equal(t, "pending", statusIs())
	assert.Equal(t, before, snapshot(t, dir))
}
