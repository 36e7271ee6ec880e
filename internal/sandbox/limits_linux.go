//go:build linux

package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// rlimits are the resource limits applied to the sandbox's first process
// (and inherited by everything it starts).
type rlimits struct {
	nproc uint64 // RLIMIT_NPROC
	fsize uint64 // RLIMIT_FSIZE, bytes
	cpu   uint64 // RLIMIT_CPU, seconds (soft; hard is one more)
	data  uint64 // RLIMIT_DATA, bytes: heap and private writable mappings
}

// apply sets the limits on pid with prlimit(2). The sandbox's first
// process is blocked in bwrap (--block-fd) while this runs, before it
// forks the command, so nothing escapes the limits.
func (l rlimits) apply(pid int) error {
	set := func(res int, soft, hard uint64) error {
		if err := unix.Prlimit(pid, res, &unix.Rlimit{Cur: soft, Max: hard}, nil); err != nil {
			return fmt.Errorf("prlimit %d: %w", res, err)
		}
		return nil
	}
	if err := set(unix.RLIMIT_NPROC, l.nproc, l.nproc); err != nil {
		return err
	}
	if err := set(unix.RLIMIT_FSIZE, l.fsize, l.fsize); err != nil {
		return err
	}
	if err := set(unix.RLIMIT_CPU, l.cpu, l.cpu+1); err != nil {
		return err
	}
	if err := set(unix.RLIMIT_DATA, l.data, l.data); err != nil {
		return err
	}
	return set(unix.RLIMIT_CORE, 0, 0)
}

// pidsBase is the directory under which per-run pids cgroups are made, or
// "" when no writable pids controller exists.
type pidsBase struct {
	dir string
	v2  bool
	// v1Mount is the cgroup v1 pids hierarchy's mount (v1 only).
	v1Mount cgroupMount
}

var detectPids = sync.OnceValue(func() pidsBase {
	b, _ := findPidsCgroup()
	if b.dir != "" {
		removeStaleCgroups(b.dir)
	}
	return b
})

// removeStaleCgroups kills what is left in the run groups of worker
// processes that are gone and deletes the groups. A worker SIGKILLed in the
// moment between bwrap's clone and the release of the sandbox leaves the
// sandbox's init blocked there (it never runs the command, and it has no
// parent-death signal yet); this is where it ends.
func removeStaleCgroups(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		var pid, seq int
		if !e.IsDir() {
			continue
		}
		if n, _ := fmt.Sscanf(e.Name(), "run-%d-%d", &pid, &seq); n != 2 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			(&runCgroup{dir: filepath.Join(base, e.Name())}).remove()
		}
	}
}

var cgroupSeq atomic.Uint64

// findPidsCgroup locates a pids controller this process may create child
// groups in: cgroup v2 (when pids can be enabled below this process's
// group) or a v1 pids hierarchy.
func findPidsCgroup() (pidsBase, error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return pidsBase{}, err
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return pidsBase{}, err
	}
	var v1Path, v2Path string
	for _, line := range strings.Split(strings.TrimSpace(string(self)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2Path = parts[2]
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			if ctl == "pids" {
				v1Path = parts[2]
			}
		}
	}
	for _, m := range mounts {
		if m.fstype != "cgroup2" || v2Path == "" {
			continue
		}
		dir := filepath.Join(m.point, strings.TrimPrefix(v2Path, m.root))
		ctl, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
		if err != nil || !hasWord(string(ctl), "pids") {
			continue
		}
		base := filepath.Join(dir, "airlock-sandbox")
		if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			continue
		}
		// Enable pids for the children of base (base itself holds no
		// process, so this is allowed); base's parent must have it on.
		_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+pids"), 0)
		if err := os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte("+pids"), 0); err != nil {
			continue
		}
		return pidsBase{dir: base, v2: true}, nil
	}
	for _, m := range mounts {
		if m.fstype != "cgroup" || !hasWord(strings.ReplaceAll(m.opts, ",", " "), "pids") || v1Path == "" {
			continue
		}
		dir := filepath.Join(m.point, strings.TrimPrefix(v1Path, m.root))
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
			dir = m.point
		}
		base := filepath.Join(dir, "airlock-sandbox")
		if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			continue
		}
		if unix.Access(base, unix.W_OK) != nil {
			continue
		}
		return pidsBase{dir: base, v1Mount: m}, nil
	}
	return pidsBase{}, errors.New("no writable pids cgroup")
}

type cgroupMount struct {
	root, point, fstype, opts string
}

