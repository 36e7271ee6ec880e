//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/airlockhq/airlock/internal/ringbuf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// setupTimeout bounds bwrap's own setup (until it reports the sandbox pid).
const setupTimeout = 30 * time.Second

// testHookSetup, when set by a test, runs while the sandbox waits to be
// released; an error aborts the run there.
var testHookSetup func(childPid int) error

// Run executes req inside bubblewrap and returns its result. It fails
// closed: when bwrap is missing, cannot set the sandbox up, or the limits
// cannot be applied, it returns an error and the command does not run. A
// command that runs and fails is not an error: see Result.ExitCode and
// Result.Error. Run does not validate the request unless opts.Policy is
// set; callers validate first.
//
// Limits: the sandbox's first process waits in bwrap (--block-fd) until
// Run has set RLIMIT_NPROC, RLIMIT_FSIZE, RLIMIT_CPU, RLIMIT_DATA and
// RLIMIT_CORE=0 on it with prlimit(2) and, when a writable pids cgroup exists, moved it into a
// per-run group with pids.max; only then does it fork the command, which
// inherits all of it. The kernel never applies RLIMIT_NPROC to uid 0, so a
// root worker needs the pids cgroup (Run refuses to start without one
// unless opts.AllowUnboundedProcs).
//
// Lifetime: bwrap runs in its own process group (Setpgid) with
// Pdeathsig=SIGKILL; on timeout or cancellation the group gets SIGKILL,
// bwrap's --die-with-parent then kills the sandbox's init, and the kernel
// kills everything else in its PID namespace; the pids cgroup is swept as
// well. When the command exits on its own, its PID namespace dies with it,
// so a daemonised grandchild never outlives the run.
func Run(ctx context.Context, req ExecRequest, opts RunOptions) (Result, error) {
	if opts.Policy != nil {
		if err := Validate(req, *opts.Policy); err != nil {
			return Result{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	o := withDefaults(opts)
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = o.DefaultTimeout
	}
	cpu := o.CPUTime
	if cpu <= 0 {
		cpu = timeout + time.Second
	}
	if len(req.Argv) == 0 {
		return Result{}, errors.New("sandbox: empty command")
	}

	bwrap := o.Bwrap
	if bwrap == "" {
		p, err := BwrapPath()
		if err != nil {
			return Result{}, err
		}
		bwrap = p
	}
	feats, err := features(bwrap)
	if err != nil {
		return Result{}, err
	}
	if req.Workspace == "" {
		return Result{}, errors.New("sandbox: the request has no workspace")
	}
	c, err := newChecker(req.Workspace, req.Dir)
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: %w", err)
	}
	for _, b := range o.ExtraBinds {
		if !strings.HasPrefix(b.Source, "/") || !strings.HasPrefix(b.Dest, "/") {
			return Result{}, fmt.Errorf("sandbox: extra bind %q -> %q must use absolute paths", b.Source, b.Dest)
		}
	}
	// Git overrides: the runtime blanks (GIT_CONFIG_COUNT, for every
	// repository git opens) the drivers of every repository the command's
	// git invocations may start in, as the sandbox will show them.
	scope := gitScope{root: c.root}
	if o.Policy != nil {
		for _, d := range o.Policy.GitDirs {
			if real, err := filepath.EvalSymlinks(d); err == nil {
				scope.trust(real)
			}
		}
	}
	for _, b := range o.ExtraBinds {
		if real, err := filepath.EvalSymlinks(b.Source); err == nil {
			scope.mount(b.Dest, real)
		}
	}
	gitExtra, err := gitDriverOverrides(scope, gitStartDirs(c, req.Argv))
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: cannot read the repository's git config: %w", err)
	}
	prog, err := seccompProgram(req.Network)
	if err != nil {
		return Result{}, err
	}

	cg, err := newRunCgroup(o.MaxProcs)
	if err != nil {
		return Result{}, err
	}
	if cg != nil {
		// The group empties a little after the run (its tasks are still
		// exiting when bwrap has been reaped); waiting for that is not the
		// caller's business, and nothing in it runs any more.
		defer cg.removeInBackground()
	} else if os.Getuid() == 0 && !o.AllowUnboundedProcs {
		return Result{}, errors.New("sandbox: running as root without a writable pids cgroup: the process count cannot be bounded (RLIMIT_NPROC does not apply to uid 0); refusing to run")
	}

	plan, err := planPaths(c.root, o.DenyPaths, o.ReadOnlyPaths)
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: %w", err)
	}
	var pathArgs []string
	if o.DiskQuota <= 0 {
		pathArgs = plan.mountArgs(c.root)
	}
	var quota *quotaSpec
	if o.DiskQuota > 0 {
		if !feats.tmpfsSize {
			return Result{}, fmt.Errorf("sandbox: %s lacks --size, needed for the disk quota; a newer bubblewrap is needed", bwrap)
		}
		for _, b := range o.ExtraBinds {
			if d := filepath.Clean(b.Dest); d == SandboxWorkspace || strings.HasPrefix(d, SandboxWorkspace+"/") {
				// It would be mounted over the copy, and the copy and the
				// write-back would go through it to the host.
				return Result{}, fmt.Errorf("sandbox: extra bind %q is inside %s, which a disk quota replaces", b.Dest, SandboxWorkspace)
			}
		}
		quota = &quotaSpec{root: c.root, size: o.DiskQuota, inodes: o.InodeQuota, paths: plan}
	}
	args := bwrapArgs(bwrapSpec{
		quota:     o.DiskQuota,
		workspace: c.root,
		chdir:     SandboxWorkspace + strings.TrimPrefix(c.cwd, c.root),
		network:   req.Network,
		tmpSize:   o.TmpSize,
		env:       sandboxEnv(req, o.Policy, gitExtra),
		binds:     o.ExtraBinds,
		paths:     pathArgs,
		argv:      req.Argv,
		features:  feats,
	})
	limits := rlimits{
		nproc: uint64(o.MaxProcs),
		fsize: uint64(o.MaxFileSize),
		cpu:   uint64((cpu + time.Second - 1) / time.Second),
		data:  uint64(o.MaxMemory),
	}
	return execute(ctx, bwrap, args, prog, limits, cg, quota, timeout, o.MaxOutput)
}

