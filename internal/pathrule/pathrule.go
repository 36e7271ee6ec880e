// Package pathrule holds the hard path tier that no human can click
// through: deny_paths (never read, written or shown to a command) and
// read_only_paths (never written, deleted or moved). It is string work
// only, with no I/O, because it runs on the submit path; the worker, which
// sees the files, applies the same entries after resolving symlinks.
//
// An entry with a '/' or a leading '~' is a path: it matches at or under
// that path after '~' expansion and lexical canonicalisation ("./", "..",
// repeated slashes). "~/x" matches under any home directory ("~", $HOME,
// /root, /home/NAME, /Users/NAME and the server's own home). "/x" is
// absolute. "x/y" is relative to the workspace (and matches under
// /workspace/x/y). An entry without a '/' is a basename glob (path.Match
// syntax) that matches any component of a path, anywhere. Matching is
// case-insensitive, so that a case-insensitive file system cannot be used
// to slip past an entry.
package pathrule

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// BuiltinDeny are the deny entries every policy has; settings add to them
// and can never remove one.
var BuiltinDeny = []string{
	"~/.ssh", "~/.aws", "~/.gnupg", "~/.netrc", "~/.docker/config.json", "~/.kube/config",
	"~/.npmrc", "~/.pypirc", "~/.config/gcloud", "~/.azure", "~/.cargo/credentials",
	"~/.cargo/credentials.toml", "~/.config/gh", "~/.git-credentials", "~/.config/git/credentials",
	".env", ".env.*", "id_rsa", "id_ed25519", "*.pem", "*.key",
	// Airlock's CLI session and coding agents' own credentials.
	"~/.config/airlock", "~/.claude/.credentials.json", "~/.codex/auth.json",
}

// BuiltinReadOnly are the read-only entries every policy has: git metadata
// anywhere and the global git configuration, and coding agents' settings
// (hooks, MCP servers): what is written there runs code later, outside
// any approval — and there is configured the hook that sends an agent's
// calls to Airlock.
var BuiltinReadOnly = []string{".git", "~/.gitconfig", "~/.config/git",
	"**/.claude/settings.json", "**/.claude/settings.local.json", "~/.claude.json", ".mcp.json",
	"**/.codex/config.toml", "**/.codex/hooks.json"}

// Limits on user entries.
const (
	// MaxEntries bounds one settings list.
	MaxEntries = 256
	// MaxEntryLen bounds one entry.
	MaxEntryLen = 1024
)

// anchor is where an entry's components start.
type anchor uint8

const (
	anchorGlob anchor = iota // basename glob, any component
	anchorHome               // under a home directory
	anchorAbs                // under /
	anchorRel                // under the workspace root
	anchorAny                // "**/x/y": the components in a row, at any depth
)

// Entry is one compiled entry.
type Entry struct {
	raw   string
	how   anchor
	comps []string // lowercase components after the anchor
	glob  bool     // comps hold glob metacharacters
}

// String is the entry as written.
func (e Entry) String() string { return e.raw }

// Problem says what is wrong with a settings entry, or "".
func Problem(s string) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "empty entry"
	case len(s) > MaxEntryLen:
		return fmt.Sprintf("longer than %d bytes", MaxEntryLen)
	case !utf8.ValidString(s):
		return "not valid UTF-8"
	case strings.ContainsAny(s, "\x00\n\r\t"):
		return "contains a control character"
	case strings.Contains(s, "://"):
		return "a path, not a URL"
	}
	e := compile(s)
	if len(e.comps) == 0 {
		return "names the whole file system, a home directory or the workspace itself"
	}
	for _, c := range e.comps {
		if c == ".." {
			return "must not contain '..'"
		}
		if c == "**" {
			return "'**' is allowed only at the start ('**/x/y': x/y at any depth)"
		}
		if _, err := path.Match(c, ""); err != nil {
			return "bad glob pattern"
		}
	}
	return ""
}

