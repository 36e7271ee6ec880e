package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock/internal/beneath"
)

// ReadFile reads the regular file rel (a slash path) under dir, never
// through a symlink (openBeneath), reading at most limit bytes (more is an
// error).
func ReadFile(dir, rel string, limit int64) ([]byte, error) {
	f, err := openBeneath(dir, rel, false)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return readAtMost(f, rel, limit, func() error { return refuse("%s is over %d bytes", rel, limit) })
}

// readAtMost reads f (rel, opened by openBeneath) whole, or refuses it
// with over() when it holds more than limit bytes: the one bounded read
// of a file an fs tool looks at.
func readAtMost(f *os.File, rel string, limit int64, over func() error) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("worktree: reading %s: %w", rel, err)
	}
	if int64(len(b)) > limit {
		return nil, over()
	}
	return b, nil
}

// WriteFile writes data to the regular file rel (a slash path) under dir,
// creating it (0644) and the directories on the way (0755) as needed,
// never through a symlink (openBeneath).
func WriteFile(dir, rel string, data []byte) error {
	return writeRegular(dir, rel, data, nil)
}

// writeRegular is WriteFile; exec, when not nil, then sets the file's
// execute bits (each where its read bit is, as git makes an executable
// file) or clears them, through the descriptor written.
func writeRegular(dir, rel string, data []byte, exec *bool) error {
	f, err := openBeneath(dir, rel, true)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && exec != nil {
		err = setExec(f, *exec)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("worktree: writing %s: %w", rel, err)
	}
	return nil
}

func setExec(f *os.File, exec bool) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	perm := fi.Mode().Perm()
	want := perm &^ 0o111
	if exec {
		want = perm | (perm&0o444)>>2
	}
	if want == perm {
		return nil
	}
	return f.Chmod(want)
}

// removeRegular removes the regular file rel (a slash path) under dir,
// never through a symlink (walkBeneath; a symlink at rel itself is
// refused, not removed), then the directories on the way that the
// removal left empty, as git apply does (never dir itself).
func removeRegular(dir, rel string) error {
	d, last, err := walkBeneath(dir, rel, false)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(d) }()
	var st unix.Stat_t
	if err := unix.Fstatat(d, last, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("worktree: removing %s: %w", rel, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFLNK:
		return symlinkRefusal(rel, rel)
	default:
		return refuse("%s is not a regular file", rel)
	}
	// unlinkat never follows last: a symlink swapped in since the stat is
	// itself removed, never what it points to.
	if err := unix.Unlinkat(d, last, 0); err != nil {
		return fmt.Errorf("worktree: removing %s: %w", rel, err)
	}
	for p := path.Dir(rel); p != "."; p = path.Dir(p) {
		pd, name, err := walkBeneath(dir, p, false)
		if err != nil {
			break
		}
		err = unix.Unlinkat(pd, name, unix.AT_REMOVEDIR) // only an empty directory, never through a symlink
		_ = unix.Close(pd)
		if err != nil {
			break
		}
	}
	return nil
}

// CheckNoSymlink refuses rel (a slash path) under dir when any part of it
// that exists is a symlink — one pointing inside dir as much as one
// pointing out of it (a link to .git or to a .env would take a write or
// read past the path rules, which judge the name). A part that does not
// exist yet is no symlink.
func CheckNoSymlink(dir, rel string) error {
	d, last, err := walkBeneath(dir, rel, false)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
		return nil // nothing there to follow
	}
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(d) }()
	if beneath.IsSymlink(d, last) {
		return symlinkRefusal(rel, rel)
	}
	return nil
}

func symlinkRefusal(rel, link string) error {
	if rel == link {
		return refuse("%s is a symlink; files are never read or written through one", rel)
	}
	return refuse("%s goes through the symlink %s; files are never read or written through one", rel, link)
}

// openBeneath opens the regular file rel (a slash path, no "..") under
// dir, for reading or (write) for writing, created or truncated, with the
// directories on the way made. No symlink is followed, whether it points
// inside dir or out of it (beneath.Parent, and the file itself with
// O_NOFOLLOW), so a symlink anywhere on the path — or swapped in while
// this runs — fails the open. A FIFO or device is refused without being
// waited on.
func openBeneath(dir, rel string, write bool) (*os.File, error) {
	d, last, err := walkBeneath(dir, rel, write)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unix.Close(d) }()
	flags := unix.O_RDONLY
	if write {
		flags = unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC
	}
	fd, err := beneath.Openat(d, last, flags|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, walkError(rel, beneath.Explain(d, last, rel, err))
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, filepath.FromSlash(rel)))
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, refuse("%s is not a regular file", rel)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("worktree: %w", err)
	}
	return f, nil
}

// walkBeneath opens, without following any symlink, every directory of rel
// under dir but the last component (mkdirs: making those missing), and
// returns the descriptor of the last directory and the last component.
func walkBeneath(dir, rel string, mkdirs bool) (int, string, error) {
	if err := beneath.Check(rel); err != nil {
		return -1, "", refuse("%s", err)
	}
	root, err := beneath.Openat(unix.AT_FDCWD, dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", fmt.Errorf("worktree: %w", &fs.PathError{Op: "open", Path: dir, Err: err})
	}
	defer func() { _ = unix.Close(root) }()
	d, last, err := beneath.Parent(root, rel, mkdirs)
	if err != nil {
		return -1, "", walkError(rel, err)
	}
	return d, last, nil
}

