//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock/internal/beneath"
)

// A run with a disk quota (RunOptions.DiskQuota) does not see the
// workspace itself: /workspace is a tmpfs of exactly the quota's size that
// bwrap mounts in the sandbox's own mount namespace, and Run copies the
// workspace into it while the sandbox waits on its block fd (through
// /proc/PID/root, holding the tmpfs open). The command's writes stop at the
// size with ENOSPC, a watchdog stops it when the tmpfs is full or holds more
// than the inode quota, and none of it touches the host's disk. When the
// command ends on its own within the quota, what it changed (new, modified
// and deleted files, directories and symlinks) is written back to the
// workspace; when it is killed (timeout, cancellation, quota) nothing is,
// and the tmpfs goes away with the last file descriptor.

// quotaSpec is the quota of one run.
type quotaSpec struct {
	root   string // real host path of the workspace
	size   int64  // bytes
	inodes int64  // files, directories and links
	// paths is never copied in (hidden) or written back (hidden and
	// read-only, and whatever its deny and read-only entries cover, also
	// a path made during the run); nil for none.
	paths *pathPlan
}

// entryID identifies one version of an entry in the tmpfs: any change to
// its content, mode or name gives it a new ctime (which a program cannot
// set), a replacement a new inode.
type entryID struct {
	ino   uint64
	ctime int64
	mode  fs.FileMode
}

// quotaFS is the tmpfs of one run, held open past the sandbox's end.
type quotaFS struct {
	spec     quotaSpec
	tmp      *os.Root
	tmpFile  *os.File // the tmpfs root, for statfs
	real     *os.Root
	rootFD   int // the workspace's root (O_PATH), for the write-back; -1 when not open
	manifest map[string]entryID

	mu       sync.Mutex
	exceeded string
}

// waitBlocked waits until the sandbox's first process is blocked reading
// its block fd: bwrap reads it after it has built the mount namespace (the
// tmpfs included) and chrooted into it, before it forks the command.
func waitBlocked(ctx context.Context, pid int) error {
	want := strconv.Itoa(unix.SYS_READ) + " 0x" + strconv.FormatInt(fdBlock, 16) + " "
	deadline := time.Now().Add(setupTimeout)
	for i := 0; ; i++ {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
		if err != nil {
			return fmt.Errorf("cannot watch the sandbox's setup: %w", err)
		}
		if strings.HasPrefix(string(b), want) {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("the sandbox did not finish its setup")
		}
		time.Sleep(time.Duration(min(i+1, 20)) * 100 * time.Microsecond)
	}
}

// openQuota opens the sandbox's /workspace tmpfs (checking that it is the
// one bwrap made for this run: a tmpfs of the quota's size) and copies the
// workspace into it.
func openQuota(ctx context.Context, pid int, spec quotaSpec) (_ *quotaFS, err error) {
	if err := waitBlocked(ctx, pid); err != nil {
		return nil, err
	}
	p := fmt.Sprintf("/proc/%d/root%s", pid, SandboxWorkspace)
	q := &quotaFS{spec: spec, rootFD: -1, manifest: map[string]entryID{}}
	defer func() {
		if err != nil {
			q.close()
		}
	}()
	if q.tmpFile, err = os.Open(p); err != nil {
		return nil, fmt.Errorf("cannot open the sandbox's workspace: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(q.tmpFile.Fd()), &st); err != nil {
		return nil, fmt.Errorf("statfs of the sandbox's workspace: %w", err)
	}
	page := int64(os.Getpagesize())
	total := int64(st.Blocks) * st.Bsize
	if st.Type != unix.TMPFS_MAGIC || total < spec.size || total > spec.size+2*page {
		return nil, errors.New("the sandbox's workspace is not its quota tmpfs")
	}
	if q.tmp, err = os.OpenRoot(p); err != nil {
		return nil, fmt.Errorf("cannot open the sandbox's workspace: %w", err)
	}
	if q.real, err = os.OpenRoot(spec.root); err != nil {
		return nil, fmt.Errorf("cannot open the workspace: %w", err)
	}
	if q.rootFD, err = unix.Open(spec.root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("cannot open the workspace: %w", err)
	}
	if err := q.copyIn(); err != nil {
		return nil, err
	}
	return q, nil
}

// close releases the tmpfs (its memory is freed once the sandbox is gone).
func (q *quotaFS) close() {
	for _, c := range []io.Closer{q.tmp, q.real, q.tmpFile} {
		if c != nil && !isNilCloser(c) {
			c.Close()
		}
	}
	if q.rootFD >= 0 {
		unix.Close(q.rootFD)
	}
}

func isNilCloser(c io.Closer) bool {
	switch v := c.(type) {
	case *os.Root:
		return v == nil
	case *os.File:
		return v == nil
	}
	return false
}

// fullError says that the workspace does not fit the quota.
func (q *quotaFS) fullError(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("the workspace is larger than the disk quota of %s", mib(q.spec.size))
	}
	return err
}

