package worker_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
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
	"github.com/airlockhq/airlock/internal/worker"
)

const commandsV1 = "test: grep -q hello greeting.txt && echo tests pass\nlint: 'true'\n"

// lifecycleRepo is a repository declaring commandsV1 in .airlock/commands.yaml.
func lifecycleRepo(t *testing.T) string {
	t.Helper()
	root := workspace(t)
	repo := filepath.Join(root, "repo")
	gitIn(t, root, "init", "-q", "-b", "main", repo)
	require.NoError(t, os.MkdirAll(filepath.Join(repo, ".airlock"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".airlock", "commands.yaml"), []byte(commandsV1), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "greeting.txt"), []byte("hello\n"), 0o644))
	gitIn(t, repo, "add", ".")
	gitIn(t, repo, "commit", "-q", "-m", "initial")
	return repo
}

var codingPolicy = map[string]any{
	"rules": []map[string]any{
		{"id": "worktrees", "tool": "worktree.*", "effect": "allow"},
		{"id": "files", "tool": "fs.*", "effect": "allow"},
	},
	"settings": map[string]any{"escalate_at": "none"},
}

type commandsPreview struct{ Commit, Diff, Error string }

// previewOf waits for the command set of a pending worktree.run to be read
// and returns the action and its preview.
func previewOf(t *testing.T, ctx context.Context, c *client.Client, id string) (*client.Action, commandsPreview) {
	t.Helper()
	var a *client.Action
	var err error
	eventually(t, 30*time.Second, "the command set preview", func() bool {
		a, err = c.Get(ctx, id)
		require.NoError(t, err)
		return len(a.Preview) > 0
	})
	var p commandsPreview
	require.NoError(t, json.Unmarshal(a.Preview, &p))
	return a, p
}

// submitter returns a function that submits a call as agent.
func submitter(t *testing.T, ctx context.Context, agent *client.Client) func(tool string, args map[string]any) *client.Action {
	return func(tool string, args map[string]any) *client.Action {
		t.Helper()
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: tool, Args: args})
		require.NoError(t, err)
		return a
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestLifecycleCommands: a worktree.run waits until a reviewer approved
// the exact command set, which the approval shows whole; an agent cannot
// approve it; then the same set runs without asking; a change of the file
// in the worktree (an agent's fs.write) or on the base branch makes the
// next run pending again, with the new set shown.
func TestLifecycleCommands(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	repo := lifecycleRepo(t)
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Repos: map[string]string{"app": repo}})
	agent := env.Agent("coder", codingPolicy)
	alice := env.Reviewer("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	run := func(tool string, args map[string]any) client.JobResult {
		t.Helper()
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: tool, Args: args})
		require.NoError(t, err)
		require.Equal(t, "approved", a.Status, "%s: %+v", tool, a.Decision)
		done := waitFinal(t, agent, a.ID)
		require.Equal(t, "succeeded", done.Status, "%s: %s", tool, done.Result)
		return result(t, done)
	}
	wt := run("worktree.create", map[string]any{"repo": "app"}).Worktree

	// First run: pending, with every command shown.
	first, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.run", Args: map[string]any{"worktree": wt, "command": "test"}})
	require.NoError(t, err)
	assert.Equal(t, "pending", first.Status, "no command set is approved yet: %+v", first.Decision)
	seen, p := previewOf(t, ctx, alice, first.ID)
	require.Empty(t, p.Error)
	assert.Equal(t, commandsV1, p.Diff, "the reviewer sees every command")
	assert.Equal(t, sha(commandsV1), p.Commit, "the command set is its content hash")
	assert.Equal(t, "pending", seen.Status)

	// The agent cannot approve it (nor anything else).
	_, err = agent.Approve(ctx, first.ID, seen.ConfirmationPhrase, "")
	require.Error(t, err)
	assert.Contains(t, []int{http.StatusForbidden, http.StatusUnauthorized}, client.StatusOf(err), "%v", err)
	still, err := alice.Get(ctx, first.ID)
	require.NoError(t, err)
	assert.Equal(t, "pending", still.Status)

	_, err = alice.Approve(ctx, first.ID, seen.ConfirmationPhrase, "")
	require.NoError(t, err)
	done := waitFinal(t, agent, first.ID)
	require.Equal(t, "succeeded", done.Status, "%s", done.Result)
	assert.Contains(t, result(t, done).Stdout, "tests pass", "grep ran in the worktree's sandbox though no exec allowlist names it")

	// The same command set again: it runs without asking.
	again, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.run", Args: map[string]any{"worktree": wt, "command": "lint"}})
	require.NoError(t, err)
	done = waitFinal(t, agent, again.ID)
	require.Equal(t, "succeeded", done.Status, "%s", done.Result)
	assert.Equal(t, "commands", done.Decision.Source)
	assert.Equal(t, "policy", done.Decision.By)

	// The agent edits the file in its worktree: the next run asks again.
	changed := "test: echo changed by the agent\n"
	run("fs.write", map[string]any{"worktree": wt, "path": ".airlock/commands.yaml", "content": changed})
	edited, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.run", Args: map[string]any{"worktree": wt, "command": "test"}})
	require.NoError(t, err)
	seen, p = previewOf(t, ctx, alice, edited.ID)
	assert.Equal(t, "pending", seen.Status, "a changed command set is not approved: %+v", seen.Decision)
	assert.Equal(t, changed, p.Diff, "the new command set is shown")
	assert.Equal(t, sha(changed), p.Commit)
	_, err = alice.Deny(ctx, edited.ID, "not this")
	require.NoError(t, err)

	// A pull on the base branch changes the file: a worktree of the new
	// base asks again too.
	pulled := commandsV1 + "fmt: echo formatting\n"
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".airlock", "commands.yaml"), []byte(pulled), 0o644))
	gitIn(t, repo, "commit", "-q", "-am", "add fmt")
	wt2 := run("worktree.create", map[string]any{"repo": "app"}).Worktree
	fresh, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.run", Args: map[string]any{"worktree": wt2, "command": "test"}})
	require.NoError(t, err)
	seen, p = previewOf(t, ctx, alice, fresh.ID)
	assert.Equal(t, "pending", seen.Status)
	assert.Equal(t, pulled, p.Diff)
	assert.Contains(t, p.Diff, "fmt: echo formatting")
}