// compile turns an entry into its anchor and components.
func compile(raw string) Entry {
	c := Canonical(raw)
	e := Entry{raw: raw}
	switch {
	case !strings.Contains(c, "/") && c != "~":
		e.how = anchorGlob
		if c != "" && c != "." {
			e.comps = []string{c}
		}
	case c == "~" || strings.HasPrefix(c, "~/"):
		e.how = anchorHome
		e.comps = split(strings.TrimPrefix(c, "~"))
	case strings.HasPrefix(c, "**/"):
		e.how = anchorAny
		e.comps = split(c[len("**/"):])
	case strings.HasPrefix(c, "/"):
		e.how = anchorAbs
		e.comps = split(c)
		if len(e.comps) > 0 && e.comps[0] == "workspace" {
			e.how, e.comps = anchorRel, e.comps[1:]
		}
	default:
		e.how = anchorRel
		e.comps = split(c)
	}
	for _, p := range e.comps {
		if strings.ContainsAny(p, "*?[") {
			e.glob = true
		}
	}
	return e
}

func split(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// Canonical returns p lowercased, with backslashes as slashes, $HOME and
// ${HOME} as '~', and cleaned lexically (no "./", repeated slashes or
// inner ".."; leading ".." of a relative path are kept). It does not
// resolve symlinks: nothing is read.
func Canonical(p string) string {
	p = strings.TrimSpace(p)
	if len(p) >= 2 && (p[0] == '"' && p[len(p)-1] == '"' || p[0] == '\'' && p[len(p)-1] == '\'') {
		p = p[1 : len(p)-1]
	}
	p = strings.ToLower(p)
	if strings.IndexByte(p, '\\') >= 0 {
		p = strings.ReplaceAll(p, "\\", "/")
	}
	for _, h := range []string{"${home}", "$home"} {
		if p == h || strings.HasPrefix(p, h+"/") {
			p = "~" + p[len(h):]
		}
	}
	if p == "" {
		return ""
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		rest := path.Clean("/" + p[1:])
		if rest == "/" {
			return "~"
		}
		return "~" + rest
	}
	return path.Clean(p)
}

// Set is a compiled list of entries.
type Set struct {
	entries []Entry
	home    []string // the server's home directory, lowercase components
}

// Compile compiles entries (already validated with Problem; a bad one
// simply never matches). home is the server's home directory ("" for
// none), also matched by "~" entries.
func Compile(home string, entries ...[]string) *Set {
	s := &Set{home: split(strings.ToLower(home))}
	for _, list := range entries {
		for _, raw := range list {
			if Problem(raw) == "" || isBuiltin(raw) {
				s.entries = append(s.entries, compile(raw))
			}
		}
	}
	return s
}

func isBuiltin(raw string) bool {
	for _, l := range [][]string{BuiltinDeny, BuiltinReadOnly} {
		for _, b := range l {
			if b == raw {
				return true
			}
		}
	}
	return false
}

// Len is the number of entries.
func (s *Set) Len() int { return len(s.entries) }

// forms are the ways one canonical path can be read against entries.
type forms struct {
	all   []string   // every component, for globs
	abs   []string   // components of an absolute path (nil: relative)
	rel   []string   // components relative to the workspace (nil: not relative)
	homes [][]string // components after a home directory
	root  bool       // the path is "/", "~" or the workspace root
}

func (s *Set) formsOf(p string) forms {
	c := Canonical(p)
	var f forms
	switch {
	case c == "":
		return f
	case c == "~" || strings.HasPrefix(c, "~/"):
		f.all = split(c[1:])
		f.homes = append(f.homes, f.all)
	case strings.HasPrefix(c, "/"):
		f.all = split(c)
		if f.all == nil {
			f.all = []string{} // "/"
		}
		f.abs = f.all
		a := f.abs
		switch {
		case len(a) >= 1 && a[0] == "root":
			f.homes = append(f.homes, a[1:])
		case len(a) >= 2 && (a[0] == "home" || a[0] == "users"):
			f.homes = append(f.homes, a[2:])
		case len(a) >= 1 && a[0] == "workspace":
			f.rel = a[1:]
		}
		if len(s.home) > 0 && hasPrefix(a, s.home, false) {
			f.homes = append(f.homes, a[len(s.home):])
		}
	default:
		f.all = split(c)
		if f.all == nil {
			f.all = []string{} // ".": the workspace root, relative
		}
		ups := 0
		for ups < len(f.all) && f.all[ups] == ".." {
			ups++
		}
		if ups == 0 {
			f.rel = f.all
		} else {
			// It leaves the directory it is relative to: it may be in a
			// home directory.
			f.homes = append(f.homes, f.all[ups:])
		}
	}
	f.root = len(f.all) == 0
	return f
}

// hasPrefix reports whether pre is a component prefix of p (entry
// components may be globs when glob is set).
func hasPrefix(p, pre []string, glob bool) bool {
	if len(pre) > len(p) {
		return false
	}
	for i, c := range pre {
		if !compEq(p[i], c, glob) {
			return false
		}
	}
	return true
}

func compEq(have, pat string, glob bool) bool {
	if !glob {
		return have == pat
	}
	ok, _ := path.Match(pat, have)
	return ok
}

// Match returns the first entry p is at or under.
func (s *Set) Match(p string) (Entry, bool) {
	if s == nil || len(s.entries) == 0 {
		return Entry{}, false
	}
	f := s.formsOf(p)
	for _, e := range s.entries {
		if e.matches(f) {
			return e, true
		}
	}
	return Entry{}, false
}

// MatchFile is Match for the file rel (relative, '/' separators) of a
// workspace whose directory on the host is root: every entry as a command
// sees the file (rel, and under /workspace), and the absolute and "~"
// entries also by its host path (root/rel), so that an absolute entry
// naming the file covers it, and so does a "~" entry when the workspace is
// a home directory. (Globs and workspace-relative entries are never read
// against the host path: a component of root itself, say /srv/private or
// /srv/repos/.git/wt, must not hide the whole workspace.)
func (s *Set) MatchFile(root, rel string) (Entry, bool) {
	for _, p := range []string{rel, "/workspace/" + rel} {
		if e, ok := s.Match(p); ok {
			return e, true
		}
	}
	if s == nil {
		return Entry{}, false
	}
	f := s.formsOf(strings.TrimSuffix(filepath.ToSlash(root), "/") + "/" + rel)
	for _, e := range s.entries {
		if (e.how == anchorHome || e.how == anchorAbs) && e.matches(f) {
			return e, true
		}
	}
	return Entry{}, false
}

func (e Entry) matches(f forms) bool {
	switch e.how {
	case anchorGlob:
		for _, c := range f.all {
			if compEq(c, e.comps[0], true) {
				return true
			}
		}
	case anchorHome:
		for _, h := range f.homes {
			if hasPrefix(h, e.comps, e.glob) {
				return true
			}
		}
	case anchorAbs:
		return f.abs != nil && hasPrefix(f.abs, e.comps, e.glob)
	case anchorRel:
		return f.rel != nil && hasPrefix(f.rel, e.comps, e.glob)
	case anchorAny:
		for i := range f.all {
			if hasPrefix(f.all[i:], e.comps, e.glob) {
				return true
			}
		}
	}
	return false
}

// Contains returns the first entry that p is at or under, or that lies
// under p (p is a directory holding it), as far as the path alone tells:
// a basename glob is found under p only where p itself names it.
func (s *Set) Contains(p string) (Entry, bool) {
	if e, ok := s.Match(p); ok {
		return e, true
	}
	if s == nil {
		return Entry{}, false
	}
	f := s.formsOf(p)
	if len(f.all) == 0 && !f.root {
		return Entry{}, false
	}
	for _, e := range s.entries {
		if e.under(f, s.home) {
			return e, true
		}
	}
	return Entry{}, false
}

// under reports whether the entry lies strictly under the path of f.
func (e Entry) under(f forms, home []string) bool {
	switch e.how {
	case anchorHome:
		for _, h := range f.homes {
			if hasPrefix(e.comps, h, false) {
				return true
			}
		}
		if f.abs != nil {
			a := f.abs
			switch {
			case len(a) == 0:
				return true // "/"
			case a[0] == "root" && len(a) == 1, (a[0] == "home" || a[0] == "users") && len(a) <= 2:
				return true
			case len(home) > 0 && hasPrefix(home, a, false):
				return true
			}
		}
		return false
	case anchorAbs:
		return f.abs != nil && hasPrefix(e.comps, f.abs, false)
	case anchorRel:
		if f.rel != nil && hasPrefix(e.comps, f.rel, false) {
			return true
		}
		return f.abs != nil && len(f.abs) == 0 // "/" holds /workspace
	case anchorAny:
		// "**/x/y" lies under a directory whose last components start it
		// (x, …/x), and under the roots ("/", "~", the workspace).
		if f.root || f.rel != nil && len(f.rel) == 0 {
			return true
		}
		for i := range f.all {
			if tail := f.all[i:]; len(tail) < len(e.comps) && hasPrefix(e.comps, tail, false) {
				return true
			}
		}
	}
	return false
}
