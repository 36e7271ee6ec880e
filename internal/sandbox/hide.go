package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/airlockhq/airlock/internal/pathrule"
)

// maxHideScan bounds the workspace entries the path scan looks at; a
// larger workspace is refused (fail closed: nothing is hidden unseen).
const maxHideScan = 200000

// pathPlan is what the deny and read-only entries make of one workspace:
// workspace-relative paths ('/' separators) to hide (files and
// directories) and to bind read-only.
type pathPlan struct {
	hideFiles []string
	hideDirs  []string
	readOnly  []string
	// The workspace's root and the compiled entries, for the paths the
	// scan did not see: a disk quota's write-back checks each path it
	// writes or removes against them (withholds), so a path made during
	// the run (a new .env, a new sub/.git) is covered too.
	root     string
	deny, ro *pathrule.Set
}

func (p *pathPlan) empty() bool {
	return len(p.hideFiles)+len(p.hideDirs)+len(p.readOnly) == 0
}

// protects reports whether writing, deleting or replacing rel (relative to
// the workspace) would touch a hidden or read-only path: rel is at or
// under one, or one is under rel.
func (p *pathPlan) protects(rel string) bool {
	for _, l := range [][]string{p.hideFiles, p.hideDirs, p.readOnly} {
		for _, q := range l {
			if rel == q || strings.HasPrefix(rel, q+"/") || strings.HasPrefix(q, rel+"/") {
				return true
			}
		}
	}
	return false
}

// covers reports whether rel is at or under a hidden or read-only path.
func (p *pathPlan) covers(rel string) bool {
	return p.hides(rel) || rel == "" || atOrUnder(rel, p.readOnly)
}

// withholds reports whether a write-back must leave rel (relative to the
// workspace) as the workspace has it: rel is covered, or a deny_paths or
// read_only_paths entry matches it by its own path, whether it existed
// before the run or not.
func (p *pathPlan) withholds(rel string) bool {
	if p.covers(rel) {
		return true
	}
	for _, s := range []*pathrule.Set{p.deny, p.ro} {
		if _, ok := s.MatchFile(p.root, rel); ok {
			return true
		}
	}
	return false
}

// hides reports whether rel is at or under a hidden path.
func (p *pathPlan) hides(rel string) bool {
	return atOrUnder(rel, p.hideFiles) || atOrUnder(rel, p.hideDirs)
}

func atOrUnder(rel string, list []string) bool {
	for _, q := range list {
		if rel == q || strings.HasPrefix(rel, q+"/") {
			return true
		}
	}
	return false
}

