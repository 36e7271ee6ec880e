package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"mvdan.cc/sh/v3/syntax"
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
	gitDir  string // the git directory as the sandbox sees it
	entries []gitConfigEntry
}

// errGitDirOutside: the repository's git directory (or its common
// directory, or a file in it) is neither in the workspace nor in a trusted
// place, so its config cannot be vouched for.
var errGitDirOutside = errors.New("the repository's git directory is outside the workspace")

// gitMount is a host directory the sandbox shows at a path of its own.
type gitMount struct{ sandbox, host string }

// gitScope is the file system as git inside the sandbox sees it, as far as
// repositories go: the workspace at /workspace and the mounts (the
// policy's GitDirs, extra binds). Repository discovery works in sandbox
// paths and follows symlinks the way the sandbox's kernel would (an
// absolute target such as /workspace/x is the workspace's x); whatever
// leads anywhere else is out of scope.
type gitScope struct {
	root   string // real host path of the workspace
	mounts []gitMount
}

// trust adds real host directories seen at the same path in the sandbox.
func (s *gitScope) trust(dirs ...string) {
	for _, d := range dirs {
		s.mount(d, d)
	}
}

// mount adds a host directory seen at sandbox path sp.
func (s *gitScope) mount(sp, host string) {
	if strings.HasPrefix(sp, "/") && sp != "/" && host != "" {
		s.mounts = append(s.mounts, gitMount{sandbox: path.Clean(sp), host: host})
	}
}

func within(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// hostPath maps a clean absolute sandbox path to the host path behind it
// (the deepest mount wins); ok is false outside the scope.
func (s gitScope) hostPath(sp string) (string, bool) {
	best, out := -1, ""
	if within(sp, SandboxWorkspace) {
		best, out = len(SandboxWorkspace), s.root+sp[len(SandboxWorkspace):]
	}
	for _, m := range s.mounts {
		if len(m.sandbox) > best && within(sp, m.sandbox) {
			best, out = len(m.sandbox), m.host+sp[len(m.sandbox):]
		}
	}
	return out, best >= 0
}

// aboveMount reports whether sp is a strict ancestor of /workspace or of
// a mount point: a plain directory in the sandbox.
func (s gitScope) aboveMount(sp string) bool {
	if strings.HasPrefix(SandboxWorkspace, sp+"/") {
		return true
	}
	for _, m := range s.mounts {
		if strings.HasPrefix(m.sandbox, sp+"/") {
			return true
		}
	}
	return false
}

// noPath drops the host path from a file system error.
func noPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// missing reports an error that means the path does not exist.
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// resolve follows p (absolute, or relative to the sandbox directory base)
// as the kernel in the sandbox would, symlinks (the last one too) and ".."
// after them included, and returns the symlink-free sandbox path and the
// host path. Errors: errGitDirOutside when the walk leaves the scope, one
// that missing() recognises when a part does not exist.
func (s gitScope) resolve(base, p string) (sp, hp string, err error) {
	cur := base
	if strings.HasPrefix(p, "/") {
		cur = "/"
	}
	parts := strings.Split(p, "/")
	links := 0
	for len(parts) > 0 {
		name := parts[0]
		parts = parts[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, name)
		h, ok := s.hostPath(next)
		if !ok {
			if s.aboveMount(next) {
				cur = next // a directory bwrap made for a mount point
				continue
			}
			return "", "", errGitDirOutside
		}
		fi, err := os.Lstat(h)
		if err != nil {
			return "", "", noPath(err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if links++; links > maxSymlinks {
				return "", "", fmt.Errorf("too many levels of symlinks: %s", quote(next))
			}
			target, err := os.Readlink(h)
			if err != nil {
				return "", "", noPath(err)
			}
			if strings.HasPrefix(target, "/") {
				cur = "/"
			}
			parts = append(strings.Split(target, "/"), parts...)
			continue
		}
		if !fi.IsDir() && len(parts) > 0 {
			return "", "", syscall.ENOTDIR // "file/..", "file/x": nothing there
		}
		cur = next
	}
	h, ok := s.hostPath(cur)
	if !ok {
		return "", "", errGitDirOutside
	}
	return cur, h, nil
}

// readRegular reads a regular file of at most max bytes, without blocking
// on a FIFO.
func readRegular(hp string, max int64) (string, error) {
	f, err := os.OpenFile(hp, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", noPath(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", noPath(err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > max {
		return "", fmt.Errorf("%s: not a regular file of at most %d bytes", filepath.Base(hp), max)
	}
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return "", err
	}
	return string(b), nil
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
		return "", noPath(err)
	}
	return string(b), nil
}

// validHead is git's validate_headref for the HEAD at hp: a symlink into
// refs/, or a file starting with "ref: refs/" or an object name.
func validHead(hp string, fi fs.FileInfo) (bool, error) {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := os.Readlink(hp)
		return err == nil && strings.HasPrefix(t, "refs/"), nil
	case fi.IsDir():
		return false, nil
	case !fi.Mode().IsRegular():
		return false, errors.New("HEAD is not a regular file")
	}
	f, err := os.Open(hp)
	if err != nil {
		return false, noPath(err)
	}
	defer f.Close()
	buf := make([]byte, 255)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return false, noPath(err)
	}
	b := string(buf[:n])
	if i := strings.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	if ref, ok := strings.CutPrefix(b, "ref:"); ok && strings.HasPrefix(strings.TrimLeft(ref, " \t\n\r"), "refs/") {
		return true, nil
	}
	if len(b) < 40 {
		return false, nil
	}
	for _, c := range []byte(b[:40]) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false, nil
		}
	}
	return true, nil
}

