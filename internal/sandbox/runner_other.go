//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"os/exec"
)

// errUnsupported is returned off Linux: bubblewrap needs Linux namespaces.
var errUnsupported = errors.New("sandbox: bubblewrap sandboxes need Linux")

// Run fails off Linux: there is no sandbox to run in.
func Run(ctx context.Context, req ExecRequest, opts RunOptions) (Result, error) {
	return Result{}, errUnsupported
}

// BwrapPath fails off Linux.
func BwrapPath() (string, error) { return "", errUnsupported }

// Available fails off Linux.
func Available() error { return errUnsupported }

// ServerSpec is a stdio server to run in bubblewrap (Linux only).
type ServerSpec struct {
	Argv, Env, ReadOnlyPaths []string
	Network                  bool
	TmpBytes                 int64
}

// ServerCommand fails off Linux.
func ServerCommand(ctx context.Context, spec ServerSpec) (*exec.Cmd, error) {
	return nil, errUnsupported
}