// walkError words a beneath error: a symlink on the way is refused as
// such.
func walkError(rel string, err error) error {
	var se *beneath.SymlinkError
	if errors.As(err, &se) {
		return symlinkRefusal(rel, se.Path)
	}
	return fmt.Errorf("worktree: %w", err)
}

// nonRegularMode returns the first line of patch giving a file mode that
// git apply would not read as a regular file's, as git reads the mode
// lines of a git diff's extended header ("old mode", "new mode", "deleted
// file mode", "new file mode", and the mode after "index a..b"): strtoul
// in base 8 (blanks and a sign first), the file type from the bits
// 0170000. Any line starting so counts, wherever it is, and a mode git
// could not read counts too: refusing more is safe.
func nonRegularMode(patch string) (string, bool) {
	for _, line := range strings.Split(patch, "\n") {
		mode, ok := cutAny(line, "old mode ", "new mode ", "deleted file mode ", "new file mode ")
		if !ok {
			rest, isIndex := strings.CutPrefix(line, "index ")
			if !isIndex {
				continue
			}
			// "index <old>..<new>[ <mode>]": the mode follows the first
			// space after "..".
			_, after, dots := strings.Cut(rest, "..")
			_, m, hasMode := strings.Cut(after, " ")
			if !dots || !hasMode {
				continue
			}
			mode = m
		}
		if m, ok := parseMode(mode); !ok || m&0o170000 != 0o100000 {
			return line, true
		}
	}
	return "", false
}

// binaryChange returns the first line of patch that starts a binary
// change as git apply reads one: "GIT binary patch" (the new content as
// base85 deflate, which git apply writes as readily as a text hunk) or a
// "Binary files … differ" / "Files … differ" line. No hunk line starts
// so (a hunk's lines start with ' ', '+', '-' or '\'), and any line
// starting so counts, wherever it is: refusing more is safe.
func binaryChange(patch string) (string, bool) {
	for _, line := range strings.Split(patch, "\n") {
		if strings.HasPrefix(line, "GIT binary patch") ||
			(strings.HasPrefix(line, "Binary files ") || strings.HasPrefix(line, "Files ")) && strings.HasSuffix(strings.TrimSuffix(line, "\r"), " differ") {
			return line, true
		}
	}
	return "", false
}

// parseMode reads a mode as git's parse_mode_line does: strtoul(s, &end,
// 8) stored in an unsigned int, then a blank (or the end) must follow.
func parseMode(s string) (uint32, bool) {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	var v uint64
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '7' {
		if v > 1<<60 {
			return 0, false // git would saturate; no regular mode anyway
		}
		v = v*8 + uint64(s[n]-'0')
		n++
	}
	if n == 0 || (n < len(s) && !strings.ContainsRune(" \t\n\v\f\r", rune(s[n]))) {
		return 0, false
	}
	if neg {
		v = -v
	}
	return uint32(v), true
}

func cutAny(line string, prefixes ...string) (string, bool) {
	for _, p := range prefixes {
		if rest, ok := strings.CutPrefix(line, p); ok {
			return rest, true
		}
	}
	return "", false
}

func trimGit(s string) string {
	if len(s) > 2000 {
		s = s[:2000]
	}
	return s
}

// DiffContent returns the unified diff that replacing old with new makes
// to the file name (old nil: the file is new), by hardened git on copies
// in a temporary directory: nothing under any root is read or run. It is
// full text, binary content included (VisibleDiff).
func DiffContent(ctx context.Context, name string, old, new []byte) (string, error) {
	tmp, err := os.MkdirTemp("", "airlock-diff-*")
	if err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	from := "/dev/null"
	if old != nil {
		from = "a"
		if err := os.WriteFile(filepath.Join(tmp, "a"), old, 0o600); err != nil {
			return "", fmt.Errorf("worktree: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "b"), new, 0o600); err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	// No repository is looked for above tmp (a .git planted in the
	// temporary directory's parent by another user of the host would
	// otherwise lend its diff drivers), and no textconv runs.
	env := []string{"GIT_CEILING_DIRECTORIES=" + filepath.Dir(tmp)}
	// --text: a NUL byte in the file written over must not turn the diff
	// into "Binary files … differ" and hide what the write puts there.
	out, err := git(ctx, tmp, env, "diff", "--no-index", "--text", "--no-color", "--no-ext-diff", "--no-textconv", "--", from, "b")
	var ge *GitError
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ge) && errors.As(ge.Err, &ee) && ee.ExitCode() == 1) {
		return "", err // exit 1 only says the files differ
	}
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "diff --git "):
			lines[i] = "diff --git a/" + name + " b/" + name
		case l == "--- a/a":
			lines[i] = "--- a/" + name
		case l == "+++ b/b":
			lines[i] = "+++ b/" + name
		case strings.HasPrefix(l, "@@"):
			return VisibleDiff(strings.Join(lines, "\n")), nil
		}
	}
	return VisibleDiff(out), nil
}
