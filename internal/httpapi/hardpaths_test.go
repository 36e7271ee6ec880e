package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
	"github.com/airlockhq/airlock/internal/pathrule"
	"github.com/airlockhq/airlock/internal/sandbox"
)

// allowEverything lets every call through policy, risk and injection
// alike: whatever is denied below is denied by the hard path tier alone.
var allowEverything = map[string]any{
	"rules":    []map[string]any{{"id": "all", "tool": "*", "effect": "allow"}},
	"settings": map[string]any{"escalate_at": "none", "injection_action": "allow"},
}

func hardPathsEnv(t *testing.T) *apptest.Env {
	t.Helper()
	pol := sandbox.DefaultPolicy()
	require.NoError(t, pol.Enable("cp", "mv", "rm", "mkdir", "touch"))
	return apptest.Start(t, apptest.Options{ExecPolicy: &pol})
}

func argvOf(v ...string) []any {
	out := make([]any, len(v))
	for i, s := range v {
		out[i] = s
	}
	return out
}

// requireHardDenied submits and checks the call is denied by the tier
// named source, with a reason naming entry.
func requireHardDenied(t *testing.T, agent *client.Client, tool string, args map[string]any, source, entry string) *client.Action {
	t.Helper()
	a, err := agent.Submit(context.Background(), client.SubmitRequest{Tool: tool, Args: args})
	require.NoError(t, err)
	require.Equalf(t, "denied", a.Status, "%s %v: %s", tool, args, a.Decision.Reason)
	require.Equalf(t, source, a.Decision.Source, "%s %v: %s", tool, args, a.Decision.Reason)
	require.Containsf(t, a.Decision.Reason, fmt.Sprintf("%q", entry), "%s %v", tool, args)
	return a
}

// exampleFor is a path each built-in deny entry covers.
func exampleFor(entry string) string {
	switch {
	case strings.HasPrefix(entry, "~/"):
		return entry + "/x"
	case entry == ".env.*":
		return "app/.env.production"
	case strings.HasPrefix(entry, "*"):
		return "certs/server" + entry[1:]
	}
	return "sub/" + entry
}

// TestDenyPathsBuiltinAtSubmit: every built-in deny entry is denied at
// submit for a file tool and for exec, even under a policy allowing
// everything, with decision.source deny_paths and a reason naming it.
func TestDenyPathsBuiltinAtSubmit(t *testing.T) {
	t.Parallel()
	env := hardPathsEnv(t)
	agent := env.Agent("hard", allowEverything)
	for _, entry := range pathrule.BuiltinDeny {
		p := exampleFor(entry)
		requireHardDenied(t, agent, "fs.read", map[string]any{"path": p}, "deny_paths", entry)
		// Relative spellings only: an absolute one would be the validator's.
		execPath := p
		if strings.HasPrefix(p, "~/") {
			execPath = "../../" + p[2:] // leaves the workspace for a home directory
		}
		requireHardDenied(t, agent, "exec", map[string]any{"workspace": "main", "argv": argvOf("cat", execPath)}, "deny_paths", entry)
	}
	// Nothing reached a reviewer or a worker: no pending, no running.
	for _, status := range []string{"pending", "approved"} {
		page, err := env.Admin.ListActions(env.Ctx(), map[string][]string{"status": {status}})
		require.NoError(t, err)
		assert.Empty(t, page.Actions, status)
	}
}

// TestDenyPathsSpellings: "~", $HOME, "./", "..", repeated slashes,
// backslashes, case, other users' homes, nested keys and flag values are
// all caught; near misses are not.
func TestDenyPathsSpellings(t *testing.T) {
	t.Parallel()
	env := hardPathsEnv(t)
	agent := env.Agent("spell", allowEverything)
	for _, args := range []map[string]any{
		{"path": "~/.ssh/id_ecdsa"},
		{"path": "$HOME/.aws/credentials"},
		{"path": "/home/alice/.ssh/config"},
		{"path": "/root/.gnupg"},
		{"path": "~//.ssh///known_hosts"},
		{"path": "~/./projects/../.ssh/x"},
		{"path": "./.env"},
		{"path": "src/../.env"},
		{"path": "../.ssh/config"},
		{"file": "config\\.ENV"},
		{"options": map[string]any{"nested": []any{map[string]any{"target": "deploy/tls.key"}}}},
		{"query": "x", "paths": []any{"ok.txt", "keys/id_rsa"}},
	} {
		a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "fs.read", Args: args})
		require.NoError(t, err)
		assert.Equalf(t, "deny_paths", a.Decision.Source, "%v: %s", args, a.Decision.Reason)
	}
	requireHardDenied(t, agent, "exec", map[string]any{"workspace": "main", "argv": argvOf("grep", "--file=./.env", "x", "notes.txt")}, "deny_paths", ".env")
	requireHardDenied(t, agent, "exec", map[string]any{"workspace": "main", "argv": argvOf("cat", "a//b/./../.env.local")}, "deny_paths", ".env.*")
	for _, args := range []map[string]any{
		{"path": "README.md"}, {"path": "~/.sshrc.d/notes"}, {"path": "src/env.go"}, {"path": ".envrc"}, {"path": "~/.config/git/config"},
	} {
		a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "fs.read", Args: args})
		require.NoError(t, err)
		assert.Equalf(t, "approved", a.Status, "%v: %s", args, a.Decision.Reason)
	}
}

