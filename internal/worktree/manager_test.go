package worktree

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sh runs a git command for test setup and inspection. It switches the
// planted programs off for itself, so that any marker left behind was left
// by the code under test.
func sh(t *testing.T, dir string, args ...string) string {
	t.Helper()
	safe := []string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.pager=cat", "-C", dir}
	cmd := exec.Command("git", append(safe, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// hostileRepo makes a repository whose hooks, fsmonitor, filter, textconv
// and merge driver would each leave a marker file if git ever ran them.
func hostileRepo(t *testing.T) (repo, markers string) {
	t.Helper()
	_, err := exec.LookPath("git")
	require.NoError(t, err, "git is needed")
	root := t.TempDir()
	repo, markers = filepath.Join(root, "repo"), filepath.Join(root, "markers")
	require.NoError(t, os.MkdirAll(markers, 0o755))
	sh(t, root, "init", "-q", "-b", "main", repo)
	require.NoError(t, os.WriteFile(filepath.Join(repo, "app.txt"), []byte("line one\nline two\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".gitattributes"), []byte("* filter=evil diff=evil merge=evil\n"), 0o644))
	sh(t, repo, "add", ".")
	sh(t, repo, "commit", "-q", "-m", "initial")

	touch := func(name string) string { return "touch " + filepath.Join(markers, name) }
	for _, hook := range []string{"post-checkout", "pre-commit", "commit-msg", "post-commit", "post-merge", "pre-merge-commit", "reference-transaction", "post-rewrite"} {
		path := filepath.Join(repo, ".git", "hooks", hook)
		require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+touch("hook-"+hook)+"\n"), 0o755))
	}
	for key, value := range map[string]string{
		"core.fsmonitor":      filepath.Join(repo, ".git", "hooks", "fsmonitor-evil"),
		"core.hooksPath":      filepath.Join(repo, ".git", "hooks"),
		"filter.evil.clean":   touch("filter-clean") + "; cat",
		"filter.evil.smudge":  touch("filter-smudge") + "; cat",
		"filter.evil.process": touch("filter-process"),
		"diff.evil.textconv":  touch("textconv") + "; cat",
		"diff.evil.command":   touch("diff-command"),
		"merge.evil.driver":   touch("merge-driver"),
		"core.pager":          touch("pager"),
		"diff.external":       touch("external-diff"),
	} {
		sh(t, repo, "config", key, value)
	}
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".git", "hooks", "fsmonitor-evil"), []byte("#!/bin/sh\n"+touch("fsmonitor")+"\n"), 0o755))
	// Setup ran with the hooks in place but before they existed for its own
	// commit; start from a clean marker directory.
	entries, _ := os.ReadDir(markers)
	for _, e := range entries {
		require.NoError(t, os.Remove(filepath.Join(markers, e.Name())))
	}
	return repo, markers
}

func assertNothingRan(t *testing.T, markers string) {
	t.Helper()
	entries, err := os.ReadDir(markers)
	require.NoError(t, err)
	var ran []string
	for _, e := range entries {
		ran = append(ran, e.Name())
	}
	assert.Empty(t, ran, "repository-controlled programs ran")
}

func newManager(t *testing.T, repo string) *Manager {
	return &Manager{Repos: map[string]string{"app": repo}, Root: filepath.Join(t.TempDir(), "worktrees")}
}

