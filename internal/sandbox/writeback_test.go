package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runPaused runs script with a disk quota, the command first waiting on a
// fifo (bound read-only at /sync) until meanwhile, which runs once the
// command has started (its workspace copied in), has returned: what
// meanwhile does to the workspace is what another run's write-back does
// during this run. No sleeps: the fifo's open and read order the two.
func runPaused(t *testing.T, ws, script string, opts RunOptions, meanwhile func()) (Result, error) {
	t.Helper()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "go")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	opts.ExtraBinds = append(opts.ExtraBinds, Bind{Source: dir, Dest: "/sync"})
	started := make(chan bool, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0) // until the command opens it
		if err != nil {
			started <- false
			return
		}
		defer f.Close()
		ran := <-started
		if ran {
			meanwhile()
		}
		_, _ = f.WriteString("go\n")
	}()
	started <- true
	res, err := Run(context.Background(), ExecRequest{Argv: []string{"sh", "-c", "read x < /sync/go && " + script}, Workspace: ws, Timeout: 60 * time.Second}, opts)
	// A run that never reached its command leaves the writer waiting on
	// the fifo's open: a reader releases it.
	if r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
		<-done
		r.Close()
	}
	<-done
	return res, err
}

// TestWriteBackRefusesASymlinkedParent: during a run, another run's
// write-back turns the directory d into a symlink to .git. This run's
// write-back of d/config (edited or deleted) or of a new d/hooks/pre-commit must not
// go through it to .git: the run fails and .git is as it was. Before,
// os.Root followed the symlink (it stays inside the workspace), and
// `printf … > d/config` rewrote .git/config (core.fsmonitor: code for the
// next git call on the host).
func TestWriteBackRefusesASymlinkedParent(t *testing.T) {
	requireBwrap(t)
	for _, tc := range []struct{ name, script string }{
		{"edit", `printf '[core]\n\tfsmonitor = touch /tmp/pwned\n' > d/config`},
		{"delete", "rm d/config"},
		{"create", "echo '#!/bin/sh' > d/hooks/pre-commit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, _ := newWorkspace(t)
			write(t, filepath.Join(ws, ".git", "config"), "[core]\n")
			write(t, filepath.Join(ws, "d", "config"), "[core]\n")
			for _, d := range []string{".git/hooks", "d/hooks"} {
				if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			opts := RunOptions{MaxProcs: 64, DiskQuota: 16 << 20, InodeQuota: 1000, ReadOnlyPaths: []string{".git"}}
			_, err := runPaused(t, ws, tc.script, opts, func() {
				if err := os.RemoveAll(filepath.Join(ws, "d")); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(".git", filepath.Join(ws, "d")); err != nil {
					t.Error(err)
				}
			})
			if err == nil || !strings.Contains(err.Error(), "symlink") {
				t.Errorf("Run: %v, want the write-back refused for a symlinked parent", err)
			}
			if b, err := os.ReadFile(filepath.Join(ws, ".git", "config")); err != nil || string(b) != "[core]\n" {
				t.Errorf(".git/config is %q, %v: written through the symlink", b, err)
			}
			if _, err := os.Lstat(filepath.Join(ws, ".git", "hooks", "pre-commit")); !os.IsNotExist(err) {
				t.Errorf(".git/hooks/pre-commit was created through the symlink (%v)", err)
			}
		})
	}
}