// TestDenyPathsSettingsMergeNeverRemove: fleet and agent entries add to the
// built-in list; an agent list without a default still has it; the
// merged list is what the effective settings show; bad entries get 422.
func TestDenyPathsSettingsMergeNeverRemove(t *testing.T) {
	t.Parallel()
	env := hardPathsEnv(t)
	ctx := env.Ctx()
	_, err := env.Admin.PutFleetPolicy(ctx, map[string]any{"rules": []any{}, "settings": map[string]any{"deny_paths": []string{"secrets"}}})
	require.NoError(t, err)
	agent := env.Agent("merge", map[string]any{
		"rules":    []map[string]any{{"id": "all", "tool": "*", "effect": "allow"}},
		"settings": map[string]any{"escalate_at": "none", "deny_paths": []string{"~/.vault-token", "/srv/private"}},
	})
	requireHardDenied(t, agent, "fs.read", map[string]any{"path": "app/secrets/db.txt"}, "deny_paths", "secrets")
	requireHardDenied(t, agent, "fs.read", map[string]any{"path": "~/.vault-token"}, "deny_paths", "~/.vault-token")
	requireHardDenied(t, agent, "fs.read", map[string]any{"path": "/srv/private/x"}, "deny_paths", "/srv/private")
	requireHardDenied(t, agent, "fs.read", map[string]any{"path": "~/.ssh/id_rsa"}, "deny_paths", "~/.ssh")

	for _, bad := range []any{[]string{"~"}, []string{""}, []string{"../up"}, []string{"https://example.com/x"}, "not-a-list"} {
		status, err := env.Admin.Do(ctx, http.MethodPut, "/api/v1/agents/merge/policy",
			map[string]any{"rules": []any{}, "settings": map[string]any{"deny_paths": bad}}, nil)
		require.Error(t, err, "%v", bad)
		assert.Containsf(t, []int{http.StatusUnprocessableEntity, http.StatusBadRequest}, status, "%v", bad)
		if _, isList := bad.([]string); isList {
			assert.Equalf(t, http.StatusUnprocessableEntity, status, "%v", bad)
		}
	}
	status, err := env.Admin.Do(ctx, http.MethodPut, "/api/v1/fleet/policy",
		map[string]any{"rules": []any{}, "settings": map[string]any{"read_only_paths": []string{"/"}}}, nil)
	require.Error(t, err)
	assert.Equal(t, http.StatusUnprocessableEntity, status)
}