// TestWorktreeRunRefusesAChangeAfterApproval: the worker reads the command
// set again before running; a file changed between the approval and the
// run fails the run instead of running the new commands.
func TestWorktreeRunRefusesAChangeAfterApproval(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	repo := lifecycleRepo(t)
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Repos: map[string]string{"app": repo}})
	agent := env.Agent("coder", codingPolicy)
	alice := env.Reviewer("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.create", Args: map[string]any{"repo": "app"}})
	require.NoError(t, err)
	wt := result(t, waitFinal(t, agent, a.ID)).Worktree
	pending, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.run", Args: map[string]any{"worktree": wt, "command": "test"}})
	require.NoError(t, err)
	seen, _ := previewOf(t, ctx, alice, pending.ID)
	// Changed behind the reviewer's back, after the preview was read.
	path := filepath.Join(env.Config.DataDir, "worktrees", wt, ".airlock", "commands.yaml")
	require.NoError(t, os.WriteFile(path, []byte("test: touch pwned\n"), 0o644))
	_, err = alice.Approve(ctx, pending.ID, seen.ConfirmationPhrase, "")
	require.NoError(t, err)
	done := waitFinal(t, agent, pending.ID)
	assert.Equal(t, "failed", done.Status)
	assert.Contains(t, result(t, done).Error, "changed since its command set was approved")
	assert.NoFileExists(t, filepath.Join(env.Config.DataDir, "worktrees", wt, "pwned"))
}

// TestCodingLoopEndToEnd: through the API alone an agent creates a
// worktree, writes a file with fs.write, runs the repository's test
// command, and proposes the merge; the reviewer approves the command set
// and the previewed merge, and the base branch has exactly the change.
func TestCodingLoopEndToEnd(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	repo := lifecycleRepo(t)
	base := gitIn(t, repo, "rev-parse", "main")
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Repos: map[string]string{"app": repo}})
	agent := env.Agent("coder", codingPolicy)
	alice := env.Reviewer("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	submit := submitter(t, ctx, agent)
	created := submit("worktree.create", map[string]any{"repo": "app"})
	wt := result(t, waitFinal(t, agent, created.ID)).Worktree

	w := submit("fs.write", map[string]any{"worktree": wt, "path": "src/feature.txt", "content": "hello feature\n"})
	require.Equal(t, "approved", w.Status, "%+v", w.Decision)
	require.Equal(t, "succeeded", waitFinal(t, agent, w.ID).Status)

	test := submit("worktree.run", map[string]any{"worktree": wt, "command": "test"})
	seen, p := previewOf(t, ctx, alice, test.ID)
	require.Empty(t, p.Error)
	_, err := alice.Approve(ctx, test.ID, seen.ConfirmationPhrase, "")
	require.NoError(t, err)
	ran := waitFinal(t, agent, test.ID)
	require.Equal(t, "succeeded", ran.Status, "%s", ran.Result)
	assert.Contains(t, result(t, ran).Stdout, "tests pass")

	merge := submit("worktree.merge", map[string]any{"worktree": wt})
	require.Equal(t, "pending", merge.Status)
	seen, p = previewOf(t, ctx, alice, merge.ID)
	require.Empty(t, p.Error)
	assert.Contains(t, p.Diff, "+hello feature")
	_, err = alice.Approve(ctx, merge.ID, seen.ConfirmationPhrase, "")
	require.NoError(t, err)
	merged := waitFinal(t, agent, merge.ID)
	require.Equal(t, "succeeded", merged.Status, "%s", merged.Result)
	assert.Equal(t, p.Commit, gitIn(t, repo, "rev-parse", "main"))
	assert.Equal(t, "A\tsrc/feature.txt", gitIn(t, repo, "diff", "--name-status", base, "main"), "exactly the change")
	assert.Equal(t, "hello feature", gitIn(t, repo, "show", "main:src/feature.txt"))
}

