package worker_test

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/sandbox"
)

// TestFSApprovalPinsThePreviewedFiles: a reviewer approves the diff an
// fs.write or fs.patch makes to the files as the preview read them, and
// nothing else. Approving is refused (409) while the preview is being
// prepared and when it failed (the patch does not apply: deny only). The
// approval pins the state of the files the preview read (preview.commit;
// preview_state in the action.approved event); a file changed between
// the preview and the run — here so that the patch's hunk would apply at
// an offset, to a block the reviewer never saw change — fails the run
// with the reason and leaves the file as it is; an unchanged file is
// written. Before, an fs.write could be approved before its diff was
// shown, and the approved patch applied to whatever the file had become.
func TestFSApprovalPinsThePreviewedFiles(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	ws := workspace(t)
	blocks := "first\nctx\nold\nctx\nsecond\nctx\nold\nctx\n"
	require.NoError(t, os.WriteFile(filepath.Join(ws, "blocks.txt"), []byte(blocks), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one\ntwo\n"), 0o644))
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Workspaces: map[string]string{"main": ws}})
	agent := env.Agent("editor", map[string]any{
		"rules":    []map[string]any{{"id": "files", "tool": "fs.*", "effect": "approve"}},
		"settings": map[string]any{"escalate_at": "none"},
	})
	alice := env.Reviewer("alice")
	env.Config.Worker = "off" // no worker leases the preview job now
	env.Restart()
	ctx := env.Ctx()
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(ws, name))
		require.NoError(t, err)
		return string(b)
	}
	audrey := env.Auditor("audrey")
	approvedState := func(id string) any {
		t.Helper()
		events, err := audrey.Audit(ctx, url.Values{"action_id": {id}, "kind": {"action.approved"}})
		require.NoError(t, err)
		require.Len(t, events.Events, 1)
		return events.Events[0].Data["preview_state"]
	}

	// No worker has read the file yet: nothing to approve.
	write, err := agent.Submit(ctx, client.SubmitRequest{Tool: "fs.write", Args: map[string]any{"workspace": "main", "path": "notes.txt", "content": "one\n2\n"}})
	require.NoError(t, err)
	require.Equal(t, "pending", write.Status, "%+v", write.Decision)
	seen, err := alice.Get(ctx, write.ID)
	require.NoError(t, err)
	require.Empty(t, seen.Preview)
	_, err = alice.Approve(ctx, write.ID, seen.ConfirmationPhrase, "")
	assert.Equal(t, http.StatusConflict, client.StatusOf(err), "%v", err)
	assert.ErrorContains(t, err, "preview of this fs.write is not ready yet")
	still, err := alice.Get(ctx, write.ID)
	require.NoError(t, err)
	assert.Equal(t, "pending", still.Status)
	assert.Empty(t, still.Approvals)

	env.Config.Worker = "embedded"
	env.Restart()

	// The patch was previewed against the first block; the file changes
	// so that its hunk would apply to the second.
	patch, err := agent.Submit(ctx, client.SubmitRequest{Tool: "fs.patch", Args: map[string]any{"workspace": "main",
		"patch": "--- a/blocks.txt\n+++ b/blocks.txt\n@@ -2,3 +2,3 @@\n ctx\n-old\n+new\n ctx\n"}})
	require.NoError(t, err)
	require.Equal(t, "pending", patch.Status, "%+v", patch.Decision)
	seen, p := previewOf(t, ctx, alice, patch.ID)
	require.Empty(t, p.Error)
	require.Len(t, p.Commit, 64, "the preview names the state of the file it read")
	edited := "first\nctx\nkept\nctx\nsecond\nctx\nold\nctx\n"
	require.NoError(t, os.WriteFile(filepath.Join(ws, "blocks.txt"), []byte(edited), 0o644))
	_, err = alice.Approve(ctx, patch.ID, seen.ConfirmationPhrase, "")
	require.NoError(t, err)
	done := waitFinal(t, agent, patch.ID)
	assert.Equal(t, "failed", done.Status, "%s", done.Result)
	assert.Contains(t, result(t, done).Error, "blocks.txt changed since the reviewer saw its diff: submit again")
	assert.Equal(t, edited, read("blocks.txt"), "the patch did not apply elsewhere")
	assert.Equal(t, p.Commit, approvedState(patch.ID), "the approval recorded the state it pinned")

	// The write's file did not change since its preview: it is written.
	seen, p = previewOf(t, ctx, alice, write.ID)
	require.Empty(t, p.Error)
	require.Len(t, p.Commit, 64)
	assert.Contains(t, p.Diff, "-two\n+2\n")
	_, err = alice.Approve(ctx, write.ID, seen.ConfirmationPhrase, "")
	require.NoError(t, err)
	done = waitFinal(t, agent, write.ID)
	require.Equal(t, "succeeded", done.Status, "%s", done.Result)
	assert.Equal(t, "one\n2\n", read("notes.txt"))
	assert.Equal(t, p.Commit, approvedState(write.ID))

	// A patch that does not apply can only be denied.
	bad, err := agent.Submit(ctx, client.SubmitRequest{Tool: "fs.patch", Args: map[string]any{"workspace": "main",
		"patch": "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n one\n-absent\n+x\n"}})
	require.NoError(t, err)
	seen, p = previewOf(t, ctx, alice, bad.ID)
	require.Contains(t, p.Error, "does not apply")
	_, err = alice.Approve(ctx, bad.ID, seen.ConfirmationPhrase, "")
	assert.Equal(t, http.StatusConflict, client.StatusOf(err), "%v", err)
	assert.ErrorContains(t, err, "can only be denied")
	denied, err := alice.Deny(ctx, bad.ID, "does not apply")
	require.NoError(t, err)
	assert.Equal(t, "denied", denied.Status)
	assert.Equal(t, "one\n2\n", read("notes.txt"))
}
