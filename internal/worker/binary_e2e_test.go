package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/jsonx"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/worker"
)

// binaryFiles writes a workspace's binary files: NUL in text, and 40 KiB
// of bytes that are not UTF-8 (each U+FFFD once made text: 120 KiB) before
// a last line.
func binaryFiles(t *testing.T, ws string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "nul.bin"), []byte("a\x00b\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "ff.bin"), append(bytes.Repeat([]byte{0xff}, 40<<10), "end\n"...), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "ctl.txt"), []byte("\x1b[1mbold\x1b[0m\r\n\ttab é😀\n"), 0o644))
}

// assertFFTail checks the text of ff.bin's output: the last 50 KiB of it,
// from a character boundary, all U+FFFD but the last line.
func assertFFTail(t *testing.T, out string) {
	t.Helper()
	assert.True(t, utf8.ValidString(out))
	assert.LessOrEqual(t, len(out), 50<<10)
	assert.Greater(t, len(out), 50<<10-3)
	assert.True(t, strings.HasSuffix(out, "end\n"), "the tail is kept")
	assert.Equal(t, "", strings.Trim(strings.TrimSuffix(out, "end\n"), "\uFFFD"), "cut on a character boundary")
}

// TestBinaryOutputIsText: a command writing NUL or bytes that are not
// UTF-8, on stdout or stderr, gets a result of text the server's strict
// decoder takes: NUL as ␀, the other bytes as U+FFFD, each stream cut back
// to its last 50 KiB (truncated) when the replacements made it longer;
// control characters and valid text are kept as written.
func TestBinaryOutputIsText(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	ws := workspace(t)
	binaryFiles(t, ws)
	pol, err := worker.NewPolicy(nil, true, false)
	require.NoError(t, err)
	exe := &worker.SandboxExecutor{Workspaces: map[string]string{"main": ws}, Policy: pol,
		Options: sandbox.RunOptions{AllowUnboundedProcs: true, DiskQuota: 64 << 20}}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := func(argv ...any) client.JobResult {
		t.Helper()
		r := exe.Run(ctx, &client.Job{Kind: hitl.ToolExec, Args: map[string]any{"argv": argv, "workspace": "main"}})
		require.Empty(t, r.Error)
		require.Equal(t, 0, r.ExitCode)
		body, err := json.Marshal(map[string]any{"fence": 1, "result": r})
		require.NoError(t, err)
		require.NoError(t, jsonx.Check(body), "the server's decoder refuses the result")
		return r
	}

	r := run("cat", "nul.bin")
	assert.Equal(t, "a\u2400b\n", r.Stdout)
	assert.False(t, r.Truncated)

	r = run("cat", "ff.bin")
	assertFFTail(t, r.Stdout)
	assert.True(t, r.Truncated, "the stream was cut")

	r = run("sh", "-c", "cat nul.bin >&2; cat ff.bin >&2")
	assert.Empty(t, r.Stdout)
	assertFFTail(t, r.Stderr)
	assert.True(t, r.Truncated)

	r = run("cat", "ctl.txt")
	assert.Equal(t, "\x1b[1mbold\x1b[0m\r\n\ttab é😀\n", r.Stdout, "text and control characters are kept")
	assert.False(t, r.Truncated)
}

// TestBinaryOutputThroughTheServer: binary output no longer makes a
// result the server refuses; the action succeeds at once with the exit
// code and the output made text.
func TestBinaryOutputThroughTheServer(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	ws := workspace(t)
	binaryFiles(t, ws)
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Workspaces: map[string]string{"main": ws}})
	agent := env.Agent("runner", execPolicy)
	ctx := env.Ctx()
	cat := func(file string) *client.Action {
		t.Helper()
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{"argv": []any{"cat", file}, "workspace": "main"}})
		require.NoError(t, err)
		done := waitFinal(t, agent, a.ID)
		require.Equal(t, "succeeded", done.Status, "result: %.300s", done.Result)
		page, err := env.Admin.Audit(ctx, url.Values{"action_id": {a.ID}})
		require.NoError(t, err)
		assert.Equal(t, []string{"action.submitted", "action.running", "action.result"}, kinds(page.Events))
		return done
	}

	r := result(t, cat("nul.bin"))
	assert.Equal(t, 0, r.ExitCode)
	assert.Equal(t, "a\u2400b\n", r.Stdout)

	r = result(t, cat("ff.bin"))
	assert.Equal(t, 0, r.ExitCode)
	assertFFTail(t, r.Stdout)
	assert.True(t, r.Truncated)
}
