package risk

import (
	"net/url"
	"path"
	"strings"
)

// pathMatch says how a pathPattern must sit in the text around it.
type pathMatch uint8

const (
	// matchWhole: a path component (or run of components) on its own, e.g.
	// ".bashrc" in "~/.bashrc" but not in ".bashrc.bak" or "my.bashrc".
	matchWhole pathMatch = iota
	// matchPrefix: a component start, anything after: "/etc/cron" also
	// matches "/etc/cron.d/job".
	matchPrefix
	// matchSuffix: a file extension, ".pem" in "server.pem".
	matchSuffix
)

// pathPattern is one lowercase path fragment to look for in strings.
type pathPattern struct {
	pat   string
	how   pathMatch
	label string // shown in reasons; pat when empty
}

func (p pathPattern) name() string {
	if p.label != "" {
		return p.label
	}
	return p.pat
}

// codeLaterPatterns are targets whose contents run later, outside the
// approval of the call that writes them: shell startup files, git hooks and
// config (core.hooksPath, core.fsmonitor), autostart entries, systemd units,
// crontabs and CI configuration.
var codeLaterPatterns = []pathPattern{
	{pat: ".bashrc"}, {pat: ".bash_profile"}, {pat: ".bash_login"}, {pat: ".bash_logout"},
	{pat: ".profile"}, {pat: ".zshrc"}, {pat: ".zshenv"}, {pat: ".zprofile"}, {pat: ".zlogin"},
	{pat: ".zlogout"}, {pat: ".kshrc"}, {pat: ".cshrc"}, {pat: ".tcshrc"}, {pat: ".xprofile"},
	{pat: ".xinitrc"}, {pat: ".xsessionrc"}, {pat: ".envrc"},
	{pat: ".config/fish/config.fish"}, {pat: ".config/fish/conf.d", how: matchPrefix},
	{pat: "/etc/profile", how: matchPrefix}, {pat: "/etc/bash.bashrc"}, {pat: "/etc/zsh/", how: matchPrefix},
	{pat: "/etc/rc.local"}, {pat: "/etc/init.d/", how: matchPrefix},
	{pat: ".git/hooks"}, {pat: ".git/config"}, {pat: ".husky/", how: matchPrefix},
	{pat: "core.hookspath", how: matchPrefix}, {pat: "core.fsmonitor", how: matchPrefix},
	{pat: ".config/autostart"}, {pat: "/etc/xdg/autostart"}, {pat: "launchagents"}, {pat: "launchdaemons"},
	{pat: ".config/systemd/user"}, {pat: ".local/share/systemd/user"},
	{pat: "/etc/systemd/", how: matchPrefix}, {pat: "/lib/systemd/system"}, {pat: "/usr/lib/systemd/", how: matchPrefix},
	{pat: "crontab"}, {pat: "crontabs"}, {pat: "anacrontab"}, {pat: "/etc/cron", how: matchPrefix},
	{pat: "/var/spool/cron", how: matchPrefix},
	{pat: ".github/workflows"}, {pat: ".gitlab-ci.yml"}, {pat: ".gitlab-ci.yaml"}, {pat: ".circleci"},
	{pat: "jenkinsfile"}, {pat: ".travis.yml"}, {pat: "azure-pipelines.yml"}, {pat: "azure-pipelines.yaml"},
	{pat: "bitbucket-pipelines.yml"}, {pat: ".buildkite"}, {pat: ".drone.yml"},
	{pat: ".gitconfig", label: "~/.gitconfig"}, {pat: ".config/git/config"}, {pat: "/etc/gitconfig"},
	// Coding agents' settings: their hooks and MCP servers are commands the
	// agent runs at its next start, outside any approval (and where the
	// hook that sends its calls to Airlock is configured).
	{pat: ".claude/settings.json"}, {pat: ".claude/settings.local.json"}, {pat: ".claude.json"}, {pat: ".mcp.json"},
	{pat: ".codex/config.toml"}, {pat: ".codex/hooks.json"}, {pat: ".cursor/mcp.json"},
	{pat: ".vscode/mcp.json"}, {pat: ".gemini/settings.json"},
}

// buildFilePatterns are project files whose contents run when the project
// is built, installed, tested or opened: make, npm scripts, setup.py, editor
// tasks, pre-commit hooks, container builds and the tools in
// node_modules/.bin. Exec tools name them all the time (make, docker
// build) and are high risk anyway, so they count for other tools only.
var buildFilePatterns = []pathPattern{
	{pat: "makefile", label: "Makefile"}, {pat: "gnumakefile", label: "GNUmakefile"}, {pat: ".mk", how: matchSuffix, label: "*.mk"},
	{pat: "package.json"}, {pat: "setup.py"}, {pat: "conftest.py"},
	{pat: ".vscode/tasks.json"}, {pat: ".vscode/launch.json"}, {pat: ".pre-commit-config.yaml"}, {pat: ".pre-commit-config.yml"},
	{pat: "dockerfile", label: "Dockerfile"}, {pat: "containerfile", label: "Containerfile"}, {pat: ".dockerfile", how: matchSuffix, label: "*.dockerfile"},
	{pat: "node_modules/.bin/", how: matchPrefix},
}

