// Package sandbox checks and runs the built-in exec tool: a command line an
// agent asks to run in a workspace on a worker host.
//
// Two layers, both required:
//
//   - Validate (pure: no I/O beyond resolving paths inside the workspace and
//     reading a repository's git config) decides whether a request may run at
//     all. Argv only: a program must be on the Policy's allowlist, and its
//     validator checks every flag against an explicit list (unknown flags are
//     refused) and confines every path-looking argument to the workspace,
//     resolving "..", absolute paths, symlinks and hard links. A shell runs
//     only when the policy allows the sh program, and then "sh -c SCRIPT" is
//     parsed with mvdan.cc/sh and every simple command in it goes through the
//     same validators; expansions, substitutions, functions, background jobs,
//     wrappers and redirections outside the workspace are refused. The server
//     runs Validate at submit time; a *Refusal's Reason is safe to show the
//     client. Workers should validate again right before Run, since the
//     workspace may have changed in between.
//
//   - Run executes a request inside bubblewrap: read-only system
//     directories, the workspace read-write at /workspace, a private /tmp,
//     every namespace unshared (the network only shared when the request
//     asks for it), no capabilities, a seccomp filter, a cleared environment,
//     resource limits (processes, file size, CPU time), its own process group
//     killed on timeout or cancellation, and output bounded while it is read
//     (the last 50 KiB of each stream). Run fails closed: when bwrap is
//     missing or cannot set the sandbox up, it returns an error and runs
//     nothing; it never falls back to running outside the sandbox.
//
// # Limits
//
// bwrap is told to wait (--block-fd) after it has built the sandbox and
// before it forks the command; meanwhile Run sets RLIMIT_NPROC,
// RLIMIT_FSIZE, RLIMIT_CPU and RLIMIT_CORE=0 on the sandbox's first process
// with prlimit(2) and puts it in a per-run pids cgroup (pids.max) when one
// is writable (cgroup v2: bwrap is created inside it with
// CLONE_INTO_CGROUP; v1: a migration that overlaps bwrap's start-up). The
// command inherits all of it. The kernel does not apply RLIMIT_NPROC to uid
// 0, so a root worker without a writable pids cgroup cannot bound the
// process count and Run refuses (RunOptions.AllowUnboundedProcs overrides).
// A seccomp filter (--seccomp) refuses ptrace, mount and namespace calls,
// kexec, modules, bpf, perf, keyrings, userfaultfd, io_uring and file
// handles, and, when the network is shared, AF_UNIX sockets.
//
// # Disk quota
//
// With RunOptions.DiskQuota the command works on a copy of the workspace
// in a tmpfs of the quota's size (bwrap --size --tmpfs /workspace), filled
// by Run through /proc/PID/root while the sandbox waits on its block fd.
// Writes beyond the size fail with ENOSPC, a watchdog stops the command
// when the tmpfs is full or holds more than RunOptions.InodeQuota entries,
// and nothing reaches the host's disk. A command that ends on its own
// within the quota has its changes written back (one directory at a time,
// never through a symlink: never outside the workspace, and a directory
// another run turned into a symlink meanwhile fails the write-back); a
// killed one has nothing written back. See quota_linux.go.
//
// What only the sandbox can stop (a program that misbehaves within its
// allowed flags, a planted repository hook, a fork bomb through an allowed
// shell) shows in the Result. The attack suite (attack_test.go) pushes
// hostile requests through both layers.
//
// # Git
//
// git is allowed with a read-mostly subcommand list and no -c, --exec-path,
// --git-dir, --work-tree, --config-env or pager options. Inside the sandbox
// every git invocation (also one started from an allowed sh script) gets its
// configuration from the environment (GIT_CONFIG_COUNT, which outranks the
// repository's own config): hooks off (core.hooksPath=/dev/null),
// core.fsmonitor=false, pager, editor, askpass, ssh command, credential
// helpers and signing programs neutralised, and no system or global config.
// Validate refuses a repository whose config (including linked worktrees and
// submodules) names a program git could run — filter, diff and merge
// drivers, includes, remote helpers, trace2 targets; Run additionally blanks
// every filter, diff and merge driver it finds, so a driver planted between
// validation and the run fails instead of running.
package sandbox