func TestWorktreeLifecycleRunsNothingFromTheRepository(t *testing.T) {
	t.Parallel()
	repo, markers := hostileRepo(t)
	m := newManager(t, repo)
	ctx := context.Background()

	info, err := m.Create(ctx, "app", "")
	require.NoError(t, err)
	assert.Equal(t, "main", info.Base)
	assert.True(t, strings.HasPrefix(info.Branch, "airlock/wt-"))
	assert.FileExists(t, filepath.Join(info.Path, "app.txt"))

	require.NoError(t, os.WriteFile(filepath.Join(info.Path, "app.txt"), []byte("line one\nline 2\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(info.Path, "new.txt"), []byte("hello\n"), 0o644))
	diff, err := m.Diff(ctx, info.Worktree)
	require.NoError(t, err)
	assert.Contains(t, diff, "-line two\n+line 2")
	assert.Contains(t, diff, "+hello")

	p, err := m.Prepare(ctx, info.Worktree, "coder-1")
	require.NoError(t, err)
	assert.Len(t, p.Commit, 40)
	assert.Equal(t, diff, p.Diff, "the preview is exactly the diff")
	assert.Equal(t, "coder-1 <coder-1@agents.airlock>", sh(t, repo, "log", "-1", "--format=%an <%ae>", p.Commit))

	merged, err := m.Merge(ctx, info.Worktree, p.Commit)
	require.NoError(t, err)
	assert.Equal(t, p.Commit, merged, "fast-forward to exactly the approved commit")
	assert.Equal(t, p.Commit, sh(t, repo, "rev-parse", "main"))
	got, err := os.ReadFile(filepath.Join(repo, "app.txt"))
	require.NoError(t, err)
	assert.Equal(t, "line one\nline 2\n", string(got), "the checked-out base follows the merge")

	require.NoError(t, m.Abandon(ctx, info.Worktree))
	assert.NoDirExists(t, info.Path)
	assert.Empty(t, sh(t, repo, "branch", "--list", info.Branch))
	_, err = m.Open(info.Worktree)
	assert.Error(t, err)
	assertNothingRan(t, markers)
}

func TestMergeTakesOnlyThePinnedCommit(t *testing.T) {
	t.Parallel()
	repo, markers := hostileRepo(t)
	m := newManager(t, repo)
	ctx := context.Background()
	info, err := m.Create(ctx, "app", "main")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(info.Path, "a.txt"), []byte("a\n"), 0o644))
	p, err := m.Prepare(ctx, info.Worktree, "coder")
	require.NoError(t, err)
	// The agent sneaks in another commit after the reviewer saw the diff.
	require.NoError(t, os.WriteFile(filepath.Join(info.Path, "b.txt"), []byte("b\n"), 0o644))
	_, err = m.Prepare(ctx, info.Worktree, "coder")
	require.NoError(t, err)
	before := sh(t, repo, "rev-parse", "main")
	_, err = m.Merge(ctx, info.Worktree, p.Commit)
	var refusal *Error
	require.ErrorAs(t, err, &refusal)
	assert.Contains(t, err.Error(), "moved since the approval")
	assert.Equal(t, before, sh(t, repo, "rev-parse", "main"), "nothing merged")
	assertNothingRan(t, markers)
}

func TestMergeConflictIsReportedNotResolved(t *testing.T) {
	t.Parallel()
	repo, markers := hostileRepo(t)
	m := newManager(t, repo)
	ctx := context.Background()
	info, err := m.Create(ctx, "app", "")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(info.Path, "app.txt"), []byte("line one\nfrom the agent\n"), 0o644))
	p, err := m.Prepare(ctx, info.Worktree, "coder")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(repo, "app.txt"), []byte("line one\nfrom a human\n"), 0o644))
	sh(t, repo, "commit", "-q", "-am", "human change")
	before := sh(t, repo, "rev-parse", "main")
	_, err = m.Merge(ctx, info.Worktree, p.Commit)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "conflict")
	assert.Equal(t, before, sh(t, repo, "rev-parse", "main"))
	assert.Empty(t, sh(t, repo, "status", "--porcelain", "--untracked-files=no"), "the merge was aborted cleanly")
	assertNothingRan(t, markers)
}

func TestMergeIntoABranchNotCheckedOut(t *testing.T) {
	t.Parallel()
	repo, markers := hostileRepo(t)
	sh(t, repo, "branch", "release")
	m := newManager(t, repo)
	ctx := context.Background()
	info, err := m.Create(ctx, "app", "release")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(info.Path, "feature.txt"), []byte("f\n"), 0o644))
	p, err := m.Prepare(ctx, info.Worktree, "coder")
	require.NoError(t, err)
	// release moves on meanwhile (a different file): a merge commit is needed.
	sh(t, repo, "checkout", "-q", "release")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "other.txt"), []byte("o\n"), 0o644))
	sh(t, repo, "add", "other.txt")
	sh(t, repo, "commit", "-q", "-m", "other")
	sh(t, repo, "checkout", "-q", "main")
	merged, err := m.Merge(ctx, info.Worktree, p.Commit)
	require.NoError(t, err)
	assert.Equal(t, merged, sh(t, repo, "rev-parse", "release"))
	assert.Equal(t, p.Commit, sh(t, repo, "rev-parse", merged+"^2"), "a merge commit of exactly the approved commit")
	assert.Equal(t, "f", sh(t, repo, "show", "release:feature.txt"))
	assertNothingRan(t, markers)
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	repo, _ := hostileRepo(t)
	m := newManager(t, repo)
	ctx := context.Background()
	_, err := m.Create(ctx, "other", "")
	assert.ErrorContains(t, err, "not served")
	_, err = m.Create(ctx, "app", "no-such-branch")
	assert.ErrorContains(t, err, "does not exist")
	_, err = m.Create(ctx, "app", "--upload-pack=evil")
	assert.ErrorContains(t, err, "not a branch name")
	for _, bad := range []string{"app", "app/../../etc", "app/wt-zzz", "other/wt-0123456789ab"} {
		_, err := m.Open(bad)
		assert.Error(t, err, bad)
	}
	info, err := m.Create(ctx, "app", "")
	require.NoError(t, err)
	_, err = m.Prepare(ctx, info.Worktree, "coder")
	assert.ErrorContains(t, err, "no changes")
}

