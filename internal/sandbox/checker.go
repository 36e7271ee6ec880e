package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// SandboxWorkspace is where the workspace appears inside the sandbox. An
// absolute path argument is accepted only under it (or /dev/null).
const SandboxWorkspace = "/workspace"

// maxSymlinks bounds symlink expansion while resolving one path.
const maxSymlinks = 40

// Checker confines the path arguments of one request to its workspace.
// Validators receive one; its methods return nil or a *Refusal whose reason
// starts with the program's name.
type Checker struct {
	root    string   // real (symlink-free) host path of the workspace root
	cwd     string   // real host path of the working directory, inside root
	cmd     string   // program being checked, for refusal reasons
	lexical bool     // no workspace on this host: check paths lexically only
	gitDirs []string // real host paths where a repository's git dir may live
	// seen, when set, gets every path a validator checks (see Operands).
	seen func(raw, p string, write bool)
}

// newChecker resolves the workspace root and the working directory. An
// empty workspace gives a lexical checker (see Validate).
func newChecker(workspace, dir string) (*Checker, error) {
	if workspace == "" {
		c := &Checker{root: SandboxWorkspace, cwd: SandboxWorkspace, cmd: "dir", lexical: true}
		if dir == "" || dir == "." {
			return c, nil
		}
		if filepath.IsAbs(dir) {
			return nil, refuse("dir must be relative to the workspace: %s", quote(dir))
		}
		return c.Dir(dir)
	}
	if !filepath.IsAbs(workspace) {
		return nil, refuse("workspace must be an absolute path")
	}
	root, err := filepath.EvalSymlinks(filepath.Clean(workspace))
	if err != nil {
		return nil, refuse("workspace is not available")
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return nil, refuse("workspace is not a directory")
	}
	c := &Checker{root: root, cwd: root, cmd: "dir"}
	if dir == "" || dir == "." {
		return c, nil
	}
	if filepath.IsAbs(dir) {
		return nil, refuse("dir must be relative to the workspace: %s", quote(dir))
	}
	d, err := c.Dir(dir)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// forCommand returns a copy of c that names cmd in its refusals.
func (c *Checker) forCommand(cmd string) *Checker {
	cc := *c
	cc.cmd = cmd
	return &cc
}

// Command is the name of the program being checked.
func (c *Checker) Command() string { return c.cmd }

// Refuse returns a *Refusal whose reason is "<program>: <message>".
func (c *Checker) Refuse(format string, a ...any) error {
	return &Refusal{Reason: c.cmd + ": " + fmt.Sprintf(format, a...)}
}

// Path checks a path the program reads (or may read): after resolving
// "..", an absolute /workspace prefix and every symlink on the existing
// part of the path, it must stay inside the workspace; an existing regular
// file must not be hard-linked (its inode could also be reachable outside).
// A path that does not exist yet is checked lexically. The empty string and
// /dev/null pass.
func (c *Checker) Path(p string) error {
	_, err := c.check(p, false)
	return err
}

// WritePath is Path for a path the program writes: additionally nothing
// under a .git directory (hooks and config there run code later).
func (c *Checker) WritePath(p string) error {
	_, err := c.check(p, true)
	return err
}

// Dir checks that p is an existing directory inside the workspace and
// returns a Checker whose relative paths start there (for git -C).
func (c *Checker) Dir(p string) (*Checker, error) {
	host, err := c.check(p, false)
	if err != nil {
		return nil, err
	}
	if host == "/dev/null" {
		return nil, c.Refuse("not a directory in the workspace: %s", quote(p))
	}
	if fi, err := os.Stat(host); !c.lexical && (err != nil || !fi.IsDir()) {
		return nil, c.Refuse("not a directory in the workspace: %s", quote(p))
	}
	cc := *c
	cc.cwd = host
	return &cc, nil
}

// check resolves p and applies the confinement rules, returning the host
// path it names.
func (c *Checker) check(p string, write bool) (string, error) {
	if p == "" {
		return "", nil
	}
	if p == "/dev/null" {
		return p, nil
	}
	if c.seen != nil {
		if strings.HasPrefix(p, "/") {
			c.seen(p, p, write)
		} else {
			c.seen(p, filepath.Join(c.cwd, p), write)
		}
	}
	host, fi, err := c.resolve(p)
	if err != nil {
		return "", err
	}
	if fi != nil && fi.Mode().IsRegular() {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			return "", c.Refuse("hard-linked file is not allowed: %s", quote(p))
		}
	}
	if write {
		rel := strings.TrimPrefix(host, c.root)
		for _, part := range strings.Split(rel, "/") {
			if part == ".git" {
				return "", c.Refuse("writing under .git is not allowed: %s", quote(p))
			}
		}
	}
	return host, nil
}

// resolve walks p component by component from the working directory (or
// the workspace root for /workspace/...), following symlinks the way the
// kernel would, and refuses as soon as the walk leaves the workspace. It
// returns the host path and, when it exists, its Lstat info.
func (c *Checker) resolve(p string) (string, fs.FileInfo, error) {
	cur := c.cwd
	rest := p
	if strings.HasPrefix(p, "/") {
		if p != SandboxWorkspace && !strings.HasPrefix(p, SandboxWorkspace+"/") {
			return "", nil, c.Refuse("path outside the workspace: %s", quote(p))
		}
		cur = c.root
		rest = strings.TrimPrefix(p, SandboxWorkspace)
	}
	parts := strings.Split(rest, "/")
	links := 0
	escape := func() error {
		if links > 0 {
			return c.Refuse("symlink points outside the workspace: %s", quote(p))
		}
		return c.Refuse("path escapes the workspace: %s", quote(p))
	}
	var info fs.FileInfo
	exists := true
	for len(parts) > 0 {
		name := parts[0]
		parts = parts[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			if cur == c.root {
				return "", nil, escape()
			}
			cur = filepath.Dir(cur)
			info = nil
			continue
		}
		next := filepath.Join(cur, name)
		if !exists || c.lexical {
			exists = false
			cur = next
			continue
		}
		fi, err := os.Lstat(next)
		if err != nil {
			// Nothing exists from here on (or it is not a directory we
			// can enter): the remainder cannot hold a symlink, so it is
			// resolved lexically.
			exists = false
			info = nil
			cur = next
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			links++
			if links > maxSymlinks {
				return "", nil, c.Refuse("too many levels of symlinks: %s", quote(p))
			}
			target, err := os.Readlink(next)
			if err != nil {
				return "", nil, c.Refuse("cannot read symlink: %s", quote(p))
			}
			if filepath.IsAbs(target) {
				t := filepath.Clean(target)
				if t != c.root && !strings.HasPrefix(t, c.root+"/") {
					return "", nil, c.Refuse("symlink points outside the workspace: %s", quote(p))
				}
				cur = c.root
				target = strings.TrimPrefix(t, c.root)
			}
			parts = append(strings.Split(target, "/"), parts...)
			info = nil
			continue
		}
		cur = next
		info = fi
	}
	if exists && info == nil && !c.lexical {
		fi, err := os.Lstat(cur)
		if err == nil {
			info = fi
		} else if !errors.Is(err, fs.ErrNotExist) {
			info = nil
		}
	}
	if !exists || c.lexical {
		info = nil
	}
	return cur, info, nil
}

// hostToArg turns a host path inside the workspace into the argument form
// the sandbox sees (/workspace/...), for checking glob matches.
func (c *Checker) hostToArg(host string) string {
	return SandboxWorkspace + strings.TrimPrefix(host, c.root)
}