// isGitDir is git's is_git_directory for the symlink-free sandbox path g:
// a valid HEAD, and objects/ and refs/ that git can search in its common
// directory (the commondir file's, or g itself), which it returns. A
// directory that nearly qualifies, or one whose parts lead out of the
// scope, is an error: the caller refuses rather than guess.
func (s gitScope) isGitDir(g string) (common string, ok bool, err error) {
	hg, _ := s.hostPath(g)
	head := hg + "/HEAD"
	fi, err := os.Lstat(head)
	if missing(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("%s/HEAD: %w", quote(g), noPath(err))
	}
	valid, err := validHead(head, fi)
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", quote(g), err)
	}
	if !valid {
		_, errO := os.Lstat(hg + "/objects")
		_, errR := os.Lstat(hg + "/refs")
		if errO == nil && errR == nil {
			return "", false, fmt.Errorf("%s looks like a git directory but its HEAD is not valid", quote(g))
		}
		return "", false, nil
	}
	common = g
	if _, hcd, err := s.resolve(g, "commondir"); err == nil {
		b, err := readRegular(hcd, 4096)
		if err != nil {
			return "", false, fmt.Errorf("%s/commondir: %w", quote(g), err)
		}
		cd := strings.TrimRight(b, "\r\n")
		if b == "" || strings.IndexByte(cd, 0) >= 0 {
			return "", false, fmt.Errorf("%s/commondir is malformed", quote(g))
		}
		common, _, err = s.resolve(g, cd)
		if missing(err) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
	} else if !missing(err) {
		return "", false, err
	}
	for _, sub := range []string{"objects", "refs"} {
		_, h, err := s.resolve(common, sub)
		if missing(err) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		if syscall.Access(h, 1 /* X_OK */) != nil {
			return "", false, fmt.Errorf("%s/%s cannot be searched", quote(common), sub)
		}
	}
	return common, true, nil
}

// gitLoc is a repository found by discovery (sandbox paths).
type gitLoc struct{ gitDir, common string }

// discoverGitDir finds the git directory git would use when started in
// start (a real host path inside the workspace): in each directory up to
// the workspace root, .git (a git directory, or a "gitdir: PATH" file),
// then the directory itself (bare). Above the workspace the sandbox has no
// repository. It returns nil when there is none, and an error wherever git
// would fail or the layout cannot be followed.
func discoverGitDir(s gitScope, start string) (*gitLoc, error) {
	if !within(start, s.root) {
		return nil, errGitDirOutside
	}
	dir := SandboxWorkspace + start[len(s.root):]
	for {
		loc, err := s.discoverAt(dir)
		if loc != nil || err != nil {
			return loc, err
		}
		if dir == SandboxWorkspace {
			return nil, nil
		}
		dir = path.Dir(dir)
	}
}

