package pathrule

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBuiltinDenyMatchesEverySpelling(t *testing.T) {
	t.Parallel()
	s := Compile("/home/srv", BuiltinDeny)
	cases := map[string][]string{
		"~/.ssh":                      {"~/.ssh/id_ecdsa_x", "~/.ssh", "/home/bob/.ssh/config", "/root/.ssh/known_hosts", "$HOME/.ssh/x", "${HOME}/.ssh/x", "~//.ssh///config", "~/./.ssh/x", "~/foo/../.ssh/x", "../.ssh/authorized", "/home/srv/.ssh/x", "/Users/bob/.SSH/x", `~\.ssh\x`},
		"~/.aws":                      {"~/.aws/credentials", "/home/u/.aws"},
		"~/.gnupg":                    {"~/.gnupg/pubring.kbx"},
		"~/.netrc":                    {"~/.netrc"},
		"~/.docker/config.json":       {"~/.docker/config.json"},
		"~/.kube/config":              {"~/.kube/config"},
		"~/.npmrc":                    {"~/.npmrc"},
		"~/.pypirc":                   {"~/.pypirc"},
		"~/.config/gcloud":            {"~/.config/gcloud/application_default_credentials.json"},
		"~/.azure":                    {"~/.azure/accessTokens.json"},
		"~/.cargo/credentials":        {"~/.cargo/credentials"},
		"~/.cargo/credentials.toml":   {"~/.cargo/credentials.toml"},
		"~/.config/gh":                {"~/.config/gh/hosts.yml"},
		"~/.git-credentials":          {"~/.git-credentials"},
		"~/.config/git/credentials":   {"~/.config/git/credentials"},
		".env":                        {".env", "./.env", "a/b/.env", "/srv/app/.env", "a/../.env", "'.env'"},
		".env.*":                      {".env.local", "x/.env.production"},
		"id_rsa":                      {"id_rsa", "/tmp/keys/id_rsa"},
		"id_ed25519":                  {"backup/id_ed25519"},
		"*.pem":                       {"server.pem", "/etc/ssl/x.PEM"},
		"*.key":                       {"tls.key"},
		"~/.config/airlock":           {"~/.config/airlock/token", "/home/dev/.config/airlock"},
		"~/.claude/.credentials.json": {"~/.claude/.credentials.json"},
		"~/.codex/auth.json":          {"/root/.codex/auth.json"},
	}
	for entry, paths := range cases {
		for _, p := range paths {
			e, ok := s.Match(p)
			require.Truef(t, ok, "%q should be denied by %q", p, entry)
			if entry != "~/.ssh" || p != "~/.ssh/id_ecdsa_x" {
				require.Equalf(t, entry, e.String(), "entry for %q", p)
			}
		}
	}
	for _, p := range []string{"README.md", "src/env.go", ".envrc", "~/.sshx", "/home/bob/projects/ssh", "key", "pem", "docs/.environment", "~/.config/git/config"} {
		_, ok := s.Match(p)
		require.Falsef(t, ok, "%q should not be denied", p)
	}
	require.Len(t, cases, len(BuiltinDeny), "a case for every built-in entry")
}