// copyIn copies the workspace into the tmpfs: directories, regular files
// (content, permissions, modification time) and symlinks (as they are,
// never followed); other kinds of file are left out. Then it records what
// each entry is (the manifest write-back compares against).
func (q *quotaFS) copyIn() error {
	n := int64(0)
	err := fs.WalkDir(q.real.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if staleWrite(d.Name()) {
			// Left by a worker that died while writing a run back.
			return q.real.Remove(p)
		}
		if q.spec.paths != nil && q.spec.paths.hides(filepath.ToSlash(p)) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if n++; n > q.spec.inodes {
			return fmt.Errorf("the workspace holds more than the quota of %d files", q.spec.inodes)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := q.tmp.Mkdir(p, 0o700); err != nil {
				return q.fullError(err)
			}
			return q.tmp.Chmod(p, info.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			target, err := q.real.Readlink(p)
			if err != nil {
				return err
			}
			return q.fullError(q.tmp.Symlink(target, p))
		case d.Type().IsRegular():
			return q.fullError(copyFile(q.real, q.tmp, p, p, info))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("copying the workspace in: %w", err)
	}
	return q.walkTmp(func(p string, id entryID) { q.manifest[p] = id })
}

// copyFile copies the regular file src in root from to dst in root to,
// with its permissions and modification time. dst must not exist.
func copyFile(from, to *os.Root, src, dst string, info fs.FileInfo) error {
	in, err := from.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := to.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = to.Chmod(dst, info.Mode().Perm())
	}
	if err == nil {
		err = to.Chtimes(dst, info.ModTime(), info.ModTime())
	}
	if err != nil {
		_ = to.Remove(dst)
	}
	return err
}

// walkTmp calls fn for every entry of the tmpfs but its root.
func (q *quotaFS) walkTmp(fn func(p string, id entryID)) error {
	return fs.WalkDir(q.tmp.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		fi, err := q.tmp.Lstat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return errors.New("no inode information")
		}
		fn(p, entryID{ino: st.Ino, ctime: st.Ctim.Nano(), mode: fi.Mode()})
		return nil
	})
}

// watch stops the run (through stop) once the tmpfs is full or holds more
// entries than the inode quota, until done is closed.
func (q *quotaFS) watch(done <-chan struct{}, stop func(why string)) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		if why := q.check(); why != "" {
			stop(why)
			return
		}
	}
}

// check returns why the run is over its quota, or "" (and remembers it).
func (q *quotaFS) check() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.exceeded != "" {
		return q.exceeded
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(q.tmpFile.Fd()), &st); err != nil {
		q.exceeded = fmt.Sprintf("disk quota: cannot read the workspace's usage: %v", err)
		return q.exceeded
	}
	used := int64(st.Files) - int64(st.Ffree) - 1 // the root is not the command's
	switch {
	case st.Bavail == 0:
		q.exceeded = q.exceededMessage()
	case used > q.spec.inodes:
		q.exceeded = fmt.Sprintf("disk quota exceeded: the workspace holds more than its limit of %d files; the command was stopped and nothing it wrote was kept", q.spec.inodes)
	}
	return q.exceeded
}

