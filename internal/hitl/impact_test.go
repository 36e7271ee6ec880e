package hitl

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/policy"
)

const (
	testHead = "0123456789abcdef0123456789abcdef01234567"
	testTree = "89abcdef0123456789abcdef0123456789abcdef"
)

func pendingExec(preview string) *Action {
	a := &Action{Tool: ToolExec, Status: StatusPending, Args: map[string]any{"argv": []any{"cat", "secret.txt"}, "worktree": "app/wt-1"},
		Decision: Decision{Gate: GatePreview}}
	if preview != "" {
		a.Preview = json.RawMessage(preview)
	}
	return a
}

func readyPreview(t *testing.T) string {
	t.Helper()
	b, err := json.Marshal(previewOf(JobResult{ExitCode: 0, Stdout: "the secret\n", Diff: "diff --git a/x b/x\n+secret\n", Commit: testHead, Tree: testTree}))
	require.NoError(t, err)
	return string(b)
}

func TestWantsExecPreview(t *testing.T) {
	on := policy.EffectiveSettings{ExecPreview: true}
	assert.True(t, wantsExecPreview(pendingExec(""), on))
	assert.False(t, wantsExecPreview(pendingExec(""), policy.EffectiveSettings{}), "exec_preview off")
	ws := &Action{Tool: ToolExec, Args: map[string]any{"workspace": "main"}}
	assert.False(t, wantsExecPreview(ws, on), "a workspace has no worktree state to pin")
	assert.False(t, wantsExecPreview(&Action{Tool: ToolFSWrite, Args: map[string]any{"worktree": "app/wt-1"}}, on))
}

func TestExecPinNeedsAReadyPreview(t *testing.T) {
	_, err := execPin(pendingExec(""))
	assert.Equal(t, apperr.CodeConflict, apperr.CodeOf(err), "preparing")
	assert.Contains(t, err.Error(), "not ready yet")

	failed, err := json.Marshal(previewOf(JobResult{ExitCode: -1, Error: "the command did not finish in the preview: timeout after 1s", Commit: testHead, Tree: testTree}))
	require.NoError(t, err)
	_, err = execPin(pendingExec(string(failed)))
	assert.Equal(t, apperr.CodeConflict, apperr.CodeOf(err), "failed")
	assert.Contains(t, err.Error(), "can only be denied")

	_, err = execPin(pendingExec(`{"status":"ready","diff":"x"}`))
	assert.Equal(t, apperr.CodeConflict, apperr.CodeOf(err), "a preview without a state pins nothing")

	pin, err := execPin(pendingExec(readyPreview(t)))
	require.NoError(t, err)
	assert.Equal(t, testHead+":"+testTree, pin)

	noGate := pendingExec("")
	noGate.Decision.Gate = ""
	pin, err = execPin(noGate)
	require.NoError(t, err)
	assert.Empty(t, pin, "an exec that waits for no preview pins nothing")
}

func TestPreviewViews(t *testing.T) {
	preparing := pendingExec("")
	assert.Equal(t, PreviewPreparing, preparing.PreviewStatus())
	assert.JSONEq(t, `{"status":"preparing"}`, string(preparing.ForReviewer().Preview))
	assert.Empty(t, preparing.Preview, "the view never changes the stored action")

	ready := pendingExec(readyPreview(t))
	ready.Args["network"] = true
	var rv Preview
	require.NoError(t, json.Unmarshal(ready.ForReviewer().Preview, &rv))
	assert.Equal(t, PreviewReady, rv.Status)
	assert.Equal(t, "the secret\n", rv.Stdout)
	assert.Contains(t, rv.Diff, "+secret")
	assert.Contains(t, rv.Note, "without it", "the copy had no network")

	agent := ready.ForAgent()
	assert.NotContains(t, string(agent.Preview), "secret", "the agent never sees what the unapproved command printed or changed")
	var av Preview
	require.NoError(t, json.Unmarshal(agent.Preview, &av))
	assert.Equal(t, PreviewReady, av.Status)
	require.NotNil(t, av.State)
	assert.Equal(t, testTree, av.State.Tree)
	assert.Nil(t, av.ExitCode)

	// A merge preview stored before statuses were recorded gets one.
	merge := &Action{Tool: ToolWorktreeMerge, Status: StatusPending, Preview: json.RawMessage(`{"error":"interrupted"}`)}
	assert.True(t, strings.Contains(string(merge.ForAuditor().Preview), `"status":"failed"`))
	// Neither a decided action nor another tool shows a preparing preview.
	done := pendingExec("")
	done.Status = StatusDenied
	assert.Empty(t, done.ForAuditor().Preview)
	assert.Empty(t, (&Action{Tool: "payments.send", Status: StatusPending}).ForReviewer().Preview)
}