// secretPatterns are paths that hold credentials; reading them is how
// secrets leak.
var secretPatterns = []pathPattern{
	{pat: "/etc/shadow", how: matchPrefix}, {pat: "/etc/gshadow", how: matchPrefix},
	{pat: "/etc/sudoers", how: matchPrefix}, {pat: "/etc/ssl/private", how: matchPrefix},
	{pat: ".ssh", label: "~/.ssh"}, {pat: "id_rsa"}, {pat: "id_ed25519"}, {pat: "id_ecdsa"}, {pat: "id_dsa"},
	{pat: "authorized_keys"}, {pat: ".aws/credentials"}, {pat: ".aws"},
	{pat: ".env"}, {pat: ".netrc"}, {pat: ".git-credentials"}, {pat: ".pgpass"}, {pat: ".gnupg"},
	{pat: ".kube/config"}, {pat: ".docker/config.json"}, {pat: ".config/gcloud"}, {pat: ".azure"},
	{pat: "/var/run/secrets", how: matchPrefix}, {pat: "/run/secrets", how: matchPrefix},
	{pat: "/proc/self/environ"}, {pat: "/proc/1/environ"},
	{pat: ".config/airlock", label: "~/.config/airlock"}, {pat: ".claude/.credentials.json"}, {pat: ".codex/auth.json"},
}

// dotEnvTemplates are ".env.<x>" suffixes of templates without real values;
// every other ".env.<x>" (".env.local", ".env.production") holds secrets.
var dotEnvTemplates = []string{"example", "sample", "template", "dist", "defaults"}

// privatePatterns are paths that often, but not always, hold secrets.
var privatePatterns = []pathPattern{
	{pat: "/etc/passwd", how: matchPrefix}, {pat: ".npmrc"}, {pat: ".pypirc"}, {pat: ".config/gh"},
	{pat: ".htpasswd"}, {pat: ".bash_history"}, {pat: ".zsh_history"}, {pat: "/root", how: matchWhole},
	{pat: ".pem", how: matchSuffix, label: "*.pem"}, {pat: ".key", how: matchSuffix, label: "*.key"},
	{pat: ".p12", how: matchSuffix, label: "*.p12"}, {pat: ".pfx", how: matchSuffix, label: "*.pfx"},
	{pat: ".keystore", how: matchSuffix, label: "*.keystore"}, {pat: ".jks", how: matchSuffix, label: "*.jks"},
}

// fileURLPath returns the local path a file: URL names, and whether s is
// one: "file:///etc/passwd", "file://localhost/etc/passwd" and
// "file:/etc/passwd" all name /etc/passwd, with percent-escapes decoded
// ("%2Essh" is .ssh) and a Windows drive kept ("file:///C:/x" is C:/x).
// The tools that take one (MCP resources, curl, browsers) open that file:
// it is a path, not a network destination. Another host stays in front, as
// in a UNC path ("//server/share/x"); a URL whose escapes do not decode is
// the text after the scheme, as written.
func fileURLPath(s string) (string, bool) {
	if len(s) < len("file:") || !strings.EqualFold(s[:len("file:")], "file:") {
		return "", false
	}
	u, err := url.Parse(s)
	if err != nil {
		return s[len("file:"):], true
	}
	p := u.Path
	if u.Opaque != "" {
		if p, err = url.PathUnescape(u.Opaque); err != nil {
			p = u.Opaque
		}
	}
	if len(p) >= 3 && p[0] == '/' && p[2] == ':' && isLetter(p[1]) {
		p = p[1:]
	}
	if h := u.Host; h != "" && !strings.EqualFold(h, "localhost") {
		p = "//" + h + p
	}
	return p, p != ""
}

// fileURLPaths calls fn with the path of every file: URL in s (a string
// under key) where paths are read: each word of a command (cmd), and
// otherwise the value itself, when it is a path or URL field's or has no
// spaces.
func fileURLPaths(s, key string, cmd, spaced bool, fn func(string)) {
	if !cmd {
		if !spaced || pathKeys[key] || urlKeys[key] {
			if p, ok := fileURLPath(strings.TrimSpace(s)); ok {
				fn(p)
			}
		}
		return
	}
	if !strings.Contains(s, ":") {
		return
	}
	for _, tok := range strings.FieldsFunc(s, isCommandSep) {
		if i := strings.IndexByte(tok, '='); i >= 0 {
			tok = tok[i+1:] // --config=file:///…
		}
		if p, ok := fileURLPath(tok); ok {
			fn(p)
		}
	}
}