// exceededMessage is the result's error for a run that filled its quota.
func (q *quotaFS) exceededMessage() string {
	return fmt.Sprintf("disk quota exceeded: the workspace reached its limit of %s; the command was stopped and nothing it wrote was kept", mib(q.spec.size))
}

// writeBack applies to the workspace what the command changed in the
// tmpfs, compared with the manifest: new and changed entries are written
// (files through a temporary file and a rename), deleted ones removed.
// Entries another run added to the workspace meanwhile are left alone.
//
// Every path is reached from the workspace's root one directory at a time
// (openat with O_NOFOLLOW), and written or removed relative to the
// directory that holds it: nothing is written outside the workspace, and
// nothing through a symlink either. A directory of the path that is a
// symlink now (another run's write-back can make one while this run works
// on its copy: say d -> .git, and this run edited d/config) fails the
// write-back there, and nothing more is written.
//
// What the plan withholds (deny_paths, read_only_paths) is left as the
// workspace has it, and the run goes on: it returns those paths, the
// topmost of them, sorted.
func (q *quotaFS) writeBack() ([]string, error) {
	seen := map[string]bool{}
	var changed []string
	current := map[string]entryID{}
	if err := q.walkTmp(func(p string, id entryID) {
		seen[p] = true
		current[p] = id
		if old, ok := q.manifest[p]; !ok || old != id {
			changed = append(changed, p)
		}
	}); err != nil {
		return nil, fmt.Errorf("reading the command's workspace: %w", err)
	}
	var withheld []string
	// Deleted entries first, deepest first: a file replaced by a
	// directory of the same name (or the reverse) is then free to write.
	var gone []string
	for p := range q.manifest {
		if !seen[p] {
			gone = append(gone, p)
		}
	}
	slices.SortFunc(gone, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	plan := q.spec.paths
	if plan == nil {
		plan = &pathPlan{}
	}
	for _, p := range gone {
		if plan.withholds(p) || plan.protects(p) {
			withheld = append(withheld, p)
			continue
		}
		kept, err := q.remove(p, plan)
		if err != nil {
			return topmost(withheld), fmt.Errorf("removing %s: %w", p, err)
		}
		if kept {
			withheld = append(withheld, p)
		}
	}
	for _, p := range changed { // parents before children (walk order)
		if plan.withholds(p) {
			withheld = append(withheld, p) // hidden or read-only, before the run or by its name
			continue
		}
		written, err := q.write(p, current[p], plan)
		if err != nil {
			return topmost(withheld), fmt.Errorf("writing %s: %w", p, err)
		}
		if !written {
			withheld = append(withheld, p)
		}
	}
	return topmost(withheld), nil
}

// topmost sorts paths and drops those under another one.
func topmost(paths []string) []string {
	if len(paths) == 0 {
		return nil
	}
	set := make(map[string]bool, len(paths))
	for _, p := range paths {
		set[p] = true
	}
	var out []string
	for p := range set {
		under := false
		for d := path.Dir(p); d != "." && !under; d = path.Dir(d) {
			under = set[d]
		}
		if !under {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// openParent opens the workspace directory that holds p, one component at
// a time and never through a symlink (beneath.Parent), and returns it (an
// O_PATH fd, for the *at calls) with p's last component.
func (q *quotaFS) openParent(p string) (int, string, error) {
	dir, name, err := beneath.Parent(q.rootFD, p, false)
	var se *beneath.SymlinkError
	if errors.As(err, &se) {
		err = fmt.Errorf("%s is a symlink in the workspace now (the workspace changed during the run): nothing is written through it", se.Path)
	}
	return dir, name, err
}

// remove removes the workspace entry p (a directory with what it holds,
// but for what plan withholds, and so the directories holding that: kept
// says so). It is not an error that p is gone already.
func (q *quotaFS) remove(p string, plan *pathPlan) (kept bool, err error) {
	dir, name, err := q.openParent(p)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer unix.Close(dir)
	return removeAt(dir, name, p, plan)
}

// removeAt removes name (the workspace path rel) in dir, and what it holds
// if it is a directory, never following a symlink. What plan withholds is
// kept, and so is every directory holding it: kept says so.
func removeAt(dir int, name, rel string, plan *pathPlan) (kept bool, err error) {
	if plan.withholds(rel) {
		return true, nil
	}
	err = unix.Unlinkat(dir, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if !errors.Is(err, unix.EISDIR) {
		return false, err
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	f := os.NewFile(uintptr(fd), name)
	names, err := f.Readdirnames(-1)
	for _, n := range names {
		if err != nil {
			break
		}
		var k bool
		k, err = removeAt(fd, n, rel+"/"+n, plan)
		kept = kept || k
	}
	f.Close()
	if err != nil || kept {
		return kept, err
	}
	if err := unix.Unlinkat(dir, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return false, err
	}
	return false, nil
}

// write writes the tmpfs entry p to the workspace, replacing what is there
// if it is of another kind, unless that holds what plan withholds: then
// it writes nothing and written is false.
func (q *quotaFS) write(p string, id entryID, plan *pathPlan) (written bool, err error) {
	dir, name, err := q.openParent(p)
	if err != nil {
		return false, err
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && fileType(st.Mode) != id.mode.Type() {
		if plan.protects(p) {
			return false, nil // replacing it would remove what lies under it
		}
		if kept, err := removeAt(dir, name, p, plan); err != nil {
			return false, fmt.Errorf("replacing it: %w", err)
		} else if kept {
			return false, nil // it holds a path made meanwhile that plan withholds
		}
	}
	return true, q.writeAt(dir, name, p, id)
}

// writeAt writes the tmpfs entry p as name in dir, where nothing of
// another kind is.
func (q *quotaFS) writeAt(dir int, name, p string, id entryID) error {
	switch {
	case id.mode.IsDir():
		if err := unix.Mkdirat(dir, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
		fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		// fchmod does not take an O_PATH fd; its /proc link names the
		// directory itself (as glibc's fchmodat(AT_SYMLINK_NOFOLLOW) does).
		return unix.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), uint32(id.mode.Perm()))
	case id.mode.Type() == fs.ModeSymlink:
		target, err := q.tmp.Readlink(p)
		if err != nil {
			return err
		}
		tmp := tempName()
		if err := unix.Symlinkat(target, dir, tmp); err != nil {
			return err
		}
		return renameAt(dir, tmp, name)
	case id.mode.IsRegular():
		tmp := tempName()
		if err := q.copyOut(p, dir, tmp); err != nil {
			_ = unix.Unlinkat(dir, tmp, 0)
			return err
		}
		return renameAt(dir, tmp, name)
	}
	return nil // fifos, sockets: not kept
}

// copyOut copies the tmpfs file p, with its permissions and modification
// time, to the new file name in dir.
func (q *quotaFS) copyOut(p string, dir int, name string) error {
	in, err := q.tmp.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	out := os.NewFile(uintptr(fd), name)
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Chmod(info.Mode().Perm())
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		t := unix.NsecToTimespec(info.ModTime().UnixNano())
		err = unix.UtimesNanoAt(dir, name, []unix.Timespec{t, t}, unix.AT_SYMLINK_NOFOLLOW)
	}
	return err
}

// renameAt renames tmp over name in dir, and removes tmp if it cannot.
func renameAt(dir int, tmp, name string) error {
	if err := unix.Renameat(dir, tmp, dir, name); err != nil {
		_ = unix.Unlinkat(dir, tmp, 0)
		return err
	}
	return nil
}

// fileType is the fs.FileMode type bits of a stat mode.
func fileType(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFREG:
		return 0
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}

var tempSeq atomic.Uint64

// tempPrefix starts the name of every temporary file of a write-back.
const tempPrefix = ".airlock-write-"

// staleWrite reports whether name is a write-back's temporary file whose
// worker process is gone.
func staleWrite(name string) bool {
	rest, ok := strings.CutPrefix(name, tempPrefix)
	if !ok {
		return false
	}
	pidText, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return false
	}
	return pid != os.Getpid() && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// tempName is a fresh name, in the directory of the entry it is renamed
// over, for a write.
func tempName() string {
	return fmt.Sprintf("%s%d-%d", tempPrefix, os.Getpid(), tempSeq.Add(1))
}

// mib renders a size in MiB.
func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
