//go:build linux && arm64

package sandbox

import "golang.org/x/sys/unix"

// auditArch is the seccomp architecture the filter accepts.
const auditArch = unix.AUDIT_ARCH_AARCH64

// x32SyscallBit is unused on arm64.
const x32SyscallBit = 0

// archDeniedSyscalls are denied syscalls only this architecture has.
var archDeniedSyscalls = []uintptr{}
