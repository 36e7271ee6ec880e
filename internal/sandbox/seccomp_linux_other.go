//go:build linux && !amd64 && !arm64

package sandbox

// auditArch is zero: there is no seccomp filter for this architecture, and
// Run fails closed.
const auditArch = 0

// x32SyscallBit is unused here.
const x32SyscallBit = 0

// archDeniedSyscalls is empty here.
var archDeniedSyscalls = []uintptr{}