func (s gitScope) discoverAt(dir string) (*gitLoc, error) {
	hdot, _ := s.hostPath(dir + "/.git")
	if _, err := os.Lstat(hdot); err == nil {
		g, hg, err := s.resolve(dir, ".git")
		switch {
		case missing(err): // a dangling symlink: git goes on
		case err != nil:
			return nil, err
		default:
			fi, err := os.Stat(hg)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", quote(g), noPath(err))
			}
			if fi.Mode().IsRegular() {
				return s.gitFile(dir, hg)
			}
			if fi.IsDir() {
				common, ok, err := s.isGitDir(g)
				if err != nil || ok {
					return &gitLoc{gitDir: g, common: common}, err
				}
			}
		}
	} else if !missing(err) {
		return nil, fmt.Errorf("%s/.git: %w", quote(dir), noPath(err))
	}
	common, ok, err := s.isGitDir(dir)
	if err != nil || !ok {
		return nil, err
	}
	return &gitLoc{gitDir: dir, common: common}, nil
}

// gitFile follows the .git file hp in dir as git's read_gitfile does: a
// relative path is relative to dir (even when .git is a symlink), and the
// target must be a git directory (git dies otherwise; so does this).
func (s gitScope) gitFile(dir, hp string) (*gitLoc, error) {
	b, err := readRegular(hp, 4096)
	if err != nil {
		return nil, fmt.Errorf(".git: %w", err)
	}
	p, ok := strings.CutPrefix(b, "gitdir: ")
	p = strings.TrimRight(p, "\r\n")
	if !ok || p == "" || strings.IndexByte(p, 0) >= 0 {
		return nil, errors.New("malformed .git file")
	}
	g, _, err := s.resolve(dir, p)
	if missing(err) {
		return nil, fmt.Errorf("the .git file points to %s, which does not exist in the sandbox", quote(p))
	}
	if err != nil {
		return nil, err
	}
	common, ok, err := s.isGitDir(g)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("the .git file points to %s, which is not a git directory", quote(p))
	}
	return &gitLoc{gitDir: g, common: common}, nil
}

// gitConfigFiles lists the config files of a repository (sandbox paths):
// the git directory's and the common directory's config and
// config.worktree, and every submodule's config under modules/ (git status
// recurses into submodules). A symlinked directory under modules/ is an
// error: its configs would go unseen.
func gitConfigFiles(s gitScope, loc *gitLoc) ([]string, error) {
	files := []string{loc.gitDir + "/config", loc.gitDir + "/config.worktree"}
	if loc.common != loc.gitDir {
		files = append(files, loc.common+"/config", loc.common+"/config.worktree")
	}
	msp, mhp, err := s.resolve(loc.common, "modules")
	if missing(err) {
		return files, nil
	}
	if err != nil {
		return nil, err
	}
	count := 0
	err = filepath.WalkDir(mhp, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if count++; count > 20000 {
			return filepath.SkipAll
		}
		name := d.Name()
		if d.IsDir() {
			switch name {
			case "objects", "refs", "logs", "hooks", "info", "lfs":
				return filepath.SkipDir
			}
			return nil
		}
		sp := msp + p[len(mhp):]
		if name == "config" || name == "config.worktree" {
			files = append(files, sp)
		} else if d.Type()&fs.ModeSymlink != 0 {
			if _, h, err := s.resolve("/", sp); err == nil {
				if fi, err := os.Stat(h); err == nil && fi.IsDir() {
					return fmt.Errorf("symlinked directory in the submodules' git directories: %s", quote(sp))
				}
			}
		}
		return nil
	})
	return files, err
}

