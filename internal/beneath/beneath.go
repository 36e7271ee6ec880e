// Package beneath walks paths under a directory one component at a time,
// never following a symlink: each directory is opened relative to the one
// before it with O_NOFOLLOW, so a symlink anywhere on the path — one
// pointing inside the directory as much as one pointing out of it, or one
// swapped in while the walk runs — fails the walk instead of being
// followed.
//
// It is the one place the worker's file access (internal/worktree's
// fs.read, fs.write and fs.patch, internal/sandbox's write-back of a run's
// workspace) walks into a directory an agent can change. Linux (O_PATH).
package beneath

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"golang.org/x/sys/unix"
)

// SymlinkError says that Path, a part of the path walked, is a symlink.
type SymlinkError struct {
	Path string // the path up to and including the symlink
}

func (e *SymlinkError) Error() string { return e.Path + " is a symlink" }

// Check refuses rel unless it is a clean relative slash path: no empty,
// "." or ".." component (so no leading or doubled slash either).
func Check(rel string) error {
	for _, p := range strings.Split(rel, "/") {
		if p == "" || p == "." || p == ".." {
			return fmt.Errorf("%q is not a clean relative path", rel)
		}
	}
	return nil
}

// Parent opens, from the directory root (a descriptor, left open), every
// directory of rel but its last component, without following a symlink
// (mkdirs: making those missing, 0755 before the umask), and returns the
// last directory (an O_PATH descriptor, for the *at calls; the caller
// closes it) and the last component. rel must pass Check. A component that
// is a symlink fails with *SymlinkError; any other failure is an
// *fs.PathError naming the path up to the component.
func Parent(root int, rel string, mkdirs bool) (int, string, error) {
	if err := Check(rel); err != nil {
		return -1, "", err
	}
	parts := strings.Split(rel, "/")
	d, err := Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", &fs.PathError{Op: "open", Path: ".", Err: err}
	}
	for i, p := range parts[:len(parts)-1] {
		next, err := openDir(d, p)
		if errors.Is(err, unix.ENOENT) && mkdirs {
			if err = unix.Mkdirat(d, p, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = openDir(d, p)
			}
		}
		if err != nil {
			err = Explain(d, p, strings.Join(parts[:i+1], "/"), err)
			_ = unix.Close(d)
			return -1, "", err
		}
		_ = unix.Close(d)
		d = next
	}
	return d, parts[len(parts)-1], nil
}

func openDir(d int, name string) (int, error) {
	return Openat(d, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// IsSymlink reports whether name in the directory d is a symlink.
func IsSymlink(d int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(d, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// Explain turns err, from opening name in the directory d (path is the
// walked path up to and including name), into a *SymlinkError when name is
// a symlink, else into an *fs.PathError.
func Explain(d int, name, path string, err error) error {
	if IsSymlink(d, name) {
		return &SymlinkError{Path: path}
	}
	return &fs.PathError{Op: "open", Path: path, Err: err}
}

// Openat is unix.Openat, retried on EINTR.
func Openat(d int, name string, flags int, perm uint32) (int, error) {
	for {
		fd, err := unix.Openat(d, name, flags, perm)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}