// planPaths walks the workspace at root (real, symlink-free) and finds
// what RunOptions.DenyPaths and ReadOnlyPaths cover: a deny match is
// hidden, and so is every hard link to a file it hides (same inode, found
// anywhere in the workspace) and the workspace file a matching symlink
// points to; a read-only match is bound read-only. Each path is matched as
// the command sees it (relative, and under /workspace) and as it is on the
// host, where "~" is also the worker's own home: a workspace that is a
// home directory keeps its ~/.ssh hidden, and an absolute entry covers
// the workspace file it names.
func planPaths(root string, deny, readOnly []string) (*pathPlan, error) {
	plan := &pathPlan{root: root}
	if len(deny)+len(readOnly) == 0 {
		return plan, nil
	}
	home, _ := os.UserHomeDir() // "" when unknown: "~" is then every other home
	denySet, roSet := pathrule.Compile(home, deny), pathrule.Compile(home, readOnly)
	plan.deny, plan.ro = denySet, roSet

	type inode struct{ dev, ino uint64 }
	hiddenInodes := map[inode]bool{}
	linked := map[string]inode{} // files with more than one link, outside hidden parts
	hiddenFile := map[string]bool{}
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		if n++; n > maxHideScan {
			return fmt.Errorf("the workspace holds more than %d entries: too many to check against deny_paths", maxHideScan)
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator)))
		_, hide := denySet.MatchFile(root, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, _ := info.Sys().(*syscall.Stat_t)
		switch {
		case hide && d.IsDir():
			plan.hideDirs = append(plan.hideDirs, rel)
			// Its files' inodes, for hard links elsewhere.
			err := filepath.WalkDir(p, func(q string, e fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if n++; n > maxHideScan {
					return fmt.Errorf("the workspace holds more than %d entries: too many to check against deny_paths", maxHideScan)
				}
				if e.Type().IsRegular() {
					if fi, err := e.Info(); err == nil {
						if s, ok := fi.Sys().(*syscall.Stat_t); ok && s.Nlink > 1 {
							hiddenInodes[inode{uint64(s.Dev), s.Ino}] = true
						}
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			return fs.SkipDir
		case hide && d.Type()&fs.ModeSymlink != 0:
			// The link itself is harmless in the sandbox; what it points
			// to inside the workspace is hidden.
			if target, err := filepath.EvalSymlinks(p); err == nil && strings.HasPrefix(target, root+string(filepath.Separator)) {
				t := filepath.ToSlash(strings.TrimPrefix(target, root+string(filepath.Separator)))
				if fi, err := os.Stat(target); err == nil && fi.IsDir() {
					plan.hideDirs = append(plan.hideDirs, t)
				} else if !hiddenFile[t] {
					hiddenFile[t] = true
					plan.hideFiles = append(plan.hideFiles, t)
				}
			}
			return nil
		case hide:
			if !hiddenFile[rel] {
				hiddenFile[rel] = true
				plan.hideFiles = append(plan.hideFiles, rel)
			}
			if st != nil && d.Type().IsRegular() {
				hiddenInodes[inode{uint64(st.Dev), st.Ino}] = true
			}
			return nil
		}
		if _, ro := roSet.MatchFile(root, rel); ro && d.Type()&fs.ModeSymlink == 0 {
			plan.readOnly = append(plan.readOnly, rel)
		}
		if st != nil && d.Type().IsRegular() && st.Nlink > 1 {
			linked[rel] = inode{uint64(st.Dev), st.Ino}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checking the workspace against deny_paths: %w", err)
	}
	for rel, id := range linked {
		if hiddenInodes[id] && !hiddenFile[rel] && !underAny(rel, plan.hideDirs) {
			hiddenFile[rel] = true
			plan.hideFiles = append(plan.hideFiles, rel)
		}
	}
	// A path under a hidden directory needs no mount of its own (and a
	// read-only bind there would bring it back).
	plan.hideFiles = dropUnder(plan.hideFiles, plan.hideDirs)
	plan.readOnly = dropUnder(plan.readOnly, plan.hideDirs)
	return plan, nil
}

func underAny(rel string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}

func dropUnder(list, dirs []string) []string {
	out := list[:0]
	for _, p := range list {
		if !underAny(p, dirs) {
			out = append(out, p)
		}
	}
	return out
}

// mountArgs are the bwrap options that apply the plan over /workspace:
// read-only binds first, then the hidden paths (an empty read-only tmpfs
// over a directory, /dev/null over a file).
func (p *pathPlan) mountArgs(root string) []string {
	var a []string
	for _, rel := range p.readOnly {
		a = append(a, "--ro-bind", filepath.Join(root, rel), SandboxWorkspace+"/"+rel)
	}
	for _, rel := range p.hideDirs {
		dest := SandboxWorkspace + "/" + rel
		a = append(a, "--tmpfs", dest, "--remount-ro", dest)
	}
	for _, rel := range p.hideFiles {
		a = append(a, "--ro-bind", "/dev/null", SandboxWorkspace+"/"+rel)
	}
	return a
}

// CheckPaths refuses, against the real workspace, what the submit-time
// check could not see from the paths alone: an operand that resolves
// (through symlinks) to a path deny entries cover, and a written operand
// that is, or holds, a read-only or hidden path (mv of a directory holding
// a .git). It validates req like Validate.
func CheckPaths(req ExecRequest, pol Policy, deny, readOnly []string) error {
	if req.Workspace == "" {
		return refuse("the request has no workspace")
	}
	c, err := newChecker(req.Workspace, req.Dir)
	if err != nil {
		return err
	}
	plan, err := planPaths(c.root, deny, readOnly)
	if err != nil {
		return err
	}
	ops, err := Operands(req, pol)
	if err != nil {
		return err
	}
	for _, op := range ops {
		host := op.Path
		if real, err := filepath.EvalSymlinks(host); err == nil {
			host = real
		}
		var rel string
		switch {
		case host == c.root:
			rel = ""
		case strings.HasPrefix(host, c.root+string(filepath.Separator)):
			rel = filepath.ToSlash(strings.TrimPrefix(host, c.root+string(filepath.Separator)))
		default:
			continue // outside the workspace: Validate's to refuse
		}
		if rel != "" && plan.hides(rel) {
			return refuse("%s names a path deny_paths covers", quote(op.Path))
		}
		if op.Write && (rel == "" && !plan.empty() || rel != "" && plan.protects(rel)) {
			return refuse("%s would change a path that read_only_paths or deny_paths cover, or a directory holding one", quote(op.Path))
		}
	}
	return nil
}
