package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// gitConfigEntry is one key of a git config file.
type gitConfigEntry struct {
	section    string // lower case
	subsection string // as written
	key        string // lower case
	value      string
}

// name is section[.subsection].key as git prints it.
func (e gitConfigEntry) name() string {
	if e.subsection != "" {
		return e.section + "." + e.subsection + "." + e.key
	}
	return e.section + "." + e.key
}

// maxGitConfig bounds one config file read while scanning a repository.
const maxGitConfig = 1 << 20

// parseGitConfig parses git's config file syntax: [section "sub"] headers
// (and the legacy [section.sub]), key = value lines with quotes, escapes,
// comments and backslash continuations. Anything else is an error, so a
// file git might read differently is never waved through.
func parseGitConfig(data string) ([]gitConfigEntry, error) {
	data = strings.TrimPrefix(data, "\ufeff")
	var out []gitConfigEntry
	section, sub := "", ""
	n := len(data)
	line := 1
	bad := func(what string) error { return fmt.Errorf("line %d: %s", line, what) }
	for i := 0; i < n; {
		ch := data[i]
		switch {
		case ch == '\n':
			line++
			i++
		case ch == ' ' || ch == '\t' || ch == '\r':
			i++
		case ch == '#' || ch == ';':
			for i < n && data[i] != '\n' {
				i++
			}
		case ch == '[':
			i++
			start := i
			for i < n && (isAlnum(data[i]) || data[i] == '-' || data[i] == '.') {
				i++
			}
			name := data[start:i]
			if name == "" {
				return nil, bad("empty section name")
			}
			sub = ""
			if i < n && (data[i] == ' ' || data[i] == '\t') {
				for i < n && (data[i] == ' ' || data[i] == '\t') {
					i++
				}
				if i >= n || data[i] != '"' {
					return nil, bad("bad section header")
				}
				i++
				var b strings.Builder
				for {
					if i >= n || data[i] == '\n' {
						return nil, bad("unterminated subsection")
					}
					c := data[i]
					i++
					if c == '"' {
						break
					}
					if c == '\\' {
						if i >= n || data[i] == '\n' {
							return nil, bad("bad escape in subsection")
						}
						c = data[i]
						i++
					}
					b.WriteByte(c)
				}
				sub = b.String()
			} else if dot := strings.IndexByte(name, '.'); dot >= 0 {
				sub = strings.ToLower(name[dot+1:])
				name = name[:dot]
			}
			if i >= n || data[i] != ']' {
				return nil, bad("bad section header")
			}
			i++
			section = strings.ToLower(name)
		case isAlpha(ch):
			if section == "" {
				return nil, bad("key outside a section")
			}
			start := i
			for i < n && (isAlnum(data[i]) || data[i] == '-') {
				i++
			}
			key := strings.ToLower(data[start:i])
			for i < n && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r') {
				i++
			}
			value := ""
			if i < n && data[i] == '=' {
				i++
				var err error
				value, i, err = parseGitConfigValue(data, i, &line)
				if err != nil {
					return nil, bad(err.Error())
				}
			} else if i < n && data[i] != '\n' && data[i] != '#' && data[i] != ';' {
				return nil, bad("bad key line")
			}
			out = append(out, gitConfigEntry{section: section, subsection: sub, key: key, value: value})
		default:
			return nil, bad("unexpected character")
		}
	}
	return out, nil
}