// cgroupMounts lists cgroup and cgroup2 mounts from /proc/self/mountinfo.
func cgroupMounts() ([]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []cgroupMount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root point opts [optional...] - fstype source superopts
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+3 > len(fields) {
			continue
		}
		fstype := fields[sep+1]
		if fstype != "cgroup" && fstype != "cgroup2" {
			continue
		}
		out = append(out, cgroupMount{root: fields[3], point: unescapeMount(fields[4]), fstype: fstype, opts: fields[sep+3]})
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// runCgroup is the pids cgroup of one run.
type runCgroup struct {
	dir string
	v2  bool
	// v1Mount is the cgroup v1 pids hierarchy's mount (v1 only).
	v1Mount cgroupMount
}

// newRunCgroup makes a pids cgroup limited to maxProcs tasks, or returns
// nil when there is no writable pids controller.
func newRunCgroup(maxProcs int) (*runCgroup, error) {
	base := detectPids()
	if base.dir == "" {
		return nil, nil
	}
	dir := filepath.Join(base.dir, fmt.Sprintf("run-%d-%d", os.Getpid(), cgroupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: pids cgroup: %w", err)
	}
	g := &runCgroup{dir: dir, v2: base.v2, v1Mount: base.v1Mount}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(maxProcs)), 0); err != nil {
		g.remove()
		return nil, fmt.Errorf("sandbox: pids cgroup limit: %w", err)
	}
	return g, nil
}

// add moves pid into the group.
func (g *runCgroup) add(pid int) error {
	if err := os.WriteFile(filepath.Join(g.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("sandbox: join pids cgroup: %w", err)
	}
	return nil
}

// startInside runs start (which starts a process) on a thread of its own
// that is in the group meanwhile, so that the process starts in the group
// (cgroup v1 has no CLONE_INTO_CGROUP). Moving the calling thread itself
// ("0" to the tasks file) spares the whole-process migration's wait for an
// RCU grace period (milliseconds; the kernel skips the global lock for a
// single thread moving itself). It reports false, without calling start,
// when the thread could not be moved in; start must then be run outside
// and the process moved in (add).
//
// The thread goes back to where it was before it is handed back to the
// runtime. Should that fail, it ends with its goroutine (a locked thread
// ends with it) and the process with it: Pdeathsig is sent when the thread
// that started a process ends.
func (g *runCgroup) startInside(start func() error) (bool, error) {
	if g.v2 || g.v1Mount.point == "" {
		return false, nil
	}
	type outcome struct {
		inside bool
		err    error
	}
	done := make(chan outcome, 1)
	go func() {
		runtime.LockOSThread()
		origin, err := g.threadCgroup()
		if err == nil {
			err = os.WriteFile(filepath.Join(g.dir, "tasks"), []byte("0"), 0)
		}
		if err != nil {
			runtime.UnlockOSThread()
			done <- outcome{}
			return
		}
		err = start()
		if back := os.WriteFile(filepath.Join(origin, "tasks"), []byte("0"), 0); back != nil {
			done <- outcome{inside: true, err: fmt.Errorf("sandbox: leaving the pids cgroup: %w", back)}
			return // still locked: the thread ends here, and what it started with it
		}
		runtime.UnlockOSThread()
		done <- outcome{inside: true, err: err}
	}()
	o := <-done
	return o.inside, o.err
}

// threadCgroup is the directory of the calling thread's pids cgroup (v1).
func (g *runCgroup) threadCgroup() (string, error) {
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !slices.Contains(strings.Split(parts[1], ","), "pids") {
			continue
		}
		rel, ok := strings.CutPrefix(parts[2], g.v1Mount.root)
		if !ok {
			break
		}
		dir := filepath.Join(g.v1Mount.point, rel)
		if unix.Access(filepath.Join(dir, "tasks"), unix.W_OK) != nil {
			break
		}
		return dir, nil
	}
	return "", errors.New("sandbox: this thread's pids cgroup is not reachable")
}

// pids lists the processes in the group.
func (g *runCgroup) pids() []int {
	b, err := os.ReadFile(filepath.Join(g.dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// has reports whether pid is in the group.
func (g *runCgroup) has(pid int) bool {
	for _, p := range g.pids() {
		if p == pid {
			return true
		}
	}
	return false
}

// signal SIGKILLs everything in the group once, without waiting for it to
// be gone, and reports how many processes it found there.
func (g *runCgroup) signal() int {
	if g.v2 {
		_ = os.WriteFile(filepath.Join(g.dir, "cgroup.kill"), []byte("1"), 0)
	}
	pids := g.pids()
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return len(pids)
}

// kill SIGKILLs everything in the group until it is empty (bounded).
func (g *runCgroup) kill() {
	// Right after a run the group usually empties within tens of
	// microseconds (its last tasks are still exiting): the first looks come
	// soon, then ever later, for about two seconds in all.
	wait, deadline := 25*time.Microsecond, time.Now().Add(2*time.Second)
	for g.signal() > 0 && time.Now().Before(deadline) {
		time.Sleep(wait)
		wait = min(2*wait, 10*time.Millisecond)
	}
}

// removeInBackground kills what is left and deletes the group, without
// the caller waiting (a stale group of a worker that exited first is
// removed at the next start, see removeStaleCgroups).
func (g *runCgroup) removeInBackground() { go g.remove() }

// remove kills what is left and deletes the group.
func (g *runCgroup) remove() {
	g.kill()
	for i := 0; i < 100; i++ {
		err := os.Remove(g.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
