//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// ServerSpec is a long-running stdio server to run in bubblewrap: an MCP
// server that `airlock mcp proxy` launches for a registration with
// sandbox: true.
type ServerSpec struct {
	// Argv is the command line; Argv[0] is an absolute path visible in
	// the sandbox (under /usr, or under one of ReadOnlyPaths).
	Argv []string
	// Env is the server's whole environment, NAME=value (nothing else
	// is inherited).
	Env []string
	// ReadOnlyPaths are host paths bound read-only at the same place.
	ReadOnlyPaths []string
	// Network shares the host's network; otherwise the server has only
	// a loopback of its own.
	Network bool
	// TmpBytes bounds the private /tmp (0: 64 MiB).
	TmpBytes int64
}

// ServerCommand returns the bwrap command that runs spec: every namespace
// unshared (the network too unless spec.Network), no capabilities, the
// exec sandbox's seccomp filter (no ptrace, mounts, namespaces, io_uring,
// keyrings, bpf…; with spec.Network no AF_UNIX sockets either, so the
// host's abstract sockets stay out of reach), the system directories
// read-only, no home directory and nothing of the host but ReadOnlyPaths
// (read-only), a private size-bounded /tmp as working directory and HOME,
// and exactly spec.Env. The caller wires its stdio and starts it, then
// closes cmd.ExtraFiles (the filter's pipe, which bwrap has its own copy
// of); the server dies with the caller.
func ServerCommand(ctx context.Context, spec ServerSpec) (*exec.Cmd, error) {
	if len(spec.Argv) == 0 || !filepath.IsAbs(spec.Argv[0]) {
		return nil, errors.New("sandbox: a server's command must be an absolute path")
	}
	bwrap, err := BwrapPath()
	if err != nil {
		return nil, err
	}
	feat, err := features(bwrap)
	if err != nil {
		return nil, err
	}
	var binds []Bind
	for _, p := range spec.ReadOnlyPaths {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("sandbox: read-only path %q is not absolute", p)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("sandbox: read-only path: %w", err)
		}
		binds = append(binds, Bind{Source: p, Dest: p})
	}
	tmp := spec.TmpBytes
	if tmp <= 0 {
		tmp = 64 << 20
	}
	prog, err := seccompProgram(spec.Network)
	if err != nil {
		return nil, err
	}
	filter, err := dataPipe(prog)
	if err != nil {
		return nil, err
	}
	args := bwrapArgs(bwrapSpec{
		chdir:     "/tmp",
		network:   spec.Network,
		tmpSize:   tmp,
		env:       spec.Env,
		binds:     binds,
		argv:      spec.Argv,
		features:  feat,
		bare:      true,
		seccompFD: 3, // ExtraFiles[0]
	})
	cmd := exec.CommandContext(ctx, bwrap, args...)
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{filter}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}