// TestFSRefusals: fs.write and fs.patch of .git metadata, a read-only path
// or a path out of the root are refused at submit; a symlink out of the
// worktree is not followed on the worker, nor is a file written that an
// absolute deny entry names by its host path; fs.patch applies a diff.
func TestFSRefusals(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	ws := workspace(t)
	outside := workspace(t)
	require.NoError(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one\ntwo\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "docs"), 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(ws, "escape")))
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Workspaces: map[string]string{"main": ws}})
	pol := map[string]any{
		"rules": []map[string]any{{"id": "files", "tool": "fs.*", "effect": "allow"}},
		"settings": map[string]any{"escalate_at": "none", "read_only_paths": []string{"docs"},
			"deny_paths": []string{filepath.Join(ws, "config", "prod.yaml")}},
	}
	agent := env.Agent("editor", pol)
	ctx := env.Ctx()
	for _, args := range []map[string]any{
		{"workspace": "main", "path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"},
		{"workspace": "main", "path": "docs/readme.md", "content": "x"},
		{"workspace": "main", "path": ".env", "content": "SECRET=1"},
	} {
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "fs.write", Args: args})
		require.NoError(t, err)
		assert.Equal(t, "denied", a.Status, "%v: %+v", args["path"], a.Decision)
	}
	patchGit := "--- a/.git/hooks/pre-commit\n+++ b/.git/hooks/pre-commit\n@@ -0,0 +1 @@\n+x\n"
	a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "fs.patch", Args: map[string]any{"workspace": "main", "patch": patchGit}})
	require.NoError(t, err)
	assert.Equal(t, "denied", a.Status, "%+v", a.Decision)
	assert.Equal(t, "read_only_paths", a.Decision.Source)

	// The server cannot see that escape is a symlink: the worker refuses.
	a, err = agent.Submit(ctx, client.SubmitRequest{Tool: "fs.write", Args: map[string]any{"workspace": "main", "path": "escape/planted.txt", "content": "x"}})
	require.NoError(t, err)
	require.Equal(t, "approved", a.Status, "%+v", a.Decision)
	done := waitFinal(t, agent, a.ID)
	assert.Equal(t, "failed", done.Status, "%s", done.Result)
	a, err = agent.Submit(ctx, client.SubmitRequest{Tool: "fs.write", Args: map[string]any{"workspace": "main", "path": "../planted.txt", "content": "x"}})
	require.NoError(t, err)
	assert.Equal(t, "denied", a.Status, "a path out of the root")
	assert.Equal(t, "validator", a.Decision.Source, "%+v", a.Decision)
	assert.NoFileExists(t, filepath.Join(outside, "planted.txt"), "no symlink followed out")
	assert.NoFileExists(t, filepath.Join(filepath.Dir(ws), "planted.txt"))

	// An absolute deny entry naming a workspace file: the server sees only
	// the relative path, the worker the host path.
	a, err = agent.Submit(ctx, client.SubmitRequest{Tool: "fs.write", Args: map[string]any{"workspace": "main", "path": "config/prod.yaml", "content": "x"}})
	require.NoError(t, err)
	require.Equal(t, "approved", a.Status, "%+v", a.Decision)
	done = waitFinal(t, agent, a.ID)
	assert.Equal(t, "failed", done.Status, "%s", done.Result)
	assert.Contains(t, string(done.Result), "is covered by deny_paths entry")
	assert.NoFileExists(t, filepath.Join(ws, "config", "prod.yaml"))

	patch := "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"
	a, err = agent.Submit(ctx, client.SubmitRequest{Tool: "fs.patch", Args: map[string]any{"workspace": "main", "patch": patch}})
	require.NoError(t, err)
	require.Equal(t, "approved", a.Status, "%+v", a.Decision)
	done = waitFinal(t, agent, a.ID)
	require.Equal(t, "succeeded", done.Status, "%s", done.Result)
	b, err := os.ReadFile(filepath.Join(ws, "notes.txt"))
	require.NoError(t, err)
	assert.Equal(t, "one\n2\n", string(b))
	assert.True(t, strings.HasPrefix(result(t, done).Stdout, "patched notes.txt"))
}

