package sandbox

import "time"

// Result is the outcome of one Run.
type Result struct {
	// ExitCode is the command's exit status; 128+N when a signal N ended
	// it (137 after the runner's SIGKILL on timeout or cancellation).
	ExitCode int
	// Stdout and Stderr hold the last MaxOutput bytes (50 KiB by default)
	// of each stream.
	Stdout, Stderr []byte
	// Truncated reports that either stream produced more than was kept.
	Truncated bool
	// Duration is the wall time from start to exit.
	Duration time.Duration
	// Error says why the command did not finish on its own ("timeout after
	// 2s", "cancelled", "disk quota exceeded: …"); empty otherwise.
	Error string
	// NotWrittenBack, with a disk quota, is what the command created,
	// changed or deleted that the write-back left as the workspace has it
	// because DenyPaths or ReadOnlyPaths cover it or a path under it
	// (relative to the workspace, the topmost of them, sorted). The run
	// itself succeeds.
	NotWrittenBack []string
}

// Bind is an extra host path made visible inside the sandbox, for example a
// linked worktree's common git directory.
type Bind struct {
	Source   string // absolute host path
	Dest     string // absolute path inside the sandbox
	Writable bool   // bind read-write (read-only otherwise)
}

// RunOptions tunes Run. The zero value is usable.
type RunOptions struct {
	// Bwrap is the bwrap binary; empty means BwrapPath().
	Bwrap string
	// Policy, when set, makes Run validate the request first (returning
	// the *Refusal as its error). Workers should set it: the workspace may
	// have changed since the request was validated at submit.
	Policy *Policy
	// DefaultTimeout applies when the request has none (default 10m).
	DefaultTimeout time.Duration
	// MaxOutput is how many bytes of each stream are kept (default 50 KiB).
	MaxOutput int
	// MaxProcs bounds the processes and threads of the sandbox (default
	// 256): RLIMIT_NPROC, plus a pids cgroup when one is writable.
	MaxProcs int
	// MaxFileSize bounds any file the command writes (RLIMIT_FSIZE,
	// default 1 GiB).
	MaxFileSize int64
	// CPUTime bounds each process's CPU time (RLIMIT_CPU, default the
	// timeout rounded up to seconds, plus one).
	CPUTime time.Duration
	// TmpSize bounds the private /tmp (a tmpfs, default 256 MiB).
	TmpSize int64
	// MaxMemory bounds each process's data memory: heap and private
	// writable mappings (RLIMIT_DATA, default 1 GiB). Per process, like
	// the other rlimits: with MaxProcs it bounds the sandbox's total.
	MaxMemory int64
	// AllowUnboundedProcs lets Run go ahead when the process count cannot
	// be bounded (a root worker without a writable pids cgroup: the kernel
	// does not apply RLIMIT_NPROC to uid 0). Off by default: Run fails
	// closed.
	AllowUnboundedProcs bool
	// DiskQuota, when positive, bounds the workspace while the command
	// runs: its files as they were plus everything the command writes, in
	// bytes. The command then works on a copy of the workspace in a tmpfs
	// of that size inside the sandbox; what it changed is written back when
	// it ends on its own within the quota, and dropped when it is killed
	// (timeout, cancellation, quota). Zero: the workspace is bound as is,
	// unbounded but by MaxFileSize per file.
	DiskQuota int64
	// InodeQuota bounds the files, directories and links of the workspace
	// while the command runs, with DiskQuota (default DefaultInodeQuota).
	InodeQuota int64
	// ExtraBinds are additional host paths to mount (read-only unless
	// Writable). The caller vouches for them.
	ExtraBinds []Bind
	// DenyPaths are deny_paths entries (internal/pathrule): what they
	// cover in the workspace is hidden from the command (an empty
	// directory, an empty file), hard links to it included. With a disk
	// quota nothing they cover is written back, also a path the command
	// created (a new .env).
	DenyPaths []string
	// ReadOnlyPaths are read_only_paths entries: what they cover in the
	// workspace is bound read-only (with a disk quota: never written
	// back, also a path the command created, a new sub/.git/hooks/x).
	// Without a disk quota the workspace itself is bound read-write and
	// the read-only binds cover only what exists before the run: a
	// command can create a covered path that did not. Workers always run
	// with a quota.
	ReadOnlyPaths []string
}

// Defaults used when RunOptions leaves a field zero.
const (
	// DefaultRunTimeout bounds a request that has no timeout.
	DefaultRunTimeout = 10 * time.Minute
	// DefaultMaxOutput is how much of each stream is kept: 50 KiB.
	DefaultMaxOutput = 50 << 10
	// DefaultMaxProcs bounds the sandbox's processes and threads.
	DefaultMaxProcs = 256
	// DefaultMaxFileSize bounds every file written: 1 GiB.
	DefaultMaxFileSize = 1 << 30
	// DefaultTmpSize bounds the private /tmp: 256 MiB.
	DefaultTmpSize = 256 << 20
	// DefaultMaxMemory bounds each process's data memory: 1 GiB.
	DefaultMaxMemory = 1 << 30
	// DefaultInodeQuota bounds a quota'd workspace's entries.
	DefaultInodeQuota = 100000
)