// withDefaults fills zero fields of opts.
func withDefaults(o RunOptions) RunOptions {
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = DefaultRunTimeout
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	if o.MaxProcs <= 0 {
		o.MaxProcs = DefaultMaxProcs
	}
	if o.MaxFileSize <= 0 {
		o.MaxFileSize = DefaultMaxFileSize
	}
	if o.TmpSize <= 0 {
		o.TmpSize = DefaultTmpSize
	}
	if o.MaxMemory <= 0 {
		o.MaxMemory = DefaultMaxMemory
	}
	if o.InodeQuota <= 0 {
		o.InodeQuota = DefaultInodeQuota
	}
	return o
}

// dataPipe returns the read end of a pipe that holds data and EOF.
func dataPipe(data []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	if len(data) > 32<<10 {
		r.Close()
		w.Close()
		return nil, errors.New("sandbox: pipe payload too large")
	}
	_, err = w.Write(data)
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// closeAll closes files, ignoring nils.
func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// execute starts bwrap, applies the limits while the sandbox waits on the
// block fd, releases it and supervises the run.
func execute(ctx context.Context, bwrap string, args []string, seccomp []byte, limits rlimits, cg *runCgroup, quota *quotaSpec, timeout time.Duration, maxOutput int) (Result, error) {
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return Result{}, err
	}
	blockR, blockW, err := os.Pipe()
	if err != nil {
		closeAll(infoR, infoW)
		return Result{}, err
	}
	seccompR, err := dataPipe(seccomp)
	if err != nil {
		closeAll(infoR, infoW, blockR, blockW)
		return Result{}, err
	}
	passwdR, err := dataPipe([]byte(sandboxPasswd))
	if err != nil {
		closeAll(infoR, infoW, blockR, blockW, seccompR)
		return Result{}, err
	}
	groupR, err := dataPipe([]byte(sandboxGroup))
	if err != nil {
		closeAll(infoR, infoW, blockR, blockW, seccompR, passwdR)
		return Result{}, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(infoR, infoW, blockR, blockW, seccompR, passwdR, groupR)
		return Result{}, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(infoR, infoW, blockR, blockW, seccompR, passwdR, groupR, outR, outW)
		return Result{}, err
	}
	childEnds := []*os.File{infoW, blockR, seccompR, passwdR, groupR, outW, errW}

	newCmd := func() *exec.Cmd {
		return &exec.Cmd{
			Path:   bwrap,
			Args:   append([]string{"bwrap"}, args...),
			Env:    []string{}, // bwrap itself gets nothing from the worker
			Stdout: outW,
			Stderr: errW,
			// ExtraFiles[i] becomes fd 3+i; see fdInfo … fdHold.
			ExtraFiles:  []*os.File{infoW, blockR, seccompR, passwdR, groupR, blockW},
			SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
		}
	}
	// With cgroup v2, bwrap is created inside the run's pids cgroup
	// (clone3 with CLONE_INTO_CGROUP) and everything it starts inherits
	// it; there is nothing to migrate later.
	cmd := newCmd()
	inCgroup := false
	var cgFD *os.File
	if cg != nil && cg.v2 {
		if f, err := os.Open(cg.dir); err == nil {
			cgFD = f
			cmd.SysProcAttr.UseCgroupFD = true
			cmd.SysProcAttr.CgroupFD = int(f.Fd())
			inCgroup = true
		}
	}
	start := time.Now()
	if cg != nil && !inCgroup {
		// cgroup v1: bwrap is started from a thread that is in the group.
		if inCgroup, err = cg.startInside(cmd.Start); !inCgroup {
			err = cmd.Start()
		}
	} else {
		err = cmd.Start()
		if err != nil && inCgroup {
			cmd, inCgroup = newCmd(), false // a kernel without CLONE_INTO_CGROUP
			err = cmd.Start()
		}
	}
	if cgFD != nil {
		cgFD.Close()
	}
	if err != nil && cmd.Process != nil { // started, but its thread could not leave the group
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}
	if err != nil {
		closeAll(childEnds...)
		closeAll(infoR, blockW, outR, errR)
		return Result{}, fmt.Errorf("sandbox: start bwrap: %w", err)
	}
	closeAll(childEnds...)
	pgid := cmd.Process.Pid
	// Otherwise move bwrap itself into the cgroup at once: the migration
	// (slow on cgroup v1: an RCU grace period) overlaps bwrap's start-up,
	// and a clone that starts meanwhile waits for it, so the sandbox
	// usually lands in the cgroup by itself. It is checked below.
	var early chan error
	if cg != nil && !inCgroup {
		early = make(chan error, 1)
		go func() { early <- cg.add(pgid) }()
	}
	killGroup := func() {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		if cg != nil {
			cg.signal()
		}
	}

	stdout, stderr := ringbuf.New(maxOutput), ringbuf.New(maxOutput)
	readersDone := make(chan struct{}, 2)
	pump := func(r *os.File, rb *ringbuf.Buffer) {
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				rb.Write(buf[:n])
			}
			if err != nil {
				break
			}
		}
		readersDone <- struct{}{}
	}
	go pump(outR, stdout)
	go pump(errR, stderr)

	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()

	// finish waits for the readers (bounded: everything holding the pipes
	// is dead by now) and closes our ends.
	finish := func() {
		deadline := time.After(2 * time.Second)
		for i := 0; i < 2; i++ {
			select {
			case <-readersDone:
			case <-deadline:
				closeAll(outR, errR)
				<-readersDone
			}
		}
		closeAll(outR, errR)
	}
	childPid := 0
	// abort kills the sandbox before it ran anything and reports why. The
	// sandbox's first process holds a write end of its own block pipe
	// (--sync-fd), so it never sees EOF there: without our byte it stays
	// blocked until it is killed.
	abort := func(cause error) (Result, error) {
		if childPid > 0 {
			_ = syscall.Kill(childPid, syscall.SIGKILL)
		}
		killGroup()
		<-waitErr
		blockW.Close()
		finish()
		if msg := bwrapMessage(stderr); msg != "" {
			return Result{}, fmt.Errorf("sandbox: %v: %s", cause, msg)
		}
		return Result{}, fmt.Errorf("sandbox: %w", cause)
	}

	// 1. bwrap reports the sandbox's first process once it is cloned.
	childPid, err = readChildPid(ctx, infoR, setupTimeout)
	infoR.Close()
	if err != nil {
		return abort(fmt.Errorf("bwrap did not start the sandbox: %w", err))
	}
	if testHookSetup != nil {
		if err := testHookSetup(childPid); err != nil {
			return abort(err)
		}
	}
	// 2. Limits, while that process waits on the block fd.
	if err := limits.apply(childPid); err != nil {
		return abort(fmt.Errorf("cannot apply limits: %w", err))
	}
	if early != nil {
		<-early
		if !cg.has(childPid) {
			if err := cg.add(childPid); err != nil {
				return abort(err)
			}
		}
	}
	if cg != nil && !cg.has(childPid) {
		return abort(errors.New("the sandbox is not in its pids cgroup"))
	}
	// 2b. The workspace copied into its quota tmpfs.
	var q *quotaFS
	if quota != nil {
		if q, err = openQuota(ctx, childPid, *quota); err != nil {
			return abort(err)
		}
		defer q.close()
	}
	// 3. Release it.
	if _, err := blockW.Write([]byte{1}); err != nil {
		return abort(fmt.Errorf("bwrap exited during setup: %w", err))
	}
	blockW.Close()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	overQuota := make(chan string, 1)
	stopWatch := func() {}
	if q != nil {
		watchDone, watchExited := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(watchExited)
			q.watch(watchDone, func(why string) { overQuota <- why })
		}()
		stopWatch = func() { close(watchDone); <-watchExited }
	}
	var werr error
	killedFor := ""
	select {
	case werr = <-waitErr:
	case why := <-overQuota:
		killedFor = why
		killGroup()
		werr = <-waitErr
	case <-timer.C:
		killedFor = fmt.Sprintf("timeout after %s", timeout)
		killGroup()
		werr = <-waitErr
	case <-ctx.Done():
		killedFor = "cancelled"
		killGroup()
		werr = <-waitErr
	}
	dur := time.Since(start)
	stopWatch()
	killGroup() // anything left in the group or the cgroup
	finish()

	res := Result{
		Stdout:    stdout.Text(), // never half a character at the cut
		Stderr:    stderr.Text(),
		Truncated: stdout.Truncated() || stderr.Truncated(),
		Duration:  dur,
	}
	var exitErr *exec.ExitError
	switch {
	case werr == nil:
		res.ExitCode = 0
	case errors.As(werr, &exitErr):
		res.ExitCode = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal())
		}
	default:
		return res, fmt.Errorf("sandbox: wait: %w", werr)
	}
	if killedFor != "" {
		// Nothing a killed command wrote is kept: with a quota it all
		// goes with the tmpfs.
		res.Error = killedFor
		res.ExitCode = 128 + int(syscall.SIGKILL)
		return res, nil
	}
	if msg := bwrapMessage(stderr); msg != "" && res.ExitCode == 1 {
		// bwrap failed before or instead of exec (bad working directory,
		// seccomp, missing program): nothing ran.
		res.Error = msg
		return res, fmt.Errorf("sandbox: bwrap: %s", msg)
	}
	if q != nil {
		why := q.check()
		if why == "" && res.ExitCode != 0 && bytes.Contains(stderr.Bytes(), []byte("No space left on device")) {
			// It hit the quota (ENOSPC), cleaned up and ended between two
			// looks of the watchdog.
			why = q.exceededMessage()
		}
		if why != "" {
			res.Error = why
			if res.ExitCode == 0 {
				res.ExitCode = 1
			}
			return res, nil
		}
		if res.NotWrittenBack, err = q.writeBack(); err != nil {
			return res, fmt.Errorf("sandbox: writing the workspace back: %w", err)
		}
	}
	return res, nil
}

