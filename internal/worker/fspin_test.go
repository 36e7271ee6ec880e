package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/worker"
	"github.com/airlockhq/airlock/internal/worktree"
)

// TestFSRunPinnedToThePreviewedFiles: the preview of an fs.write or
// fs.patch names the state of the files it read (Commit, a SHA-256
// digest); a run pinned to it is refused, changing nothing, when a file
// changed since — for fs.patch also a change that would let the hunk
// apply at an offset, somewhere the reviewer never saw — or when a file
// it would make appeared meanwhile; the same run on the files as
// previewed goes through, and one without a pin (allowed by policy, no
// preview) runs as before. Before, the preview named no state and the
// run ignored the pin.
func TestFSRunPinnedToThePreviewedFiles(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	write := func(name, content string) {
		t.Helper()
		require.NoError(t, os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644))
	}
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(ws, name))
		require.NoError(t, err)
		return string(b)
	}
	exe := &worker.SandboxExecutor{Workspaces: map[string]string{"main": ws},
		Worktrees: &worktree.Manager{Root: filepath.Join(workspace(t), "worktrees")}}
	ctx := context.Background()
	preview := func(tool string, args map[string]any) string {
		t.Helper()
		p := exe.Run(ctx, &client.Job{Kind: hitl.JobPreview, Tool: tool, Args: args})
		require.Empty(t, p.Error)
		require.Len(t, p.Commit, 64, "the preview names the state of the files it read")
		return p.Commit
	}
	run := func(tool, pin string, args map[string]any) client.JobResult {
		return exe.Run(ctx, &client.Job{Kind: tool, Tool: tool, Pin: pin, Args: args})
	}

	// fs.write: the file changed after the preview.
	write("notes.txt", "one\ntwo\n")
	w := map[string]any{"workspace": "main", "path": "notes.txt", "content": "one\n2\n"}
	pin := preview(hitl.ToolFSWrite, w)
	assert.Equal(t, pin, preview(hitl.ToolFSWrite, w), "the same files, the same state")
	write("notes.txt", "one\ntwo\nthree\n")
	r := run(hitl.ToolFSWrite, pin, w)
	assert.Contains(t, r.Error, "notes.txt changed since the reviewer saw its diff: submit again")
	assert.Equal(t, "one\ntwo\nthree\n", read("notes.txt"), "nothing written")
	fresh := preview(hitl.ToolFSWrite, w)
	assert.NotEqual(t, pin, fresh)
	r = run(hitl.ToolFSWrite, fresh, w)
	require.Empty(t, r.Error)
	assert.Equal(t, "one\n2\n", read("notes.txt"), "the files as previewed: written")

	// fs.write of a new file: the file appeared after the preview.
	n := map[string]any{"workspace": "main", "path": "new.txt", "content": "fresh\n"}
	pin = preview(hitl.ToolFSWrite, n)
	write("new.txt", "someone else's\n")
	r = run(hitl.ToolFSWrite, pin, n)
	assert.Contains(t, r.Error, "new.txt changed since the reviewer saw its diff")
	assert.Equal(t, "someone else's\n", read("new.txt"))

	// fs.patch: the reviewer saw the hunk change the first of two blocks
	// with the same context; the first block changed since, and the
	// hunk would now apply at an offset, to the second one.
	blocks := "first\nctx\nold\nctx\nsecond\nctx\nold\nctx\n"
	write("blocks.txt", blocks)
	patch := map[string]any{"workspace": "main", "patch": "--- a/blocks.txt\n+++ b/blocks.txt\n@@ -2,3 +2,3 @@\n ctx\n-old\n+new\n ctx\n"}
	pin = preview(hitl.ToolFSPatch, patch)
	edited := "first\nctx\nkept\nctx\nsecond\nctx\nold\nctx\n"
	write("blocks.txt", edited)
	r = run(hitl.ToolFSPatch, pin, patch)
	assert.Contains(t, r.Error, "blocks.txt changed since the reviewer saw its diff: submit again")
	assert.Equal(t, edited, read("blocks.txt"), "nothing patched")
	write("blocks.txt", blocks)
	r = run(hitl.ToolFSPatch, pin, patch)
	require.Empty(t, r.Error, "the file is again as previewed")
	assert.Equal(t, "first\nctx\nnew\nctx\nsecond\nctx\nold\nctx\n", read("blocks.txt"))

	// A patch of several files names them all.
	write("a.txt", "a\n")
	write("notes.txt", "one\ntwo\n")
	two := map[string]any{"workspace": "main", "patch": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n" +
		"--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"}
	pin = preview(hitl.ToolFSPatch, two)
	write("notes.txt", "one\ntwo\n\n")
	r = run(hitl.ToolFSPatch, pin, two)
	assert.Contains(t, r.Error, "one of a.txt, notes.txt changed since the reviewer saw its diff")
	assert.Equal(t, "a\n", read("a.txt"), "all or nothing")

	// No pin: the policy allowed the call, no reviewer saw a diff; git
	// apply finds the context where it is.
	write("blocks.txt", edited)
	r = run(hitl.ToolFSPatch, "", patch)
	require.Empty(t, r.Error)
	assert.Equal(t, "first\nctx\nkept\nctx\nsecond\nctx\nnew\nctx\n", read("blocks.txt"), "applied at an offset")
	r = run(hitl.ToolFSWrite, "", w)
	require.Empty(t, r.Error)
	assert.Equal(t, "one\n2\n", read("notes.txt"))
}

// TestFSPreviewShowsTheWholeDiff: the preview of an fs.write or fs.patch
// whose diff is over what a reviewer can be shown (512 KiB) fails, so the
// call can only be denied, instead of showing a cut diff whose files the
// approval would pin. Before, the diff was cut silently and approvable.
func TestFSPreviewShowsTheWholeDiff(t *testing.T) {
	t.Parallel()
	ws := workspace(t)
	exe := &worker.SandboxExecutor{Workspaces: map[string]string{"main": ws},
		Worktrees: &worktree.Manager{Root: filepath.Join(workspace(t), "worktrees")}}
	big := strings.Repeat("a line the reviewer must see whole\n", 20<<10) // 700 KiB
	for tool, args := range map[string]map[string]any{
		hitl.ToolFSWrite: {"workspace": "main", "path": "big.txt", "content": big},
		hitl.ToolFSPatch: {"workspace": "main", "patch": "--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,20480 @@\n+" +
			strings.ReplaceAll(strings.TrimSuffix(big, "\n"), "\n", "\n+") + "\n"},
	} {
		p := exe.Run(context.Background(), &client.Job{Kind: hitl.JobPreview, Tool: tool, Args: args})
		assert.Contains(t, p.Error, "over the 512 KiB a reviewer can be shown", tool)
		assert.False(t, p.Truncated, tool)
		assert.NoFileExists(t, filepath.Join(ws, "big.txt"))
	}
}