// loadGitConfigs reads the config files of loc. With followIncludes it
// also reads include.path and includeIf.*.path targets (whatever their
// condition) inside the scope; Validate refuses includes instead. With
// loose, files that cannot be read or parsed are skipped.
func loadGitConfigs(s gitScope, loc *gitLoc, followIncludes, loose bool) ([]gitConfigEntry, error) {
	var entries []gitConfigEntry
	seen := map[string]bool{}
	var load func(given string, depth int) error
	load = func(given string, depth int) error {
		if depth > 10 {
			return errors.New("includes nested too deeply")
		}
		_, hp, err := s.resolve("/", given)
		if missing(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", quote(given), err)
		}
		if seen[hp] {
			return nil
		}
		seen[hp] = true
		data, err := readRegular(hp, maxGitConfig)
		if err != nil {
			return fmt.Errorf("%s: %w", quote(given), err)
		}
		es, err := parseGitConfig(data)
		if err != nil {
			return fmt.Errorf("%s: %w", quote(given), err)
		}
		entries = append(entries, es...)
		if !followIncludes {
			return nil
		}
		for _, e := range es {
			if e.key != "path" || (e.section != "include" && e.section != "includeif") || e.value == "" {
				continue
			}
			inc := e.value
			if strings.HasPrefix(inc, "~") {
				continue // HOME is an empty private /tmp inside the sandbox
			}
			if !strings.HasPrefix(inc, "/") {
				inc = given[:strings.LastIndexByte(given, '/')+1] + inc // as git does: next to the file as named
			}
			if _, _, err := s.resolve("/", inc); err != nil {
				continue // missing, or out of the sandbox's sight
			}
			if err := load(inc, depth+1); err != nil && !loose {
				return err
			}
		}
		return nil
	}
	files, err := gitConfigFiles(s, loc)
	if err != nil && !loose {
		return nil, err
	}
	for _, f := range files {
		if err := load(f, 0); err != nil && !loose {
			return nil, err
		}
	}
	return entries, nil
}

// loadGitRepo reads the config files git would read for a command started
// in start; nil when there is no repository. It returns errGitDirOutside
// for a repository out of scope.
func loadGitRepo(s gitScope, start string, followIncludes bool) (*gitRepo, error) {
	loc, err := discoverGitDir(s, start)
	if err != nil || loc == nil {
		return nil, err
	}
	entries, err := loadGitConfigs(s, loc, followIncludes, false)
	if err != nil {
		return nil, err
	}
	return &gitRepo{gitDir: loc.gitDir, entries: entries}, nil
}

// gitCommandKeys are keys whose value is a program git runs, beyond those
// matched by name (*cmd, *command, *.program): section.key, lower case.
var gitCommandKeys = map[string]string{
	"core.gitproxy":              "runs a program",
	"core.fsmonitor":             "core.fsmonitor names a hook program",
	"diff.external":              "an external diff runs a program",
	"filter.clean":               "a filter driver runs a program",
	"filter.smudge":              "a filter driver runs a program",
	"filter.process":             "a filter driver runs a program",
	"diff.textconv":              "a diff driver runs a program",
	"diff.command":               "a diff driver runs a program",
	"merge.driver":               "a merge driver runs a program",
	"remote.uploadpack":          "runs a program",
	"remote.receivepack":         "runs a program",
	"remote.vcs":                 "runs a program",
	"uploadpack.packobjectshook": "runs a program",
	"mergetool.path":             "runs a program",
	"difftool.path":              "runs a program",
	"browser.path":               "runs a program",
	"man.path":                   "runs a program",
	"interactive.difffilter":     "runs a program",
	"imap.tunnel":                "runs a program",
	"sendemail.smtpserver":       "may name a program to send mail with",
	"include.path":               "includes another config file",
	"includeif.path":             "includes another config file",
	"submodule.update":           "runs a program", // only with a leading "!"
	"gpg.program":                "runs a program",
	"core.alternaterefscommand":  "runs a program",
	"gpg.ssh.defaultkeycommand":  "runs a program",
	"trailer.cmd":                "a trailer command runs a program",
	"trailer.command":            "a trailer command runs a program",
}

