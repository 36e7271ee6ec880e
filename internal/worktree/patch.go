package worktree

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// Files is the state of the files an fs.write or fs.patch touches under a
// directory, as ReadFiles read them there, never through a symlink: each
// path's content, or that it is absent. Its Digest is what an fs tool's
// preview was made against, which the approval pins and the approved run
// checks again.
//
// A patch is applied to copies of these files in a private scratch
// directory (Patch), and what it changed is written back under the
// directory without following any symlink (WriteBack): git never works on
// the directory itself, so a symlink swapped in there at any moment (a
// sandboxed command's write-back, a person) is never followed, and what
// was read — and checked against the pin — is exactly what the patch is
// applied to.
type Files struct {
	dir   string
	paths []string         // sorted, distinct
	files map[string]*file // nil (or missing): absent
}

type file struct {
	data []byte
	exec bool // the owner's execute bit
}

// ReadFiles reads paths (clean slash paths, as CheckNoSymlink takes them)
// under dir, never through a symlink (openBeneath), at most limit bytes
// in all. A path that is not there (nor, on the way, a directory of it) is
// absent; one that is a symlink, or anything but a regular file (a
// directory, a FIFO), is refused.
func ReadFiles(dir string, paths []string, limit int64) (*Files, error) {
	f := &Files{dir: dir, paths: slices.Compact(slices.Sorted(slices.Values(paths))), files: map[string]*file{}}
	left := limit
	for _, p := range f.paths {
		fl, err := readRegular(dir, p, left, limit)
		if err != nil {
			return nil, err
		}
		if fl != nil {
			left -= int64(len(fl.data))
			f.files[p] = fl
		}
	}
	return f, nil
}

// readRegular reads rel under dir (nil: absent) with at most left of the
// limit bytes still to be read.
func readRegular(dir, rel string, left, limit int64) (*file, error) {
	f, err := openBeneath(dir, rel, false)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	b, err := readAtMost(f, rel, left, func() error {
		return refuse("the files to change are over %d bytes in all (at %s)", limit, rel)
	})
	if err != nil {
		return nil, err
	}
	return &file{data: b, exec: fi.Mode().Perm()&0o100 != 0}, nil
}

// Paths returns the paths read, sorted.
func (f *Files) Paths() []string { return slices.Clone(f.paths) }

// Content returns the content of rel as read, and false when it was
// absent.
func (f *Files) Content(rel string) ([]byte, bool) {
	if fl := f.files[rel]; fl != nil {
		return fl.data, true
	}
	return nil, false
}

