package worktree

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// impactWorktree is a worktree of a hostile repository with an
// uncommitted change, an untracked file, an ignored file, a hard link and
// a symlink.
func impactWorktree(t *testing.T) (*Manager, Info, string) {
	t.Helper()
	repo, markers := hostileRepo(t)
	m := &Manager{Repos: map[string]string{"app": repo}, Root: filepath.Join(t.TempDir(), "wt")}
	info, err := m.Create(context.Background(), "app", "")
	require.NoError(t, err)
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(info.Path, name), []byte(content), 0o644))
	}
	write("app.txt", "line one\nline two\nuncommitted\n")
	write("notes.txt", "untracked\n")
	write(".gitignore", "build/\n")
	require.NoError(t, os.MkdirAll(filepath.Join(info.Path, "build"), 0o755))
	write("build/out.bin", "ignored\x00bytes\n")
	require.NoError(t, os.Link(filepath.Join(info.Path, "notes.txt"), filepath.Join(info.Path, "notes-link.txt")))
	require.NoError(t, os.Symlink("app.txt", filepath.Join(info.Path, "current")))
	return m, info, markers
}

// TestImpactCopyDiffMatchesInPlace: a change made in the preview's copy
// gives exactly the diff the same change made in the worktree gives, the
// copy leaves the worktree and its repository untouched, and no program
// the repository plants runs.
func TestImpactCopyDiffMatchesInPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, info, markers := impactWorktree(t)
	change := func(dir string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "app.txt"), []byte("line one\nline 2\x1b[2K\n"), 0o644))
		require.NoError(t, os.Remove(filepath.Join(dir, "notes-link.txt")))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "build", "out.bin"), []byte("rebuilt\n"), 0o644))
		require.NoError(t, os.Chmod(filepath.Join(dir, "build", "out.bin"), 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "new", "deep"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "new", "deep", "file.txt"), []byte("made\n"), 0o644))
	}
	headBefore := sh(t, info.Path, "rev-parse", "HEAD")
	statusBefore := sh(t, info.Path, "status", "--porcelain", "--ignored")

	im, err := m.BeginImpact(ctx, info.Worktree)
	require.NoError(t, err)
	assert.Equal(t, headBefore, im.Before.Head)
	assert.Len(t, im.Before.Tree, 40)
	copyDir, err := im.CopyOfWorktree(ctx, CopyLimits{Bytes: 1 << 20, Entries: 100})
	require.NoError(t, err)
	fi, err := os.Lstat(filepath.Join(copyDir, "current"))
	require.NoError(t, err)
	assert.Equal(t, os.ModeSymlink, fi.Mode().Type(), "a symlink is copied as a symlink")
	change(copyDir)
	previewDiff, previewTree, err := im.Diff(ctx, copyDir)
	require.NoError(t, err)
	require.NoError(t, im.Close())
	assert.NoDirExists(t, copyDir, "the copy is removed with the scratch repository")

	// The worktree is as it was: files, HEAD, index, status.
	again, err := m.BeginImpact(ctx, info.Worktree)
	require.NoError(t, err)
	assert.Equal(t, im.Before, again.Before, "the preview changed nothing in the worktree")
	assert.Equal(t, statusBefore, sh(t, info.Path, "status", "--porcelain", "--ignored"))
	b, err := os.ReadFile(filepath.Join(info.Path, "app.txt"))
	require.NoError(t, err)
	assert.Equal(t, "line one\nline two\nuncommitted\n", string(b))

	// The same change in place: the same diff.
	change(info.Path)
	realDiff, realTree, err := again.Diff(ctx, info.Path)
	require.NoError(t, err)
	require.NoError(t, again.Close())
	assert.Equal(t, previewDiff, realDiff)
	assert.Equal(t, previewTree, realTree)
	assert.Contains(t, previewDiff, "-uncommitted\n+line 2\u241b[2K", "the diff is against the worktree as it was, control bytes visible")
	assert.Contains(t, previewDiff, "deleted file mode 100644\nindex ", "a removed hard link shows")
	assert.Contains(t, previewDiff, "+++ b/build/out.bin", "an ignored file's change shows")
	assert.Contains(t, previewDiff, "old mode 100644\nnew mode 100755")
	assert.Contains(t, previewDiff, "+++ b/new/deep/file.txt")
	assert.NotContains(t, previewDiff, ".git\n")
	assert.Equal(t, headBefore, sh(t, info.Path, "rev-parse", "HEAD"))
	entries, err := os.ReadDir(markers)
	require.NoError(t, err)
	assert.Empty(t, entries, "no planted program ran")
}

// TestImpactStateSeesEveryChange: the state differs after any change a
// command could make to the files, and after a commit.
func TestImpactStateSeesEveryChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := map[string]func(t *testing.T, dir string){
		"an ignored file": func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "build", "out.bin"), []byte("x"), 0o644))
		},
		"the executable bit": func(t *testing.T, dir string) { require.NoError(t, os.Chmod(filepath.Join(dir, "notes.txt"), 0o755)) },
		"a symlink's target": func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "current")))
			require.NoError(t, os.Symlink("notes.txt", filepath.Join(dir, "current")))
		},
		"a commit": func(t *testing.T, dir string) { sh(t, dir, "commit", "-q", "--allow-empty", "-m", "more") },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, info, _ := impactWorktree(t)
			before, err := m.BeginImpact(ctx, info.Worktree)
			require.NoError(t, err)
			require.NoError(t, before.Close())
			change(t, info.Path)
			after, err := m.BeginImpact(ctx, info.Worktree)
			require.NoError(t, err)
			require.NoError(t, after.Close())
			assert.NotEqual(t, before.Before.Pin(), after.Before.Pin())
		})
	}
}

// TestImpactCopyBounds: a worktree over the copy's bounds is refused.
func TestImpactCopyBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, info, _ := impactWorktree(t)
	im, err := m.BeginImpact(ctx, info.Worktree)
	require.NoError(t, err)
	defer func() { require.NoError(t, im.Close()) }()
	_, err = im.CopyOfWorktree(ctx, CopyLimits{Entries: 3})
	var we *Error
	require.ErrorAs(t, err, &we)
	assert.Contains(t, we.Msg, "more than 3 files")
}