// TestCreateRefusesAWorktreeBranchAsBase: a worktree's branch
// (airlock/wt-…) belongs to the agent whose worktree.create made it, and
// only that agent may name the worktree. A worktree made from it would
// hand another agent what that agent committed (its merge preview's
// commit), and merging it would move that agent's branch under its
// worktree: such a base is refused and nothing is made.
func TestCreateRefusesAWorktreeBranchAsBase(t *testing.T) {
	t.Parallel()
	repo, markers := hostileRepo(t)
	m := newManager(t, repo)
	ctx := context.Background()
	theirs, err := m.Create(ctx, "app", "")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(theirs.Path, "theirs.txt"), []byte("another agent's work\n"), 0o644))
	_, err = m.Prepare(ctx, theirs.Worktree, "coder-b")
	require.NoError(t, err)

	_, err = m.Create(ctx, "app", theirs.Branch)
	var refusal *Error
	require.ErrorAs(t, err, &refusal)
	assert.Contains(t, err.Error(), "worktree")
	entries, err := os.ReadDir(filepath.Join(m.Root, "app"))
	require.NoError(t, err)
	assert.Len(t, entries, 2, "only their worktree and its record")
	assert.Equal(t, theirs.Branch+"\n", sh(t, repo, "branch", "--list", "airlock/*", "--format=%(refname:short)")+"\n", "no branch made")
	assertNothingRan(t, markers)
}

// TestWorktreeGitIgnoresASwappedDotGit: an agent replaces the worktree's
// .git file with "gitdir: evil", pointing at a repository it wrote in the
// worktree (a filter driver for every path, an fsmonitor, hooks). The
// worker's own git calls on the worktree — its diff, the merge preview
// made before anyone approves, the impact preview's state — still work on
// the worktree's real repository and run none of it.
func TestWorktreeGitIgnoresASwappedDotGit(t *testing.T) {
	t.Parallel()
	repo, markers := hostileRepo(t)
	m := newManager(t, repo)
	ctx := context.Background()
	info, err := m.Create(ctx, "app", "")
	require.NoError(t, err)
	plantRepo(t, filepath.Join(info.Path, "evil"), markers)
	require.NoError(t, os.WriteFile(filepath.Join(info.Path, ".git"), []byte("gitdir: evil\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(info.Path, "app.txt"), []byte("line one\nline 2\n"), 0o644))

	diff, err := m.Diff(ctx, info.Worktree)
	assertNothingRan(t, markers)
	require.NoError(t, err)
	assert.Contains(t, diff, "-line two\n+line 2", "the diff against the worktree's base commit")

	im, err := m.BeginImpact(ctx, info.Worktree)
	assertNothingRan(t, markers)
	require.NoError(t, err)
	assert.Equal(t, info.BaseCommit, im.Before.Head, "HEAD of the worktree's own branch")
	require.NoError(t, im.Close())

	p, err := m.Prepare(ctx, info.Worktree, "coder")
	assertNothingRan(t, markers)
	require.NoError(t, err)
	assert.Equal(t, p.Commit, sh(t, repo, "rev-parse", info.Branch), "committed on the worktree's branch in its repository")
	assert.Equal(t, info.BaseCommit, sh(t, repo, "rev-parse", p.Commit+"^"))
	assert.Contains(t, p.Diff, "-line two\n+line 2")
}