func TestReadOnlyContains(t *testing.T) {
	t.Parallel()
	s := Compile("", BuiltinReadOnly, []string{"config/prod.yaml", "/srv/keep"})
	for _, p := range []string{".git/hooks/pre-commit", "repo/.git/config", "/workspace/.git", "~/.gitconfig", "~/.config/git/ignore",
		"config", "./config", "config/prod.yaml", "/workspace/config", "~", "~/.config", "/", "/srv", "/srv/keep/x", "/home/bob"} {
		_, ok := s.Contains(p)
		require.Truef(t, ok, "%q should be protected", p)
	}
	for _, p := range []string{"src/main.go", ".gitignore", "config2", "/srv/other", "docs"} {
		_, ok := s.Contains(p)
		require.Falsef(t, ok, "%q should not be protected", p)
	}
	for _, p := range []string{".", "./", "/workspace"} {
		e, ok := Compile("", []string{".git"}, []string{"config/prod.yaml"}).Contains(p)
		require.Truef(t, ok, "%q holds config/prod.yaml", p)
		require.Equal(t, "config/prod.yaml", e.String())
	}
	// A coding agent's settings are read-only wherever they are (a hook
	// sends absolute paths): what is written there runs at its next
	// start. Before, only git's were, and then only at the workspace's
	// root (found by reviews).
	for _, p := range []string{".claude/settings.json", "./.claude/settings.local.json", "/workspace/.mcp.json", "sub/.mcp.json",
		"~/.claude/settings.json", "/home/dev/.codex/hooks.json", ".codex/config.toml", "/home/me/repo/.claude/settings.json",
		"/srv/app/.claude/settings.local.json", "sub/.claude/settings.json", "~/.claude.json", "/root/.claude.json"} {
		_, ok := s.Match(p)
		require.Truef(t, ok, "%q should be read-only", p)
	}
	for _, p := range []string{".claude/commands/x.md", "x.claude/settings.json", ".claude/settings.json.bak", "repo/.claude.json.bak", "settings.json"} {
		_, ok := s.Match(p)
		require.Falsef(t, ok, "%q should not be read-only", p)
	}
	// A directory holds them where its last components start one (a
	// delete or a move of .claude takes the settings with it), and so do
	// the roots; another directory does not, as for a basename glob.
	// Before, a delete of /home/dev/.claude passed (found by a review).
	for _, p := range []string{".claude", "/home/dev/.claude", "~/.claude", "repo/.codex", "/srv/app/.claude", ".", "/workspace", "~", "/"} {
		e, ok := s.Contains(p)
		require.Truef(t, ok, "%q holds an agent's settings", p)
		require.Truef(t, strings.HasPrefix(e.String(), "**/") || strings.HasPrefix(e.String(), "~/") || e.String() == "config/prod.yaml" || e.String() == "/srv/keep", "%q: %s", p, e)
	}
	for _, p := range []string{"/home/me/repo", "src", ".claude/commands", "/srv/app"} {
		e, ok := s.Contains(p)
		require.Falsef(t, ok, "%q holds no read-only entry, found %s", p, e)
	}
	home := Compile("", []string{"~/.gitconfig"})
	for _, p := range []string{".", "src", "./x"} {
		_, ok := home.Contains(p)
		require.Falsef(t, ok, "the workspace %q holds no home directory", p)
	}
	for _, p := range []string{"~", "~/", "$HOME", "/home", "/home/bob", "/root", "/"} {
		_, ok := home.Contains(p)
		require.Truef(t, ok, "%q holds ~/.gitconfig", p)
	}
}

func TestProblem(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", " ", "~", "/", ".", "../b", "https://x/y", "a\x00b", "[", "~/", "~/**/secrets.json", "/srv/**/x", "x/**/y", "**/**/x", "**/", "**"} {
		require.NotEmptyf(t, Problem(bad), "%q", bad)
	}
	for _, good := range []string{"secrets", "*.p12", "~/.vault-token", "/etc/shadow", "config/prod.yaml", "**/.config/app.yaml"} {
		require.Emptyf(t, Problem(good), "%q", good)
	}
}

// TestMatchFile: a workspace file matches entries as the command sees it
// and by its host path: an absolute entry naming it, and "~" entries when
// the workspace is a home directory (any /home/NAME, or the given home).
func TestMatchFile(t *testing.T) {
	deny := Compile("/srv/agent-home", BuiltinDeny, []string{"/srv/app/config/prod.yaml"})
	for _, c := range []struct {
		root, rel string
		want      bool
	}{
		{"/srv/app", "config/prod.yaml", true},
		{"/srv/app/", "config/prod.yaml", true},
		{"/srv/app", "config/dev.yaml", false},
		{"/srv/other", "config/prod.yaml", false},
		{"/home/dev", ".ssh/authorized_keys", true},
		{"/srv/agent-home", ".aws/credentials", true},
		{"/srv/work", ".ssh/authorized_keys", false},
		{"/srv/work", ".env", true},
		// A component of the root is not the file's: nothing is hidden
		// for where the workspace lives.
		{"/srv/id_rsa/app", "README.md", false},
		{"/srv/repos/.env/wt", "src/main.go", false},
		{"/srv/api.pem/app", "README.md", false},
		{"/workspace/.ssh", "x", false},
	} {
		_, got := deny.MatchFile(c.root, c.rel)
		if got != c.want {
			t.Errorf("MatchFile(%q, %q) = %v, want %v", c.root, c.rel, got, c.want)
		}
		if _, plain := deny.Match(c.rel); plain && !got {
			t.Errorf("MatchFile(%q, %q) misses what Match sees", c.root, c.rel)
		}
	}
}