// TestReadOnlyPathsAtSubmit: a write, delete or move of a read-only path,
// or of a directory holding one, is refused for file tools and exec (cp's
// destination, sed -i, mv); .git metadata and the global git config are
// read-only for every tool; reading them is not refused by this tier.
func TestReadOnlyPathsAtSubmit(t *testing.T) {
	t.Parallel()
	env := hardPathsEnv(t)
	agent := env.Agent("ro", map[string]any{
		"rules":    []map[string]any{{"id": "all", "tool": "*", "effect": "allow"}},
		"settings": map[string]any{"escalate_at": "none", "injection_action": "allow", "read_only_paths": []string{"config/prod.yaml"}},
	})
	ro := "read_only_paths"
	requireHardDenied(t, agent, "fs.write", map[string]any{"workspace": "main", "path": "config/prod.yaml", "content": "x"}, ro, "config/prod.yaml")
	requireHardDenied(t, agent, "fs.write", map[string]any{"workspace": "main", "path": "./config//prod.yaml", "content": "x"}, ro, "config/prod.yaml")
	requireHardDenied(t, agent, "fs.patch", map[string]any{"workspace": "main", "patch": patchOf("config/prod.yaml")}, ro, "config/prod.yaml")
	requireHardDenied(t, agent, "fs.delete", map[string]any{"path": "config"}, ro, "config/prod.yaml")
	requireHardDenied(t, agent, "fs.move", map[string]any{"src": "config", "dst": "old-config"}, ro, "config/prod.yaml")
	requireHardDenied(t, agent, "fs.move", map[string]any{"src": "notes.txt", "dst": "config/prod.yaml"}, ro, "config/prod.yaml")
	ws := func(argv ...string) map[string]any {
		return map[string]any{"workspace": "main", "argv": argvOf(argv...)}
	}
	requireHardDenied(t, agent, "exec", ws("cp", "notes.txt", "config/prod.yaml"), ro, "config/prod.yaml")
	requireHardDenied(t, agent, "exec", ws("sed", "-i", "s/a/b/", "config/prod.yaml"), ro, "config/prod.yaml")
	requireHardDenied(t, agent, "exec", ws("mv", "config", "elsewhere"), ro, "config/prod.yaml")
	requireHardDenied(t, agent, "exec", ws("rm", "-r", "config"), ro, "config/prod.yaml")

	// .git/hooks/pre-commit and the global git config, for every tool
	// that writes.
	for _, tool := range []string{"fs.write", "fs.patch", "fs.delete", "file.put", "editor.save", "mystery.tool", "shell.run"} {
		args := func(p, content string) map[string]any {
			switch tool {
			case "fs.write": // the built-ins name their root
				return map[string]any{"workspace": "main", "path": p, "content": content}
			case "fs.patch":
				return map[string]any{"workspace": "main", "patch": patchOf(p)}
			}
			return map[string]any{"path": p, "content": content}
		}
		requireHardDenied(t, agent, tool, args(".git/hooks/pre-commit", "#!/bin/sh\nid\n"), ro, ".git")
		requireHardDenied(t, agent, tool, args("~/.gitconfig", "[core]"), ro, "~/.gitconfig")
		requireHardDenied(t, agent, tool, args("~/.config/git/ignore", "x"), ro, "~/.config/git")
	}
	// A coding agent's own settings, as its hook names them (absolute
	// paths): before, only a path relative to the workspace's root was
	// refused (found by a review).
	for p, entry := range map[string]string{
		"/home/dev/repo/.claude/settings.json":     "**/.claude/settings.json",
		"/srv/app/sub/.claude/settings.local.json": "**/.claude/settings.local.json",
		"/home/dev/.codex/hooks.json":              "**/.codex/hooks.json",
	} {
		requireHardDenied(t, agent, "claude-code.write", map[string]any{"file_path": p, "content": `{"hooks":{}}`}, ro, entry)
	}
	requireHardDenied(t, agent, "claude-code.edit", map[string]any{"file_path": "/home/dev/.claude.json", "old_string": "a", "new_string": "b"}, ro, "~/.claude.json")
	requireHardDenied(t, agent, "exec", ws("cp", "notes.txt", ".git/hooks/pre-commit"), ro, ".git")
	requireHardDenied(t, agent, "exec", ws("sed", "-i", "s/a/b/", "sub/.git/hooks/pre-commit"), ro, ".git")
	requireHardDenied(t, agent, "exec", ws("touch", ".git/hooks/pre-commit"), ro, ".git")
	requireHardDenied(t, agent, "fs.copy", map[string]any{"src": "notes.txt", "dst": ".git/hooks/pre-commit"}, ro, ".git")

	// Reads and copies out are not writes.
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"fs.read", map[string]any{"path": "config/prod.yaml"}},
		{"fs.read", map[string]any{"path": ".git/HEAD"}},
		{"fs.copy", map[string]any{"src": "config/prod.yaml", "dst": "backup.yaml"}},
		{"exec", ws("cat", "config/prod.yaml", ".git/HEAD")},
		{"exec", ws("cp", "config/prod.yaml", "copy.yaml")},
		{"fs.write", map[string]any{"workspace": "main", "path": "config/other.yaml", "content": "x"}},
	} {
		a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: c.tool, Args: c.args})
		require.NoError(t, err)
		assert.NotEqualf(t, ro, a.Decision.Source, "%s %v: %s", c.tool, c.args, a.Decision.Reason)
	}
}

