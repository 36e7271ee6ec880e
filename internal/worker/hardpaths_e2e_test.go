package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/worker"
)

// hiddenWorkspace is a workspace holding secrets in every shape the
// sandbox must hide: a .env, a .env.local, a key under a directory the
// agent's own deny entry names, a hard link to the .env under an innocent
// name, a symlink named like a secret pointing at an innocent-looking
// file, and a .git directory.
func hiddenWorkspace(t *testing.T) string {
	t.Helper()
	ws := workspace(t)
	write := func(rel, content string) {
		p := filepath.Join(ws, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	write("notes.txt", "nothing hidden here\n")
	write(".env", "API_TOKEN=secret-dotenv\n")
	write("app/.env.local", "DB_PASSWORD=secret-local\n")
	write("vault/creds.txt", "secret-vault\n")
	write("real.txt", "secret-behind-link\n")
	write(".git/HEAD", "ref: refs/heads/main\n")
	write("sub/.git/config", "[core]\n")
	require.NoError(t, os.Link(filepath.Join(ws, ".env"), filepath.Join(ws, "docs-alias.txt")))
	require.NoError(t, os.Symlink("real.txt", filepath.Join(ws, "id_rsa")))
	return ws
}

// TestDenyPathsHiddenInTheSandbox: an exec through the embedded worker
// that walks the whole workspace (grep -r, find, cat of a hard-link alias)
// reads nothing of what deny_paths covers, built-in or the agent's own,
// while the rest of the workspace is there; read-only paths stay as they
// were whatever the command does.
func TestDenyPathsHiddenInTheSandbox(t *testing.T) {
	t.Parallel()
	require.NoError(t, sandbox.Available(), "bubblewrap is needed (apt-get install bubblewrap)")
	ws := hiddenWorkspace(t)
	pol := sandbox.DefaultPolicy()
	require.NoError(t, pol.Enable("mv"))
	env := apptest.Start(t, apptest.Options{Worker: "embedded", Workspaces: map[string]string{"main": ws}, ExecPolicy: &pol})
	agent := env.Agent("walker", map[string]any{
		"rules":    []map[string]any{{"id": "run", "tool": "exec", "effect": "allow"}},
		"settings": map[string]any{"escalate_at": "none", "injection_action": "allow", "deny_paths": []string{"vault"}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	runAction := func(argv ...string) *client.Action {
		t.Helper()
		a, err := agent.Submit(ctx, client.SubmitRequest{Tool: "exec", Args: map[string]any{"workspace": "main", "argv": argvAny(argv...)}})
		require.NoError(t, err)
		require.Equal(t, "approved", a.Status, "%v: %s", argv, a.Decision.Reason)
		return waitFinal(t, agent, a.ID)
	}
	run := func(argv ...string) client.JobResult {
		t.Helper()
		return result(t, runAction(argv...))
	}

	grep := run("grep", "-r", "secret", ".")
	assert.Equal(t, 1, grep.ExitCode, "grep finds no match: %q %q", grep.Stdout, grep.Stderr)
	assert.NotContains(t, grep.Stdout, "secret")
	grepNotes := run("grep", "-r", "nothing", ".")
	assert.Contains(t, grepNotes.Stdout, "notes.txt", "the rest of the workspace is there")

	alias := run("cat", "docs-alias.txt")
	assert.NotContains(t, alias.Stdout+alias.Stderr, "secret-dotenv", "a hard link to .env is hidden too")

	find := run("find", ".", "-type", "f")
	assert.Contains(t, find.Stdout, "./notes.txt")
	assert.NotContains(t, find.Stdout, "creds.txt", "the agent's own deny entry hides the directory's contents")

	// What was hidden is untouched on the host.
	b, err := os.ReadFile(filepath.Join(ws, ".env"))
	require.NoError(t, err)
	assert.Equal(t, "API_TOKEN=secret-dotenv\n", string(b))

	// A directory holding .git cannot be moved away with it, and .git
	// itself stays as it was (bound read-only).
	// A directory holding .git cannot be moved (the worker sees what the
	// submit could not), nor can a symlink lead to a hidden file.
	mv := runAction("mv", "sub", "moved")
	assert.Equal(t, "failed", mv.Status)
	assert.Contains(t, result(t, mv).Error, "read_only_paths")
	_, err = os.Stat(filepath.Join(ws, "sub", ".git", "config"))
	assert.NoError(t, err, "sub/.git is where it was")
	_, err = os.Stat(filepath.Join(ws, "moved"))
	assert.True(t, os.IsNotExist(err), "nothing moved")
	require.NoError(t, os.Symlink("app/.env.local", filepath.Join(ws, "innocent.txt")))
	link := runAction("cat", "innocent.txt")
	assert.Equal(t, "failed", link.Status)
	assert.Contains(t, result(t, link).Error, "deny_paths")
}

// TestExecOperandsMatchTheValidators: the submit-time operand reader sees
// sed -i's files and cp's destination as written, cp's sources as read.
func TestExecOperandsMatchTheValidators(t *testing.T) {
	t.Parallel()
	pol := sandbox.DefaultPolicy()
	require.NoError(t, pol.Enable("cp"))
	ops := worker.ExecOperands(pol)
	got, ok := ops(map[string]any{"argv": argvAny("cp", "a.txt", "b.txt", "dir")})
	require.True(t, ok)
	require.Len(t, got, 3)
	assert.False(t, got[0].Write)
	assert.False(t, got[1].Write)
	assert.True(t, got[2].Write)
	got, ok = ops(map[string]any{"argv": argvAny("sed", "-i", "s/a/b/", "x.txt")})
	require.True(t, ok)
	require.NotEmpty(t, got)
	assert.True(t, got[len(got)-1].Write)
	_, ok = ops(map[string]any{"argv": argvAny("curl", "x")})
	assert.False(t, ok, "a command the validators refuse names no operands")
}

func argvAny(v ...string) []any {
	out := make([]any, len(v))
	for i, s := range v {
		out[i] = s
	}
	return out
}