// gitOverridden holds the keys gitHardeningConfig sets for every git in
// the sandbox (command scope outranks the repository), lower case.
var gitOverridden = func() map[string]bool {
	m := map[string]bool{}
	for _, kv := range gitHardeningConfig {
		m[strings.ToLower(kv[0])] = true
	}
	return m
}()

// dangerousGitKey says why a repository config key is refused: it names a
// program git could run (or a file it would include). Besides the keys
// listed in gitCommandKeys, every key named *cmd, *command or *program is
// a program (trailer.<token>.cmd, gpg.ssh.defaultKeyCommand,
// sendemail.toCmd, guitool.<name>.cmd, tar.<format>.command …). Keys the
// sandbox overrides itself (core.sshCommand, core.hooksPath, core.pager,
// core.editor, credential.helper …) are not refused; pager.* and trace2.*
// are refused whole.
func dangerousGitKey(e gitConfigEntry) string {
	switch e.section {
	case "pager":
		return "runs a pager program"
	case "trace2":
		return "writes trace output to a file or socket"
	}
	name := e.section + "." + e.key
	if e.section == "gpg" && e.subsection != "" {
		name = "gpg." + strings.ToLower(e.subsection) + "." + e.key
	}
	reason := gitCommandKeys[name]
	switch {
	case name == "core.fsmonitor":
		switch strings.ToLower(strings.TrimSpace(e.value)) {
		case "", "true", "false", "yes", "no", "on", "off", "1", "0":
			return ""
		}
	case name == "submodule.update":
		if !strings.HasPrefix(strings.TrimSpace(e.value), "!") {
			return ""
		}
	case reason == "" && e.subsection == "" && gitOverridden[name]:
		return ""
	case reason == "" && e.section != "alias" && e.section != "pretty" && // names chosen by the user
		(strings.HasSuffix(e.key, "cmd") || strings.HasSuffix(e.key, "command") || strings.HasSuffix(e.key, "program")):
		return "runs a program"
	}
	return reason
}

// checkGitRepo refuses a repository whose config runs programs, or whose
// config it cannot read and check.
func checkGitRepo(c *Checker, start string) error {
	if c.lexical {
		return nil // no files here; the worker validates again
	}
	s := gitScope{root: c.root}
	s.trust(c.gitDirs...)
	repo, err := loadGitRepo(s, start, false)
	if errors.Is(err, errGitDirOutside) {
		return c.Refuse("%v", err)
	}
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), c.root, SandboxWorkspace) // never a host path
		return c.Refuse("cannot check the repository's config: %s", msg)
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
// through GIT_CONFIG_COUNT (command scope: it outranks the repository, for
// every repository git opens, -C targets and submodules included).
var gitHardeningConfig = [][2]string{
	{"core.hooksPath", "/dev/null"},
	{"core.fsmonitor", "false"},
	{"core.pager", "cat"},
	{"core.editor", "false"},
	{"sequence.editor", "false"},
	{"core.askPass", ""},
	{"core.sshCommand", "false"},
	{"credential.helper", ""}, // an empty helper also clears credential.<url>.helper
	{"gpg.program", "false"},
	{"gpg.openpgp.program", "false"},
	{"gpg.ssh.program", "false"},
	{"gpg.x509.program", "false"},
	{"gpg.ssh.defaultKeyCommand", "false"},
	{"commit.gpgSign", "false"},
	{"tag.gpgSign", "false"},
	{"log.showSignature", "false"},
	{"submodule.recurse", "false"},
	{"protocol.ext.allow", "never"},
	{"safe.directory", "*"},
}

