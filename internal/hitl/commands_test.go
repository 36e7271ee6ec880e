package hitl

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCommands(t *testing.T) {
	cmds, err := ParseCommands([]byte("test: go test ./...\nlint: go vet ./...\n"))
	require.NoError(t, err)
	assert.Equal(t, []Command{{"lint", "go vet ./..."}, {"test", "go test ./..."}}, cmds)
	for _, bad := range []string{"", "- a\n- b\n", "test: {a: b}\n", "'bad name': x\n", "test: ''\n"} {
		_, err := ParseCommands([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
	assert.NotEqual(t, CommandsHash([]byte("test: a\n")), CommandsHash([]byte("test: a \n")), "any byte is another set")
}

func TestPatchPaths(t *testing.T) {
	patch := "diff --git a/x.go b/y.go\nrename from x.go\nrename to y.go\n--- a/x.go\n+++ b/y.go\n@@ -1 +1 @@\n-a\n+b\n" +
		"--- /dev/null\n+++ b/.git/hooks/pre-commit\t2024-01-01\n"
	assert.Equal(t, []string{"x.go", "y.go", ".git/hooks/pre-commit"}, PatchPaths(patch))
	assert.Empty(t, PatchPaths("not a patch"))
}

// patchHeaderCases are patches whose files git apply finds outside the
// "diff --git a/X b/Y" names: extended headers (copy/rename, quoted or
// not), prefixes other than a/ and b/, timestamps, -p0 guessed from an
// earlier traditional patch. want are paths PatchPaths must name.
var patchHeaderCases = []struct {
	name, patch string
	want        []string
}{
	{"copy", "diff --git a/x b/y\ncopy from .env\ncopy to leak.txt\n", []string{".env", "leak.txt"}},
	{"rename", "diff --git a/x b/y\nrename from ro.txt\nrename to moved.txt\n", []string{"ro.txt", "moved.txt"}},
	{"rename-old-new", "diff --git a/x b/y\nrename old ro.txt\nrename new moved.txt\n", []string{"ro.txt", "moved.txt"}},
	{"copy-quoted", "diff --git a/x b/y\ncopy from \"\\056env\"\ncopy to \"q\\tz\"\n", []string{".env", "q\tz"}},
	{"copy-cr", "diff --git a/x b/y\ncopy from .env\rjunk\ncopy to leak.txt\n", []string{".env", "leak.txt"}},
	{"rename-spaces", "diff --git a/x b/y\nrename from my .env\nrename to my copy\n", []string{"my .env", "my copy"}},
	{"copy-then-hunk", "diff --git a/x b/x\ncopy from .env\ncopy to x2\n--- a/.env\n+++ b/x2\n@@ -1 +1 @@\n-SECRET\n+S\n", []string{".env", "x2"}},
	{"git-other-prefix", "diff --git x/.env y/.env\n--- x/.env\n+++ y/.env\n@@ -1 +1 @@\n-SECRET\n+PWN\n", []string{".env"}},
	{"traditional-other-prefix", "--- x/.env\n+++ y/.env\n@@ -1 +1 @@\n-SECRET\n+PWN\n", []string{".env"}},
	{"traditional-timestamps", "--- a/.env 2024-01-01 10:00:00\n+++ b/.env 2024-01-01 10:00:00.123456789 +0100\n@@ -1 +1 @@\n-SECRET\n+PWN\n", []string{".env"}},
	{"sticky-p0", "--- y\n+++ y\n@@ -1 +1 @@\n-y\n+Y\ndiff --git a/.env b/.env\n--- a/.env\n+++ b/.env\n@@ -1 +1 @@\n-A\n+PWN\n", []string{"y", "a/.env", "b/.env"}},
	{"header-spaces", "diff --git a/my new b/my new\nnew file mode 100644\nindex 0000000..e69de29\n", []string{"my new"}},
	{"header-quoted", "diff --git \"a/q\\tnew\" \"b/q\\tnew\"\nnew file mode 100644\nindex 0000000..e69de29\n", []string{"q\tnew"}},
	{"plain", "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-x\n+X\n", []string{"x"}},
}

func TestPatchPathsExtendedHeaders(t *testing.T) {
	for _, c := range patchHeaderCases {
		got := PatchPaths(c.patch)
		for _, w := range c.want {
			assert.Containsf(t, got, w, "%s: %q", c.name, c.patch)
		}
	}
	assert.Equal(t, []string{"x"}, PatchPaths("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-x\n+X\n"), "no a/ or b/ names")
	assert.NotEmpty(t, FSPathProblem(ToolFSPatch, map[string]any{"patch": "diff --git a/x b/y\ncopy from /etc/passwd\ncopy to p\n"}), "copy from an absolute path")
	assert.NotEmpty(t, FSPathProblem(ToolFSPatch, map[string]any{"patch": "diff --git a/x b/y\nrename from x\nrename to \"..\\057x\"\n"}), "rename out, quoted")
	assert.NotEmpty(t, FSPathProblem(ToolFSPatch, map[string]any{"patch": "--- /dev/null\n+++ /etc/cron.d/x\n@@ -0,0 +1 @@\n+x\n"}), "an absolute name")
}

// TestPatchPathsAgainstGitApply applies each case with the real git apply
// in a fresh repository: every file it changes, creates or removes is one
// PatchPaths names.
func TestPatchPathsAgainstGitApply(t *testing.T) {
	_, err := exec.LookPath("git")
	require.NoError(t, err, "git is needed (apt-get install git)")
	env := append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C")
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "core.quotePath=false"}, args...)...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		require.NoErrorf(t, err, "git %v: %s", args, out)
		return string(out)
	}
	for _, c := range patchHeaderCases {
		dir := t.TempDir()
		git(dir, "init", "-q", ".")
		for name, content := range map[string]string{".env": "SECRET\n", "ro.txt": "ro\n", "x": "x\n", "y": "y\n", "a/.env": "A\n", "my .env": "M\n"} {
			require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
		}
		git(dir, "add", "-A")
		git(dir, "commit", "-qm", "base")
		pf := filepath.Join(t.TempDir(), "p.patch")
		require.NoError(t, os.WriteFile(pf, []byte(c.patch), 0o644))
		git(dir, "apply", pf)
		got := PatchPaths(c.patch)
		status := git(dir, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
		changed := 0
		for _, e := range strings.Split(status, "\x00") {
			if len(e) < 4 {
				continue
			}
			changed++
			assert.Containsf(t, got, e[3:], "%s: git apply changed %q", c.name, e[3:])
		}
		assert.Positivef(t, changed, "%s: git apply changed nothing", c.name)
	}
}

func TestWorktreeRunTarget(t *testing.T) {
	target, err := TargetOf(ToolWorktreeRun, map[string]any{"worktree": "app/wt-1", "command": "test"})
	require.NoError(t, err)
	assert.Equal(t, "repo:app", target)
	for _, args := range []map[string]any{
		{"worktree": "app/wt-1"}, {"worktree": "app/wt-1", "command": "rm -rf /"}, {"command": "test"},
	} {
		_, err := TargetOf(ToolWorktreeRun, args)
		assert.Error(t, err, "%v", args)
	}
	_, err = TargetOf(ToolFSWrite, map[string]any{"workspace": "main", "path": "a.txt"})
	assert.Error(t, err, "fs.write without content")
	_, err = TargetOf(ToolFSPatch, map[string]any{"worktree": "app/wt-1", "patch": "nothing"})
	assert.Error(t, err, "fs.patch naming no file")
	for _, p := range []string{"/etc/passwd", "../x", "a/../../x", "~/.bashrc", ".", "a\\b"} {
		assert.NotEmpty(t, FSPathProblem(ToolFSWrite, map[string]any{"path": p}), "%q", p)
	}
	assert.NotEmpty(t, FSPathProblem(ToolFSPatch, map[string]any{"patch": "--- a/x\n+++ b/../../etc/x\n"}), "a patch climbing out")
	assert.Empty(t, FSPathProblem(ToolFSWrite, map[string]any{"path": "src/./a.go"}))
	_, err = TargetOf(ToolFSWrite, map[string]any{"worktree": "app/wt-1", "path": "src/a.go", "content": ""})
	assert.NoError(t, err)
}
