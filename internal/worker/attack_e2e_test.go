package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/sandbox"
)

// TestHostileExecThroughAirlock sends hostile exec calls the way an agent
// does — over HTTP, through an agent policy that allows exec, the
// submit-time validators, the embedded worker's second validation against
// the real workspace and bubblewrap — and shows each is refused (denied at
// submit, nothing queued) or contained when it runs. The sandbox package's
// attack suite covers the same ground case by case below the API; this is
// the whole path.
func TestHostileExecThroughAirlock(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	ws := workspace(t)
	require.NoError(t, os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one\ntwo\n"), 0o644))
	require.NoError(t, os.Symlink("/etc", filepath.Join(ws, "etc-link")))
	require.NoError(t, os.Mkdir(filepath.Join(ws, "data"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "data", "shadow"), []byte("harmless\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ws, "big.txt"), []byte(strings.Repeat("airlock runaway output\n", 20000)), 0o644))
	pol := sandbox.DefaultPolicy()
	require.NoError(t, pol.Enable("sleep"))
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Workspaces: map[string]string{"main": ws}, ExecPolicy: &pol})
	agent := env.Agent("hostile", map[string]any{
		"rules": []map[string]any{
			{"id": "run", "tool": "exec", "effect": "allow", "when": "!has(args.review)"},
			{"id": "review", "tool": "exec", "effect": "approve", "when": "has(args.review)"},
		},
		"settings": map[string]any{"escalate_at": "none", "injection_action": "allow"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	submit := func(args map[string]any) *client.Action {
		t.Helper()
		args["workspace"] = "main"
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: args})
		require.NoError(t, err)
		return a
	}
	argv := func(v ...string) []any {
		out := make([]any, len(v))
		for i, s := range v {
			out[i] = s
		}
		return out
	}

	refused := []struct {
		name   string
		args   map[string]any
		why    string
		source string // "" = validator
	}{
		{"path traversal", map[string]any{"argv": argv("cat", "../../etc/passwd")}, "escapes the workspace", ""},
		{"absolute path", map[string]any{"argv": argv("cat", "/etc/shadow")}, "outside the workspace", ""},
		// The hard path tier sees it first (internal/pathrule).
		{"ssh keys", map[string]any{"argv": argv("cat", "/root/.ssh/id_ed25519")}, `"~/.ssh"`, "deny_paths"},
		{"find -exec", map[string]any{"argv": argv("find", ".", "-exec", "sh", "-c", "id", ";")}, "-exec", ""},
		{"find -delete", map[string]any{"argv": argv("find", ".", "-delete")}, "-delete", ""},
		{"rg --pre", map[string]any{"argv": argv("rg", "--pre", "sh", "x", ".")}, "--pre", ""},
		{"sed e command", map[string]any{"argv": argv("sed", "1e id", "notes.txt")}, "sed", ""},
		{"sed w outside", map[string]any{"argv": argv("sed", "w /tmp/out", "notes.txt")}, "sed", ""},
		{"git -c core.pager", map[string]any{"argv": argv("git", "-c", "core.pager=sh -c id", "log")}, "-c", ""},
		{"git --exec-path", map[string]any{"argv": argv("git", "--exec-path=/tmp", "status")}, "exec-path", ""},
		{"shell chaining", map[string]any{"argv": argv("sh", "-c", "cat notes.txt; id")}, "sh", ""},
		{"not on the allowlist", map[string]any{"argv": argv("curl", "http://example.com")}, "not allowed", ""},
		{"wrapper", map[string]any{"argv": argv("env", "cat", "notes.txt")}, "not allowed", ""},
		{"network not allowed", map[string]any{"argv": argv("cat", "notes.txt"), "network": true}, "network", ""},
		{"write outside", map[string]any{"argv": argv("sort", "-o", "/tmp/sorted", "notes.txt")}, "outside the workspace", ""},
		{"timeout past the bound", map[string]any{"argv": argv("cat", "notes.txt"), "timeout_s": 86400}, "timeout", ""},
	}
	for _, c := range refused {
		a := submit(c.args)
		assert.Equal(t, "denied", a.Status, c.name)
		source := c.source
		if source == "" {
			source = "validator"
		}
		assert.Equal(t, source, a.Decision.Source, c.name)
		assert.Contains(t, a.Decision.Reason, c.why, c.name)
	}

	// Contained when run: the validators pass these, the sandbox holds.
	// A symlink out of the workspace: refused by the worker's validation
	// against the real files (the server only sees the path).
	link := waitFinal(t, agent, submit(map[string]any{"argv": argv("cat", "etc-link/shadow")}).ID)
	assert.Equal(t, "failed", link.Status)
	assert.Contains(t, result(t, link).Error, "outside the workspace")

	// The worker's environment does not reach the command.
	printenv := waitFinal(t, agent, submit(map[string]any{"argv": argv("printenv")}).ID)
	require.Equal(t, "succeeded", printenv.Status, "%s", printenv.Result)
	inside := result(t, printenv).Stdout
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "LANG" || name == "LANGUAGE" || name == "TZ" || name == "PATH" || name == "HOME" {
			continue // set by the sandbox to its own values
		}
		assert.NotContains(t, inside, kv, "the worker's %s leaked into the sandbox", name)
	}

	// A command past its timeout is killed.
	slow := waitFinal(t, agent, submit(map[string]any{"argv": argv("sleep", "30"), "timeout_s": 1}).ID)
	assert.Equal(t, "failed", slow.Status)
	assert.Contains(t, result(t, slow).Error, "timeout")

	// Runaway output is bounded: what comes back is the stream's tail.
	loud := waitFinal(t, agent, submit(map[string]any{"argv": argv("cat", "big.txt")}).ID)
	assert.True(t, result(t, loud).Truncated, "output is cut")
	assert.LessOrEqual(t, len(result(t, loud).Stdout), sandbox.DefaultMaxOutput)

	// Time of check, time of use: approved while data/ was a directory,
	// run after it became a link to /etc. The worker validates again.
	pending := submit(map[string]any{"argv": argv("cat", "data/shadow"), "review": true})
	require.Equal(t, "pending", pending.Status)
	require.NoError(t, os.RemoveAll(filepath.Join(ws, "data")))
	require.NoError(t, os.Symlink("/etc", filepath.Join(ws, "data")))
	rev := env.Reviewer("rev")
	seen, err := rev.Get(ctx, pending.ID)
	require.NoError(t, err)
	_, err = rev.Approve(ctx, pending.ID, seen.ConfirmationPhrase, "once")
	require.NoError(t, err)
	swapped := waitFinal(t, agent, pending.ID)
	assert.Equal(t, "failed", swapped.Status)
	assert.Contains(t, result(t, swapped).Error, "outside the workspace")
	assert.NotContains(t, result(t, swapped).Stdout, "root:")
}
