//go:build linux && amd64

package sandbox

import "golang.org/x/sys/unix"

// auditArch is the seccomp architecture the filter accepts.
const auditArch = unix.AUDIT_ARCH_X86_64

// x32SyscallBit marks x32-ABI syscall numbers, refused outright.
const x32SyscallBit = 0x40000000

// archDeniedSyscalls are denied syscalls only this architecture has.
var archDeniedSyscalls = []uintptr{unix.SYS_IOPL, unix.SYS_IOPERM, unix.SYS_USELIB}
