package main

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// screen collects what the binary writes to its terminal.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// typeOnTerminal runs approve on a pseudo-terminal, types line when the
// prompt shows, and returns the exit code and the screen.
func typeOnTerminal(t *testing.T, r *runner, line string, args ...string) (int, string) {
	t.Helper()
	return typeOnTerminalAfter(t, r, nil, line, args...)
}

// typeOnTerminalAfter is typeOnTerminal calling meanwhile (when not nil)
// once the prompt shows, before the line is typed.
func typeOnTerminalAfter(t *testing.T, r *runner, meanwhile func(), line string, args ...string) (int, string) {
	t.Helper()
	cmd := r.command("", args...)
	cmd.Stdin = nil // pty.Start gives the command the terminal as stdin, stdout and stderr
	tty, err := pty.Start(cmd)
	require.NoError(t, err)
	defer tty.Close()
	var sc screen
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&sc, tty); close(copied) }() // ends with EIO when the command exits
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(sc.String(), "> "); {
		require.True(t, time.Now().Before(deadline), "no prompt: %q", sc.String())
		time.Sleep(10 * time.Millisecond)
	}
	if meanwhile != nil {
		meanwhile()
	}
	_, err = tty.Write([]byte(line + "\r"))
	require.NoError(t, err)
	code := 0
	if err := cmd.Wait(); err != nil {
		ee, ok := err.(interface{ ExitCode() int })
		require.True(t, ok, "%v", err)
		code = ee.ExitCode()
	}
	tty.Close()
	<-copied
	return code, sc.String()
}

// TestApproveTypedOnATerminal types the phrase on a real pseudo-terminal:
// the right phrase approves, a wrong one is refused by the server.
func TestApproveTypedOnATerminal(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("billing", map[string]any{"rules": []map[string]any{{"id": "pay", "tool": "payments.send", "effect": "approve"}}})
	reviewer := env.Reviewer("rita")
	r := newRunner(t, env.URL, reviewer.Token())

	a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "payments.send", Args: map[string]any{"amount": 5, "to": "acme"}})
	require.NoError(t, err)
	code, out := typeOnTerminal(t, r, "not the phrase", "actions", "approve", a.ID)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "airlock: wrong_confirmation: ")
	still, err := reviewer.Get(env.Ctx(), a.ID)
	require.NoError(t, err)
	assert.Equal(t, "pending", still.Status)

	code, out = typeOnTerminal(t, r, still.ConfirmationPhrase, "actions", "approve", a.ID, "--comment", "typed by hand")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, `"to":"acme"`, "the action is shown before the phrase is asked")
	assert.Contains(t, out, "type the confirmation phrase: "+still.ConfirmationPhrase)
	got, err := reviewer.Get(env.Ctx(), a.ID)
	require.NoError(t, err)
	assert.Equal(t, "approved", got.Status)
	require.Len(t, got.Approvals, 1)
	assert.Equal(t, "rita", got.Approvals[0].By)
	assert.Equal(t, "typed by hand", got.Approvals[0].Comment)
}

// TestApproveRefusesAPreviewThatChangedWhileTyping: a preview that lands
// (or is prepared again) while the phrase is typed was not shown: the
// approval carries the digest of the one shown, the server refuses it
// (exit 5) and the action stays pending. Before, the approval went out
// and pinned the preview nobody had seen.
func TestApproveRefusesAPreviewThatChangedWhileTyping(t *testing.T) {
	t.Parallel()
	env := apptest.Start(t)
	agent := env.Agent("billing", map[string]any{"rules": []map[string]any{{"id": "pay", "tool": "payments.send", "effect": "approve"}}})
	reviewer := env.Reviewer("rita")
	r := newRunner(t, env.URL, reviewer.Token())
	a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "payments.send", Args: map[string]any{"amount": 5, "to": "acme"}})
	require.NoError(t, err)
	landed := func() {
		_, err := env.App.Pool().Exec(env.Ctx(), `UPDATE actions SET preview = '{"status":"ready","diff":"+unseen"}', version = version + 1 WHERE id = $1`, a.ID)
		require.NoError(t, err)
	}
	shown, err := reviewer.Get(env.Ctx(), a.ID)
	require.NoError(t, err)
	code, out := typeOnTerminalAfter(t, r, landed, shown.ConfirmationPhrase, "actions", "approve", a.ID)
	assert.Equal(t, 5, code, out)
	assert.Contains(t, out, "is not the one the reviewer was shown")
	got, err := reviewer.Get(env.Ctx(), a.ID)
	require.NoError(t, err)
	assert.Equal(t, "pending", got.Status)
}