// parseGitConfigValue reads a value from data[i:] the way git does and
// returns it with the index of the end of its line.
func parseGitConfigValue(data string, i int, line *int) (string, int, error) {
	n := len(data)
	var b strings.Builder
	quoted := false
	for i < n && (data[i] == ' ' || data[i] == '\t') {
		i++
	}
	for i < n {
		c := data[i]
		i++
		switch {
		case c == '\n':
			if quoted {
				return "", i, errors.New("unterminated quote")
			}
			*line++
			return b.String(), i, nil
		case !quoted && (c == ';' || c == '#'):
			for i < n && data[i] != '\n' {
				i++
			}
			return b.String(), i, nil
		case c == '\\':
			if i >= n {
				return "", i, errors.New("backslash at end of file")
			}
			e := data[i]
			i++
			switch e {
			case '\n':
				*line++
			case '\r':
				if i < n && data[i] == '\n' {
					i++
					*line++
				}
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			case 'n':
				b.WriteByte('\n')
			case '"', '\\':
				b.WriteByte(e)
			default:
				return "", i, errors.New("bad escape")
			}
		case c == '"':
			quoted = !quoted
		default:
			b.WriteByte(c)
		}
	}
	if quoted {
		return "", i, errors.New("unterminated quote")
	}
	return b.String(), i, nil
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isAlnum(c byte) bool { return isAlpha(c) || c >= '0' && c <= '9' }

// gitRepo is what a git command started in some directory would read.
type gitRepo struct {
	gitDir  string // host path of the git directory
	entries []gitConfigEntry
}

// errGitDirOutside: the repository's git directory (or its common
// directory) is neither in the workspace nor in a trusted place, so its
// config cannot be vouched for (and the sandbox would not see it anyway).
var errGitDirOutside = errors.New("the repository's git directory is outside the workspace")

// gitScope is where repository metadata may be read from: the workspace
// and the policy's GitDirs (real host paths).
type gitScope struct {
	root    string
	trusted []string
}

func within(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// allowed reports whether a real host path is inside the scope.
func (s gitScope) allowed(p string) bool {
	if within(p, s.root) {
		return true
	}
	for _, t := range s.trusted {
		if within(p, t) {
			return true
		}
	}
	return false
}

// real resolves symlinks in p and checks it against the scope.
func (s gitScope) real(p string) (string, error) {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	if !s.allowed(r) {
		return r, errGitDirOutside
	}
	return r, nil
}

// discoverGitDir finds the git directory git would use when started in
// start (a real host path inside the workspace), looking upwards no further
// than the workspace root (above it the sandbox has no repository). ok is
// false when there is none.
func discoverGitDir(s gitScope, start string) (string, bool, error) {
	dir := start
	for {
		dot := filepath.Join(dir, ".git")
		if _, err := os.Lstat(dot); err == nil {
			real, err := s.real(dot)
			if errors.Is(err, errGitDirOutside) {
				return real, true, err
			}
			if err == nil {
				fi, err := os.Stat(real)
				switch {
				case err != nil:
				case fi.IsDir() && isGitDir(real):
					return real, true, nil
				case fi.Mode().IsRegular():
					gd, err := readGitFile(real)
					if err != nil {
						return "", true, err
					}
					gdReal, err := s.real(gd)
					if errors.Is(err, errGitDirOutside) {
						return gdReal, true, err
					}
					if err != nil {
						return "", false, nil // git itself fails: no repository
					}
					return gdReal, true, nil
				}
			}
		}
		if isGitDir(dir) {
			return dir, true, nil // a bare repository
		}
		if dir == s.root || !strings.HasPrefix(dir, s.root+"/") {
			return "", false, nil
		}
		dir = filepath.Dir(dir)
	}
}

// isGitDir is git's is_git_directory: HEAD, objects/ and refs/.
func isGitDir(d string) bool {
	if fi, err := os.Lstat(filepath.Join(d, "HEAD")); err != nil || fi.IsDir() {
		return false
	}
	for _, sub := range []string{"objects", "refs"} {
		if fi, err := os.Stat(filepath.Join(d, sub)); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// readGitFile reads a "gitdir: PATH" file (linked worktrees, submodules).
func readGitFile(path string) (string, error) {
	b, err := readSmall(path, 4096)
	if err != nil {
		return "", err
	}
	gd, ok := strings.CutPrefix(strings.TrimSpace(b), "gitdir:")
	if !ok {
		return "", errors.New("malformed .git file")
	}
	gd = strings.TrimSpace(gd)
	if !filepath.IsAbs(gd) {
		gd = filepath.Join(filepath.Dir(path), gd)
	}
	return filepath.Clean(gd), nil
}

// readSmall reads a regular file of at most max bytes.
func readSmall(path string, max int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() || fi.Size() > max {
		return "", fmt.Errorf("%s: not a regular file of at most %d bytes", filepath.Base(path), max)
	}
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// gitConfigFiles lists the config files of a git directory: its own and
// its common directory's config and config.worktree, and every submodule's
// config under modules/ (git status recurses into submodules).
func gitConfigFiles(s gitScope, gitDir string) ([]string, error) {
	files := []string{filepath.Join(gitDir, "config"), filepath.Join(gitDir, "config.worktree")}
	common := gitDir
	if b, err := readSmall(filepath.Join(gitDir, "commondir"), 4096); err == nil {
		cd := strings.TrimSpace(b)
		if !filepath.IsAbs(cd) {
			cd = filepath.Join(gitDir, cd)
		}
		real, err := s.real(cd)
		if err != nil {
			return nil, err
		}
		common = real
		files = append(files, filepath.Join(common, "config"), filepath.Join(common, "config.worktree"))
	}
	count := 0
	_ = filepath.WalkDir(filepath.Join(common, "modules"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if count++; count > 20000 {
			return filepath.SkipAll
		}
		if d.IsDir() {
			switch d.Name() {
			case "objects", "refs", "logs", "hooks", "info", "lfs":
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == "config" || d.Name() == "config.worktree" {
			files = append(files, path)
		}
		return nil
	})
	return files, nil
}

// loadGitRepo reads the config files git would read for a command started
// in start. With followIncludes it also reads include.path and
// includeIf.*.path targets inside the scope (Validate refuses includes
// instead). It returns errGitDirOutside for a git directory out of scope.
func loadGitRepo(s gitScope, start string, followIncludes bool) (*gitRepo, error) {
	gitDir, ok, err := discoverGitDir(s, start)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, nil
	}
	repo := &gitRepo{gitDir: gitDir}
	seen := map[string]bool{}
	var load func(path string, depth int) error
	load = func(path string, depth int) error {
		if depth > 10 {
			return errors.New("includes nested too deeply")
		}
		if seen[path] {
			return nil
		}
		seen[path] = true
		data, err := readSmall(path, maxGitConfig)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
		entries, err := parseGitConfig(data)
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
		repo.entries = append(repo.entries, entries...)
		if !followIncludes {
			return nil
		}
		for _, e := range entries {
			if e.key != "path" || (e.section != "include" && e.section != "includeif") || e.value == "" {
				continue
			}
			inc := e.value
			if strings.HasPrefix(inc, "~") {
				continue // HOME is an empty private /tmp inside the sandbox
			}
			if !filepath.IsAbs(inc) {
				inc = filepath.Join(filepath.Dir(path), inc)
			}
			real, err := s.real(inc)
			if err != nil {
				continue // missing, or out of the sandbox's sight
			}
			if err := load(real, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	files, err := gitConfigFiles(s, gitDir)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if err := load(f, 0); err != nil {
			return nil, err
		}
	}
	return repo, nil
}

// dangerousGitKey says why a repository config key is refused: it names a
// program git could run (or a file it would include). Keys the sandbox
// overrides itself (core.hooksPath, core.pager, core.editor, gpg.program,
// credential.helper …) are not refused.
func dangerousGitKey(e gitConfigEntry) string {
	switch e.section {
	case "filter":
		switch e.key {
		case "clean", "smudge", "process":
			return "a filter driver runs a program"
		}
	case "diff":
		if e.subsection != "" && (e.key == "command" || e.key == "textconv") {
			return "a diff driver runs a program"
		}
		if e.subsection == "" && e.key == "external" {
			return "an external diff runs a program"
		}
	case "merge":
		if e.subsection != "" && e.key == "driver" {
			return "a merge driver runs a program"
		}
	case "include", "includeif":
		if e.key == "path" {
			return "includes another config file"
		}
	case "core":
		switch e.key {
		case "alternaterefscommand", "gitproxy":
			return "runs a program"
		case "fsmonitor":
			switch strings.ToLower(strings.TrimSpace(e.value)) {
			case "", "true", "false", "yes", "no", "on", "off", "1", "0":
				return ""
			}
			return "core.fsmonitor names a hook program"
		}
	case "remote":
		switch e.key {
		case "uploadpack", "receivepack", "vcs":
			return "runs a program"
		}
	case "submodule":
		if e.key == "update" && strings.HasPrefix(strings.TrimSpace(e.value), "!") {
			return "runs a program"
		}
	case "uploadpack":
		if e.key == "packobjectshook" {
			return "runs a program"
		}
	case "mergetool", "difftool", "browser", "man":
		if e.key == "cmd" || e.key == "path" {
			return "runs a program"
		}
	case "pager":
		return "runs a pager program"
	case "trace2":
		return "writes trace output to a file or socket"
	case "gpg":
		if e.key == "program" {
			return "runs a program"
		}
	}
	return ""
}

// checkGitRepo refuses a repository whose config runs programs, or whose
// config it cannot read and check.
func checkGitRepo(c *Checker, start string) error {
	if c.lexical {
		return nil // no files here; the worker validates again
	}
	repo, err := loadGitRepo(gitScope{root: c.root, trusted: c.gitDirs}, start, false)
	if errors.Is(err, errGitDirOutside) {
		return c.Refuse("%v", err)
	}
	if err != nil {
		return c.Refuse("cannot check the repository's config: %v", err)
	}
	if repo == nil {
		return nil
	}
	for _, e := range repo.entries {
		if reason := dangerousGitKey(e); reason != "" {
			return c.Refuse("the repository's config sets %s (%s)", quote(e.name()), reason)
		}
	}
	return nil
}

// gitHardeningConfig is the configuration every git inside the sandbox gets
// through GIT_CONFIG_COUNT (command scope: it outranks the repository).
var gitHardeningConfig = [][2]string{
	{"core.hooksPath", "/dev/null"},
	{"core.fsmonitor", "false"},
	{"core.pager", "cat"},
	{"core.editor", "false"},
	{"sequence.editor", "false"},
	{"core.askPass", ""},
	{"core.sshCommand", "false"},
	{"credential.helper", ""},
	{"gpg.program", "false"},
	{"gpg.ssh.program", "false"},
	{"gpg.x509.program", "false"},
	{"commit.gpgSign", "false"},
	{"tag.gpgSign", "false"},
	{"log.showSignature", "false"},
	{"submodule.recurse", "false"},
	{"protocol.ext.allow", "never"},
	{"safe.directory", "*"},
}

// gitDriverOverrides blanks every filter, diff and merge driver the
// repository started in start defines, so a driver planted after
// validation fails instead of running. It returns config pairs for
// GIT_CONFIG_COUNT.
func gitDriverOverrides(s gitScope, start string) ([][2]string, error) {
	repo, err := loadGitRepo(s, start, true)
	if errors.Is(err, errGitDirOutside) {
		return nil, nil // invisible inside the sandbox
	}
	if err != nil || repo == nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, e := range repo.entries {
		if e.subsection == "" {
			if e.section == "diff" && e.key == "external" {
				set["diff.external"] = true
			}
			continue
		}
		switch e.section {
		case "filter":
			for _, k := range []string{"clean", "smudge", "process"} {
				set["filter."+e.subsection+"."+k] = true
			}
		case "diff":
			set["diff."+e.subsection+".command"] = true
			set["diff."+e.subsection+".textconv"] = true
		case "merge":
			set["merge."+e.subsection+".driver"] = true
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][2]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, [2]string{k, ""})
	}
	return out, nil
}