// bwrapMessage returns bwrap's own error message when stderr is nothing
// but one ("bwrap: …"), else "".
func bwrapMessage(stderr *ringbuf.Buffer) string {
	if stderr.Total() > 4096 {
		return ""
	}
	b := bytes.TrimSpace(stderr.Bytes())
	if !bytes.HasPrefix(b, []byte("bwrap: ")) || bytes.Count(b, []byte("\n")) > 2 {
		return ""
	}
	return string(b)
}

// readChildPid reads bwrap's --info-fd JSON ({"child-pid": N}).
func readChildPid(ctx context.Context, r *os.File, limit time.Duration) (int, error) {
	type result struct {
		data []byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(r, 4096))
		ch <- result{b, err}
	}()
	var res result
	select {
	case res = <-ch:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(limit):
		return 0, errors.New("timed out")
	}
	if res.err != nil {
		return 0, res.err
	}
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	if len(bytes.TrimSpace(res.data)) == 0 {
		return 0, errors.New("no sandbox pid reported")
	}
	if err := json.Unmarshal(res.data, &info); err != nil || info.ChildPid <= 0 {
		return 0, fmt.Errorf("bad info from bwrap: %q", res.data)
	}
	return info.ChildPid, nil
}

// Available reports whether sandboxed runs work on this host: bwrap is
// installed, can create the namespaces, and the limits can be applied. It
// runs `true` in a throwaway workspace, with and without a disk quota.
func Available() error {
	dir, err := os.MkdirTemp("", "airlock-sandbox-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, quota := range []int64{0, 1 << 20} {
		res, err := Run(ctx, ExecRequest{Argv: []string{"true"}, Workspace: dir, Timeout: 20 * time.Second}, RunOptions{DiskQuota: quota})
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("sandbox: probe exited %d: %s %s", res.ExitCode, res.Error, bytes.TrimSpace(res.Stderr))
		}
	}
	return nil
}