// TestPatchHeadersAtSubmit: an fs.patch is checked for every file git
// apply would touch, not only those of its "diff --git" line: a copy
// from a denied file (leaking it), a rename of a read-only one, quoted
// names, and ---/+++ prefixes other than a/ and b/.
func TestPatchHeadersAtSubmit(t *testing.T) {
	t.Parallel()
	env := hardPathsEnv(t)
	agent := env.Agent("headers", map[string]any{
		"rules":    []map[string]any{{"id": "all", "tool": "*", "effect": "allow"}},
		"settings": map[string]any{"escalate_at": "none", "injection_action": "allow", "read_only_paths": []string{"config/prod.yaml"}},
	})
	patch := func(p string) map[string]any { return map[string]any{"workspace": "main", "patch": p} }
	deny, ro := "deny_paths", "read_only_paths"
	requireHardDenied(t, agent, "fs.patch", patch("diff --git a/x b/y\ncopy from .env\ncopy to leak.txt\n"), deny, ".env")
	requireHardDenied(t, agent, "fs.patch", patch("diff --git a/x b/y\ncopy from \"\\056env\"\ncopy to leak.txt\n"), deny, ".env")
	requireHardDenied(t, agent, "fs.patch", patch("diff --git a/notes.txt b/notes.txt\ncopy from deploy/.env\ncopy to notes.txt\n"), deny, ".env")
	requireHardDenied(t, agent, "fs.patch", patch("diff --git a/x b/y\nrename from config/prod.yaml\nrename to gone.yaml\n"), ro, "config/prod.yaml")
	requireHardDenied(t, agent, "fs.patch", patch("diff --git a/x b/y\nrename old notes.txt\nrename new config/prod.yaml\n"), ro, "config/prod.yaml")
	requireHardDenied(t, agent, "fs.patch", patch("diff --git x/config/prod.yaml y/config/prod.yaml\n--- x/config/prod.yaml\n+++ y/config/prod.yaml\n@@ -1 +1 @@\n-a\n+b\n"), ro, "config/prod.yaml")
	a, err := agent.Submit(env.Ctx(), client.SubmitRequest{Tool: "fs.patch", Args: patch("diff --git a/notes.txt b/copy.txt\ncopy from notes.txt\ncopy to copy.txt\n")})
	require.NoError(t, err)
	assert.NotContains(t, []string{deny, ro}, a.Decision.Source, "a copy of an ordinary file: %s", a.Decision.Reason)
}

// TestHardPathsBeatGrantsAndAlways: neither a conversation grant nor an
// "always" allow rule for the exact target, nor a reviewer, lets a
// deny-path call through; it is never pending.
func TestHardPathsBeatGrantsAndAlways(t *testing.T) {
	t.Parallel()
	env := hardPathsEnv(t)
	ctx := env.Ctx()
	agent := env.Agent("granted", map[string]any{
		"rules": []map[string]any{
			{"id": "key", "tool": "fs.read", "effect": "allow", "target": map[string]any{"path": "~/.ssh/id_rsa"}},
			{"id": "gitcfg", "tool": "fs.write", "effect": "allow", "target": map[string]any{"path": ".git/config"}},
			{"id": "reads", "tool": "fs.read", "effect": "approve"},
		},
		"settings": map[string]any{"escalate_at": "none"},
	})
	requireHardDenied(t, agent, "fs.read", map[string]any{"path": "~/.ssh/id_rsa"}, "deny_paths", "~/.ssh")
	requireHardDenied(t, agent, "fs.write", map[string]any{"workspace": "main", "path": ".git/config", "content": "x"}, "read_only_paths", ".git")

	// A conversation grant on the approve rule covers later reads in it...
	alice := env.Reviewer("alice")
	first := submitIn(t, agent, "conv", "fs.read", map[string]any{"path": "notes.txt"})
	require.Equal(t, "pending", first.Status)
	_, err := approveWith(t, alice, first.ID, "conversation")
	require.NoError(t, err)
	covered := submitIn(t, agent, "conv", "fs.read", map[string]any{"path": "other.txt"})
	require.Equal(t, "grant", covered.Decision.Source, "the grant works: %s", covered.Decision.Reason)
	// ...but never a deny path.
	a := submitIn(t, agent, "conv", "fs.read", map[string]any{"path": "deploy/.env"})
	assert.Equal(t, "denied", a.Status)
	assert.Equal(t, "deny_paths", a.Decision.Source)
	// And no reviewer can approve it.
	_, err = alice.Approve(ctx, a.ID, "anything", "once")
	require.Error(t, err)
	got, err := env.Admin.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, "denied", got.Status)
	assert.Empty(t, got.ConfirmationPhrase)

	// Audited like any denial.
	events, err := env.Admin.Audit(ctx, map[string][]string{"action_id": {a.ID}})
	require.NoError(t, err)
	require.NotEmpty(t, events.Events)
	assert.Equal(t, "action.submitted", events.Events[0].Kind)
}

// patchOf is a unified diff that creates path, for fs.patch.
func patchOf(path string) string {
	return "--- /dev/null\n+++ b/" + path + "\n@@ -0,0 +1 @@\n+x\n"
}
