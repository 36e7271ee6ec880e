package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// State is what a worktree held when an exec's impact preview ran: its
// HEAD commit and the tree id of every file in it (committed or not,
// untracked and ignored files included, .git left out), as git hashes
// them. Two states are equal exactly when HEAD and every file's content,
// executable bit and symlink target are.
type State struct {
	Head string `json:"head"`
	Tree string `json:"tree"`
}

// Pin is the state as one string ("<head>:<tree>"), what an approval pins.
func (s State) Pin() string { return s.Head + ":" + s.Tree }

// scratchAttributes neutralise every attribute for the scratch repository:
// no filter, diff or merge driver, no ident, no end-of-line or encoding
// conversion, so a tree id hashes the bytes exactly as they are on disk.
const scratchAttributes = "* -filter !diff !merge -ident -text -working-tree-encoding\n"

// Impact measures what a command does to a directory, in a scratch
// repository of its own in a temporary directory: Begin hashes the
// worktree as it is (its objects stay in the scratch repository), Diff
// hashes a directory after the command and returns the full text diff
// between the two. Nothing is ever written to the worktree or to its
// repository. Close removes the scratch repository (and the copy a
// preview ran on, which lives inside it).
type Impact struct {
	// Before is the worktree's state when Begin ran.
	Before State
	// Path is the worktree's directory.
	Path string

	dir    string // the temporary directory
	gitDir string // the scratch repository
	seq    int
}

// BeginImpact records the state of worktree (HEAD and the tree of its
// files) in a new scratch repository.
func (m *Manager) BeginImpact(ctx context.Context, worktree string) (*Impact, error) {
	info, err := m.Open(worktree)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "airlock-impact-*")
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	im := &Impact{Path: info.Path, dir: dir, gitDir: filepath.Join(dir, "scratch.git")}
	if err := im.init(ctx); err != nil {
		_ = im.Close()
		return nil, err
	}
	wt, err := m.worktreeGit(ctx, info)
	if err != nil {
		_ = im.Close()
		return nil, err
	}
	head, err := wt(ctx, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		_ = im.Close()
		return nil, err
	}
	tree, err := im.TreeOf(ctx, info.Path)
	if err != nil {
		_ = im.Close()
		return nil, err
	}
	im.Before = State{Head: strings.TrimSpace(head), Tree: tree}
	return im, nil
}

func (im *Impact) init(ctx context.Context) error {
	return scratchRepo(ctx, im.dir, im.gitDir, scratchAttributes)
}

// TreeOf hashes every file under dir into the scratch repository (through
// an index of its own, ignore rules switched off) and returns the tree id.
func (im *Impact) TreeOf(ctx context.Context, dir string) (string, error) {
	im.seq++
	env := []string{"GIT_DIR=" + im.gitDir, "GIT_WORK_TREE=" + dir,
		"GIT_INDEX_FILE=" + filepath.Join(im.dir, fmt.Sprintf("index-%d", im.seq))}
	if _, err := git(ctx, dir, env, "add", "--all", "--force", "--", "."); err != nil {
		return "", err
	}
	tree, err := git(ctx, dir, env, "write-tree")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(tree), nil
}

// Diff returns the full text diff (VisibleDiff: control bytes made
// visible, NUL bytes included rather than "Binary files differ") from the
// worktree's state at Begin to the files under dir now, and dir's tree id.
func (im *Impact) Diff(ctx context.Context, dir string) (diff, tree string, err error) {
	tree, err = im.TreeOf(ctx, dir)
	if err != nil {
		return "", "", err
	}
	out, err := git(ctx, im.dir, []string{"GIT_DIR=" + im.gitDir},
		"diff", "--text", "--no-ext-diff", "--no-textconv", "--no-color", im.Before.Tree, tree)
	if err != nil {
		return "", "", err
	}
	return VisibleDiff(out), tree, nil
}

// Close removes the scratch repository and everything under it.
func (im *Impact) Close() error { return removeAll(im.dir) }

// CopyLimits bound a copy for a preview: it stops with an error past
// them (zero: no bound).
type CopyLimits struct {
	Bytes   int64 // total size of the regular files
	Entries int64 // files, directories and links
}

// CopyOfWorktree copies the worktree into a new directory inside the
// scratch directory and returns its path: directories, regular files
// (content, permissions, modification time), symlinks as they are (never
// followed) and hard links as hard links; other kinds of file are left
// out. The copy's tree must hash to Before.Tree, or the worktree changed
// while it was copied and the copy is refused.
func (im *Impact) CopyOfWorktree(ctx context.Context, limits CopyLimits) (string, error) {
	dst := filepath.Join(im.dir, "copy")
	if err := copyTree(im.Path, dst, limits); err != nil {
		return "", err
	}
	tree, err := im.TreeOf(ctx, dst)
	if err != nil {
		return "", err
	}
	if tree != im.Before.Tree {
		return "", refuse("the worktree changed while it was copied for the preview; try again")
	}
	return dst, nil
}

// copyTree copies src to the new directory dst (see CopyOfWorktree),
// through os.Root on both sides.
func copyTree(src, dst string, limits CopyLimits) error {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	from, err := os.OpenRoot(src)
	if err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	defer func() { _ = from.Close() }()
	to, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	defer func() { _ = to.Close() }()
	type dirMode struct {
		p    string
		mode fs.FileMode
	}
	var dirs []dirMode
	links := map[[2]uint64]string{} // (dev, inode) → first copy
	var bytes, entries int64
	err = fs.WalkDir(from.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if entries++; limits.Entries > 0 && entries > limits.Entries {
			return refuse("the worktree holds more than %d files: over the preview's bound", limits.Entries)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			dirs = append(dirs, dirMode{p, info.Mode().Perm()})
			return to.Mkdir(p, 0o700)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := from.Readlink(p)
			if err != nil {
				return err
			}
			return to.Symlink(target, p)
		case d.Type().IsRegular():
			if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				key := [2]uint64{uint64(st.Dev), st.Ino}
				if first, seen := links[key]; seen {
					return to.Link(first, p)
				}
				links[key] = p
			}
			if bytes += info.Size(); limits.Bytes > 0 && bytes > limits.Bytes {
				return refuse("the worktree is larger than %d MiB: over the preview's bound", limits.Bytes>>20)
			}
			return copyRegular(from, to, p, info)
		}
		return nil
	})
	if err != nil {
		var we *Error
		if errors.As(err, &we) {
			return err
		}
		return fmt.Errorf("worktree: copying for the preview: %w", err)
	}
	for i := len(dirs) - 1; i >= 0; i-- { // deepest first: a read-only parent last
		if err := to.Chmod(dirs[i].p, dirs[i].mode); err != nil {
			return fmt.Errorf("worktree: %w", err)
		}
	}
	if fi, err := os.Stat(src); err == nil { // the scratch directory around it stays 0700
		if err := os.Chmod(dst, fi.Mode().Perm()); err != nil {
			return fmt.Errorf("worktree: %w", err)
		}
	}
	return nil
}

func copyRegular(from, to *os.Root, p string, info fs.FileInfo) error {
	in, err := from.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := to.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = to.Chmod(p, info.Mode().Perm())
	}
	if err == nil {
		err = to.Chtimes(p, info.ModTime(), info.ModTime())
	}
	return err
}

// removeAll removes dir, first making every directory under it writable
// (a command may have left one read-only in the copy).
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("worktree: removing %s: %w", dir, err)
	}
	return nil
}
