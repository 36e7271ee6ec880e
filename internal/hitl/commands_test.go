package hitl

import (
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