// TestFSPreviews: a pending fs.write shows the reviewer the diff it would
// make to the file as it is now, a pending fs.patch whether it applies;
// neither changes anything before approval.
func TestFSPreviews(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	ws := workspace(t)
	require.NoError(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one\ntwo\n"), 0o644))
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Workspaces: map[string]string{"main": ws}})
	agent := env.Agent("editor", map[string]any{
		"rules":    []map[string]any{{"id": "files", "tool": "fs.*", "effect": "approve"}},
		"settings": map[string]any{"escalate_at": "none"},
	})
	alice := env.Reviewer("alice")
	ctx := env.Ctx()

	w, err := agent.Submit(ctx, client.SubmitRequest{Tool: "fs.write", Args: map[string]any{"workspace": "main", "path": "notes.txt", "content": "one\n2\n"}})
	require.NoError(t, err)
	require.Equal(t, "pending", w.Status)
	seen, p := previewOf(t, ctx, alice, w.ID)
	require.Empty(t, p.Error)
	assert.Contains(t, p.Diff, "--- a/notes.txt\n+++ b/notes.txt\n")
	assert.Contains(t, p.Diff, "-two\n+2\n")
	b, err := os.ReadFile(filepath.Join(ws, "notes.txt"))
	require.NoError(t, err)
	assert.Equal(t, "one\ntwo\n", string(b), "the preview changed nothing")
	_, err = alice.Approve(ctx, w.ID, seen.ConfirmationPhrase, "")
	require.NoError(t, err)
	require.Equal(t, "succeeded", waitFinal(t, agent, w.ID).Status)
	b, err = os.ReadFile(filepath.Join(ws, "notes.txt"))
	require.NoError(t, err)
	assert.Equal(t, "one\n2\n", string(b))

	n, err := agent.Submit(ctx, client.SubmitRequest{Tool: "fs.write", Args: map[string]any{"workspace": "main", "path": "new/file.txt", "content": "fresh\n"}})
	require.NoError(t, err)
	_, p = previewOf(t, ctx, alice, n.ID)
	assert.Contains(t, p.Diff, "+fresh")
	assert.Contains(t, p.Diff, "new file")

	bad, err := agent.Submit(ctx, client.SubmitRequest{Tool: "fs.patch", Args: map[string]any{"workspace": "main",
		"patch": "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n one\n-absent\n+x\n"}})
	require.NoError(t, err)
	_, p = previewOf(t, ctx, alice, bad.ID)
	assert.Contains(t, p.Error, "does not apply")
}

// TestCommandSetSeparationOfDuties: with separation_of_duties, the agent's
// owner cannot approve its command set (403), and the refused approval
// records nothing: the next run still asks; another reviewer can.
func TestCommandSetSeparationOfDuties(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	repo := lifecycleRepo(t)
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Repos: map[string]string{"app": repo}})
	ctx := env.Ctx()
	olga, alice := env.Reviewer("olga"), env.Reviewer("alice")
	_, err := env.Admin.Do(ctx, http.MethodPost, "/api/v1/agents", map[string]string{"id": "bot", "name": "Bot", "owner": "olga"}, nil)
	require.NoError(t, err)
	_, err = env.Admin.PutAgentPolicy(ctx, "bot", codingPolicy)
	require.NoError(t, err)
	_, err = env.Admin.PutFleetPolicy(ctx, map[string]any{"rules": []map[string]any{}, "settings": map[string]any{"separation_of_duties": true}})
	require.NoError(t, err)
	tok, err := env.Admin.IssueAgentToken(ctx, "bot", 0)
	require.NoError(t, err)
	agent := env.Client(tok.Token)

	created, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.create", Args: map[string]any{"repo": "app"}})
	require.NoError(t, err)
	wt := result(t, waitFinal(t, agent, created.ID)).Worktree
	first, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.run", Args: map[string]any{"worktree": wt, "command": "test"}})
	require.NoError(t, err)
	seen, _ := previewOf(t, ctx, alice, first.ID)
	_, err = olga.Approve(ctx, first.ID, seen.ConfirmationPhrase, "")
	assert.Equal(t, http.StatusForbidden, client.StatusOf(err), "the owner: %v", err)

	second, err := agent.Submit(ctx, client.SubmitRequest{Tool: "worktree.run", Args: map[string]any{"worktree": wt, "command": "lint"}})
	require.NoError(t, err)
	got, _ := previewOf(t, ctx, alice, second.ID)
	assert.Equal(t, "pending", got.Status, "the refused approval recorded no command set")

	_, err = alice.Approve(ctx, first.ID, seen.ConfirmationPhrase, "")
	require.NoError(t, err)
	require.Equal(t, "succeeded", waitFinal(t, agent, first.ID).Status)
}