// pathText is a string the path patterns are looked for in (lowercase):
// as written, with '/' separators, and with its paths cleaned (cleanPaths;
// "" when that changes nothing), each worked out once per string.
type pathText struct{ written, cleaned string }

func pathTextOf(s string) pathText {
	w := slashPath(s)
	return pathText{written: w, cleaned: cleanPaths(w)}
}

// matchPaths returns the first pattern found in t, as written or cleaned.
func matchPaths(t pathText, pats []pathPattern) (pathPattern, bool) {
	for _, form := range [2]string{t.written, t.cleaned} {
		if form == "" {
			continue
		}
		for _, p := range pats {
			if containsPath(form, p) {
				return p, true
			}
		}
	}
	return pathPattern{}, false
}

// cleanPaths returns s with every word holding a '/' cleaned as a path
// (path.Clean: repeated slashes, "." and ".." components), so that
// ".github//workflows/ci.yml" and ".github/x/../workflows/ci.yml" read as
// the file the system opens, and the patterns see it; "" when s has
// nothing to clean. (Policy targets are compared cleaned too,
// policy.CanonicalPath: a spelling must never be both allowed "always"
// and unseen here.)
func cleanPaths(s string) string {
	if !strings.Contains(s, "//") && !strings.Contains(s, "/.") && !strings.Contains(s, "./") {
		return ""
	}
	words := strings.Fields(s)
	changed := false
	for i, w := range words {
		if !strings.Contains(w, "/") {
			continue
		}
		c := path.Clean(w)
		if strings.HasSuffix(w, "/") && c != "/" {
			c += "/"
		}
		if c != w {
			words[i], changed = c, true
		}
	}
	if !changed {
		return ""
	}
	return strings.Join(words, " ")
}

// containsPath reports whether p occurs in s at a path boundary.
func containsPath(s string, p pathPattern) bool {
	for off := 0; ; {
		i := strings.Index(s[off:], p.pat)
		if i < 0 {
			return false
		}
		i += off
		end := i + len(p.pat)
		off = i + 1
		switch p.how {
		case matchSuffix:
			if i == 0 || !isPathWordByte(s[i-1]) {
				continue
			}
		default:
			if i > 0 && isPathWordByte(s[i-1]) {
				continue
			}
		}
		if p.how == matchPrefix || pathEnds(s, end) {
			return true
		}
		if p.pat == ".env" && end < len(s) && s[end] == '.' && !isDotEnvTemplate(s[end+1:]) {
			return true
		}
	}
}

func isDotEnvTemplate(rest string) bool {
	for _, t := range dotEnvTemplates {
		if strings.HasPrefix(rest, t) {
			return true
		}
	}
	return false
}

// pathEnds reports whether a path component ends at s[i]: end of text, a
// separator, or sentence punctuation followed by a break ("edit ~/.bashrc.").
func pathEnds(s string, i int) bool {
	if i >= len(s) || !isPathWordByte(s[i]) {
		return true
	}
	if s[i] == '.' || s[i] == ',' {
		return i+1 >= len(s) || s[i+1] == ' ' || s[i+1] == '\n' || s[i+1] == '"' || s[i+1] == '\''
	}
	return false
}

// isPathWordByte reports bytes that continue a file name.
func isPathWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '-' || c == '.' || c >= 0x80
}

// hasGitDir reports whether s names something inside a .git directory.
func hasGitDir(s string) bool {
	return containsPath(s, pathPattern{pat: ".git/", how: matchPrefix}) ||
		strings.HasSuffix(s, "/.git") || s == ".git"
}

// slashPath returns s with backslashes turned into slashes, so Windows-style
// paths match the same patterns.
func slashPath(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	return strings.ReplaceAll(s, "\\", "/")
}

// rootDirs are top-level directories whose recursive removal wrecks a host.
var rootDirs = map[string]bool{
	"/home": true, "/etc": true, "/usr": true, "/var": true, "/bin": true, "/sbin": true,
	"/boot": true, "/lib": true, "/lib64": true, "/root": true, "/opt": true, "/srv": true,
	"/sys": true, "/dev": true, "/proc": true, "/system": true, "/users": true,
	"/applications": true, "/library": true, "/private": true, "/mnt": true, "/media": true,
	"/snap": true, "~": true, "$home": true, "${home}": true, "c:": true,
}

// isRootLevel reports whether a (lowercase) target is the filesystem root, a
// home directory or a top-level system directory.
func isRootLevel(target string) bool {
	t := strings.Trim(slashPath(target), `'"`)
	if t == "" {
		return false
	}
	t = strings.TrimSuffix(t, "*")
	if t == "" {
		return strings.HasPrefix(target, "/")
	}
	// As the filesystem reads it: "/./", "/etc/../" and "/usr/." are "/"
	// and "/usr".
	t = path.Clean(t)
	return t == "/" || rootDirs[t]
}
