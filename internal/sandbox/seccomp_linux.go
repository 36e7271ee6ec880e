//go:build linux

package sandbox

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// Classic BPF opcodes and seccomp return values.
const (
	bpfLdWAbs = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeqK   = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfJgeK   = 0x35 // BPF_JMP | BPF_JGE | BPF_K
	bpfJsetK  = 0x45 // BPF_JMP | BPF_JSET | BPF_K
	bpfRetK   = 0x06 // BPF_RET | BPF_K

	seccompRetKillProcess = 0x80000000
	seccompRetErrno       = 0x00050000
	seccompRetAllow       = 0x7fff0000

	seccompDataNr   = 0
	seccompDataArch = 4
	seccompDataArg0 = 16 // low 32 bits of args[0] on little-endian
)

// cloneNamespaceFlags are the clone(2) flags that create namespaces.
const cloneNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// deniedSyscalls fail with EPERM inside the sandbox: confinement-escape and
// kernel-attack-surface primitives no allowed command needs (tracing other
// processes, mounts, namespaces, modules, kexec, bpf, perf, keyrings,
// userfaultfd, io_uring, file handles). Capabilities are dropped anyway;
// this is the second layer.
var deniedSyscalls = append([]uintptr{
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT,
	unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK,
	unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE, unix.SYS_MOUNT_SETATTR,
	unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_REBOOT, unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_ACCT, unix.SYS_QUOTACTL, unix.SYS_VHANGUP,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
	unix.SYS_SYSLOG, unix.SYS_LOOKUP_DCOOKIE, unix.SYS_NFSSERVCTL,
}, archDeniedSyscalls...)

// bpfInsn is one classic BPF instruction.
type bpfInsn struct {
	code   uint16
	jt, jf uint8
	k      uint32
	target string // label jt jumps to, resolved by assemble
}

// seccompProgram builds the filter bwrap loads before exec (--seccomp):
// a foreign architecture is killed; on x86-64 the x32 ABI is refused; the
// denied syscalls fail with EPERM; clone with namespace flags fails with
// EPERM and clone3 with ENOSYS (so libc falls back to clone, whose flags
// the filter can see); with noUnixSockets, socket(AF_UNIX, …) fails too, so
// a shared network namespace does not reach local daemons.
func seccompProgram(noUnixSockets bool) ([]byte, error) {
	if auditArch == 0 {
		return nil, fmt.Errorf("sandbox: no seccomp filter for this architecture")
	}
	var p []bpfInsn
	emit := func(code uint16, k uint32, target string) {
		p = append(p, bpfInsn{code: code, k: k, target: target})
	}
	label := map[string]int{}
	mark := func(name string) { label[name] = len(p) }

	emit(bpfLdWAbs, seccompDataArch, "")
	emit(bpfJeqK, auditArch, "arch_ok")
	emit(bpfRetK, seccompRetKillProcess, "")
	mark("arch_ok")
	emit(bpfLdWAbs, seccompDataNr, "")
	if x32SyscallBit != 0 {
		emit(bpfJgeK, x32SyscallBit, "eperm")
	}
	for _, nr := range deniedSyscalls {
		emit(bpfJeqK, uint32(nr), "eperm")
	}
	emit(bpfJeqK, uint32(unix.SYS_CLONE3), "enosys")
	emit(bpfJeqK, uint32(unix.SYS_CLONE), "clone")
	if noUnixSockets {
		emit(bpfJeqK, uint32(unix.SYS_SOCKET), "socket")
	}
	emit(bpfRetK, seccompRetAllow, "")
	mark("clone")
	emit(bpfLdWAbs, seccompDataArg0, "")
	emit(bpfJsetK, cloneNamespaceFlags, "eperm")
	emit(bpfRetK, seccompRetAllow, "")
	if noUnixSockets {
		mark("socket")
		emit(bpfLdWAbs, seccompDataArg0, "")
		emit(bpfJeqK, unix.AF_UNIX, "eperm")
		emit(bpfRetK, seccompRetAllow, "")
	}
	mark("eperm")
	emit(bpfRetK, seccompRetErrno|uint32(unix.EPERM), "")
	mark("enosys")
	emit(bpfRetK, seccompRetErrno|uint32(unix.ENOSYS), "")

	out := make([]byte, 0, 8*len(p))
	for i, ins := range p {
		if ins.target != "" {
			t, ok := label[ins.target]
			off := t - (i + 1)
			if !ok || off < 0 || off > 255 {
				return nil, fmt.Errorf("sandbox: seccomp jump to %s out of range", ins.target)
			}
			ins.jt = uint8(off)
		}
		out = binary.NativeEndian.AppendUint16(out, ins.code)
		out = append(out, ins.jt, ins.jf)
		out = binary.NativeEndian.AppendUint32(out, ins.k)
	}
	return out, nil
}