// TestCommandSetApprovalHeldByADenyBudget: an approved command set lets
// later worktree.runs go without a reviewer, but not past a budget whose
// effect is deny: every way into approved passes the same check
// (hitl.Service.mutate). Two runs submitted while the worker is busy both
// fit when submitted (pending: nothing spent yet); when their command sets
// are read, the approved set approves the first and not the second, which
// waits for a reviewer (who is refused too). Before, both ran.
func TestCommandSetApprovalHeldByADenyBudget(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	repo := lifecycleRepo(t)
	execPol := sandbox.DefaultPolicy()
	require.NoError(t, execPol.Enable("sleep"))
	// One job at a time, so that a sleep holds the worker.
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Repos: map[string]string{"app": repo},
		Workspaces: map[string]string{"main": workspace(t)}, ExecPolicy: &execPol, Host: worker.HostSettings{Concurrency: 1}})
	rules := append([]map[string]any{{"id": "sleep", "tool": "exec", "effect": "allow"}}, codingPolicy["rules"].([]map[string]any)...)
	agent := env.Agent("coder", map[string]any{"rules": rules, "settings": codingPolicy["settings"]})
	alice := env.Reviewer("alice")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	submit := submitter(t, ctx, agent)
	wt := result(t, waitFinal(t, agent, submit("worktree.create", map[string]any{"repo": "app"}).ID)).Worktree
	first := submit("worktree.run", map[string]any{"worktree": wt, "command": "test"})
	seen, _ := previewOf(t, ctx, alice, first.ID)
	_, err := alice.Approve(ctx, first.ID, seen.ConfirmationPhrase, "")
	require.NoError(t, err, "the command set is approved")
	require.Equal(t, "succeeded", waitFinal(t, agent, first.ID).Status)

	_, err = env.Admin.PutAgentPolicy(ctx, "coder", map[string]any{"rules": rules, "settings": codingPolicy["settings"],
		"budgets": []map[string]any{{"id": "runs", "tool": "worktree.run", "amount": "1", "per": "1h", "limit": json.Number("1"), "effect": "deny"}}})
	require.NoError(t, err)
	busy := submit("exec", map[string]any{"argv": []any{"sleep", "60"}, "workspace": "main"})
	eventually(t, 30*time.Second, "the worker busy", func() bool {
		a, err := agent.Get(ctx, busy.ID)
		require.NoError(t, err)
		return a.Status == "running"
	})
	runs := []*client.Action{submit("worktree.run", map[string]any{"worktree": wt, "command": "lint"}),
		submit("worktree.run", map[string]any{"worktree": wt, "command": "lint"})}
	for _, r := range runs {
		require.Equal(t, "pending", r.Status, "%+v", r.Decision)
	}
	_, err = env.Admin.Stop(ctx, busy.ID, "free the worker")
	require.NoError(t, err)
	waitFinal(t, agent, submit("worktree.diff", map[string]any{"worktree": wt}).ID)
	statuses := map[string]int{}
	for _, r := range runs {
		got, err := alice.Get(ctx, r.ID)
		require.NoError(t, err)
		statuses[got.Status]++
		if got.Status == "pending" {
			_, err = alice.Approve(ctx, r.ID, got.ConfirmationPhrase, "")
			assert.Equal(t, http.StatusConflict, client.StatusOf(err))
			assert.ErrorContains(t, err, "would pass a budget whose effect is deny")
		}
	}
	assert.Equal(t, 1, statuses["pending"], "one run waits: %v", statuses)
	assert.Equal(t, 1, statuses["approved"]+statuses["running"]+statuses["succeeded"], "one run went: %v", statuses)
}