// gitStartDirs lists the directories git may start in for argv (real host
// paths): the working directory and the -C targets of git, also in an
// "sh -c" script. It only widens the runtime overrides; Validate checks
// the same directories one by one.
func gitStartDirs(c *Checker, argv []string) []string {
	dirs := []string{c.cwd}
	add := func(args []string) {
		if len(args) == 0 || filepath.Base(args[0]) != "git" {
			return
		}
		cur := c
		for i := 1; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
			if args[i] == "-C" && i+1 < len(args) {
				i++
				d, err := cur.Dir(args[i])
				if err != nil {
					return
				}
				cur = d
				dirs = append(dirs, d.cwd)
			}
		}
	}
	if len(argv) == 3 && argv[0] == "sh" && argv[1] == "-c" {
		f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(argv[2]), "")
		if err != nil {
			return dirs
		}
		sc := &shellChecker{c: c, sh: c}
		syntax.Walk(f, func(n syntax.Node) bool {
			if ce, ok := n.(*syntax.CallExpr); ok {
				var words []string
				for _, w := range ce.Args {
					v, _, err := sc.word(w)
					if err != nil {
						break
					}
					words = append(words, v)
				}
				add(words)
			}
			return true
		})
		return dirs
	}
	add(argv)
	return dirs
}

// gitCandidates lists, loosely, every git directory git might use when
// started in start: at each level up to the workspace root, .git (or what
// a .git file names) and the directory itself when it has a HEAD. It
// errs on the side of more; the runtime overrides blank their drivers.
func gitCandidates(s gitScope, start string) []*gitLoc {
	if !within(start, s.root) {
		return nil
	}
	common := func(g string) string {
		if _, h, err := s.resolve(g, "commondir"); err == nil {
			if b, err := readRegular(h, 4096); err == nil {
				if c, _, err := s.resolve(g, strings.TrimRight(b, "\r\n")); err == nil {
					return c
				}
			}
		}
		return g
	}
	var out []*gitLoc
	for dir := SandboxWorkspace + start[len(s.root):]; ; dir = path.Dir(dir) {
		if g, h, err := s.resolve(dir, ".git"); err == nil {
			if fi, err := os.Stat(h); err == nil && fi.Mode().IsRegular() {
				g = ""
				if b, err := readRegular(h, 4096); err == nil {
					if p, ok := strings.CutPrefix(strings.TrimSpace(b), "gitdir:"); ok {
						g, _, _ = s.resolve(dir, strings.TrimSpace(p))
					}
				}
			}
			if g != "" {
				out = append(out, &gitLoc{gitDir: g, common: common(g)})
			}
		}
		if h, ok := s.hostPath(dir + "/HEAD"); ok {
			if _, err := os.Lstat(h); err == nil {
				out = append(out, &gitLoc{gitDir: dir, common: common(dir)})
			}
		}
		if dir == SandboxWorkspace {
			return out
		}
	}
}

// gitDriverOverrides blanks every filter, diff and merge driver, trailer
// command and remote program the repositories git may use (those of every
// start directory; see gitStartDirs and gitCandidates) define, so one
// planted after validation fails instead of running. It returns config
// pairs for GIT_CONFIG_COUNT, which applies to every repository git opens.
func gitDriverOverrides(s gitScope, starts []string) ([][2]string, error) {
	set := map[string]bool{}
	add := func(entries []gitConfigEntry) {
		for _, e := range entries {
			if e.subsection == "" {
				if e.section == "diff" && e.key == "external" {
					set["diff.external"] = true
				}
				continue
			}
			var keys []string
			switch e.section {
			case "filter":
				keys = []string{"clean", "smudge", "process"}
			case "diff":
				keys = []string{"command", "textconv"}
			case "merge":
				keys = []string{"driver"}
			case "trailer":
				keys = []string{"cmd", "command"}
			case "remote":
				keys = []string{"uploadpack", "receivepack", "vcs"}
			}
			for _, k := range keys {
				set[e.section+"."+e.subsection+"."+k] = true
			}
		}
	}
	for _, start := range starts {
		repo, err := loadGitRepo(s, start, true)
		if err != nil && !errors.Is(err, errGitDirOutside) { // out of scope: invisible inside the sandbox
			return nil, err
		}
		if repo != nil {
			add(repo.entries)
		}
		for _, loc := range gitCandidates(s, start) {
			entries, _ := loadGitConfigs(s, loc, true, true)
			add(entries)
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