// Digest names the state read: the SHA-256 (hex) over the paths in
// order, each with the SHA-256 of its content or "absent". The same files
// with the same contents always give the same digest; any change to the
// content of one of them, or one appearing or going, gives another.
func (f *Files) Digest() string {
	h := sha256.New()
	_, _ = io.WriteString(h, "airlock fs state v1\n")
	for _, p := range f.paths {
		state := "absent"
		if fl := f.files[p]; fl != nil {
			sum := sha256.Sum256(fl.data)
			state = hex.EncodeToString(sum[:])
		}
		// A path holds no NUL, and a state is one of two fixed forms.
		_, _ = fmt.Fprintf(h, "%s\x00%s\n", p, state)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// CheckPatch reports whether ApplyPatch would apply patch to f, changing
// nothing: the same apply, to copies of the same files.
func (f *Files) CheckPatch(ctx context.Context, patch string) error {
	_, err := f.Patch(ctx, patch)
	return err
}

// ApplyPatch applies patch to the files under f's directory: Patch, then
// WriteBack.
func (f *Files) ApplyPatch(ctx context.Context, patch string) error {
	after, err := f.Patch(ctx, patch)
	if err != nil {
		return err
	}
	return f.WriteBack(after)
}

// Patch applies a unified diff to copies of f's files and returns the
// files as it leaves them; nothing under f's directory is read or
// written. The copies sit in a private scratch directory, where hardened
// git applies the patch (git apply: all of it or nothing; paths relative
// to the directory; none inside .git; a hunk may apply at an offset, as
// git finds its context in the content read) with GIT_DIR set to an empty
// scratch repository of the worker's own: no repository planted in the
// directory is read, and no .gitattributes of the tree either (the
// scratch repository's info/attributes switch filters off anyway). A
// patch that would make or change anything but a regular file — a
// symlink (mode 120000), a submodule — is refused (nonRegularMode), and
// so are a binary change, whose content a reviewer reading the patch
// cannot see (binaryChange), and one that touches a path f does not hold
// (it was not read, nor checked, before).
func (f *Files) Patch(ctx context.Context, patch string) (*Files, error) {
	if line, bad := nonRegularMode(patch); bad {
		return nil, refuse("the patch makes or changes something other than a regular file (%q): fs.patch writes regular files only, never a symlink", line)
	}
	if line, bad := binaryChange(patch); bad {
		return nil, refuse("the patch holds a binary change (%q), whose content a reviewer cannot read: fs.patch applies text hunks only", line)
	}
	tmp, err := os.MkdirTemp("", "airlock-patch-*")
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	defer func() { _ = removeAll(tmp) }()
	tree, gitDir, patchFile := filepath.Join(tmp, "tree"), filepath.Join(tmp, "scratch.git"), filepath.Join(tmp, "patch")
	if err := os.WriteFile(patchFile, []byte(patch), 0o600); err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	if err := os.Mkdir(tree, 0o700); err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	for _, p := range f.paths {
		fl := f.files[p]
		if fl == nil {
			continue
		}
		full := filepath.Join(tree, filepath.FromSlash(p))
		mode := os.FileMode(0o644)
		if fl.exec {
			mode = 0o755
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			return nil, fmt.Errorf("worktree: %w", err)
		}
		if err := os.WriteFile(full, fl.data, mode); err != nil {
			return nil, fmt.Errorf("worktree: %w", err)
		}
		if err := os.Chmod(full, mode); err != nil { // whatever the umask
			return nil, fmt.Errorf("worktree: %w", err)
		}
	}
	if err := scratchRepo(ctx, tmp, gitDir, infoAttributes); err != nil {
		return nil, err
	}
	env := []string{"GIT_DIR=" + gitDir, "GIT_WORK_TREE=" + tree}
	if _, err := git(ctx, tree, env, "apply", patchFile); err != nil {
		var ge *GitError
		if errors.As(err, &ge) {
			return nil, refuse("the patch does not apply: %s", trimGit(ge.Stderr))
		}
		return nil, err
	}
	return f.scratchResult(tree)
}

// scratchResult reads what git apply left in tree: every regular file
// there must be one of f's paths.
func (f *Files) scratchResult(tree string) (*Files, error) {
	out := &Files{dir: f.dir, paths: f.paths, files: map[string]*file{}}
	err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(tree, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !d.Type().IsRegular() {
			return refuse("the patch makes %s something other than a regular file: fs.patch writes regular files only", rel)
		}
		if _, ok := slices.BinarySearch(f.paths, rel); !ok {
			return refuse("the patch changes %s, which was not read and checked before it applied", rel)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out.files[rel] = &file{data: b, exec: info.Mode().Perm()&0o100 != 0}
		return nil
	})
	if err != nil {
		var refusal *Error
		if errors.As(err, &refusal) {
			return nil, err
		}
		return nil, fmt.Errorf("worktree: reading the patched copies: %w", err)
	}
	return out, nil
}

// WriteBack makes the files under f's directory what after (f patched)
// holds: each file whose content or execute bit changed is written (made
// if new, with the directories on the way), then each file gone is
// removed, never through a symlink (writeRegular, removeRegular: a
// symlink anywhere on a path fails it). Files the patch left as they were
// are not touched. All or nothing, as far as the directory lets it: when
// a write or removal fails, those done before it are put back as they
// were read.
func (f *Files) WriteBack(after *Files) error {
	var done []string
	undo := func(err error) error {
		for _, p := range slices.Backward(done) {
			if was := f.files[p]; was != nil {
				_ = writeRegular(f.dir, p, was.data, &was.exec)
			} else {
				_ = removeRegular(f.dir, p)
			}
		}
		return err
	}
	for _, p := range f.paths {
		was, now := f.files[p], after.files[p]
		if now == nil || (was != nil && was.exec == now.exec && bytes.Equal(was.data, now.data)) {
			continue
		}
		var exec *bool
		if was == nil || was.exec != now.exec {
			exec = &now.exec
		}
		if err := writeRegular(f.dir, p, now.data, exec); err != nil {
			return undo(err)
		}
		done = append(done, p)
	}
	for _, p := range f.paths {
		if f.files[p] == nil || after.files[p] != nil {
			continue
		}
		if err := removeRegular(f.dir, p); err != nil {
			return undo(err)
		}
		done = append(done, p)
	}
	return nil
}
