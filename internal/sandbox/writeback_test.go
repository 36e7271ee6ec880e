package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/airlockhq/airlock/internal/pathrule"
)

// runPaused runs script with opts (a disk quota: the command works on a
// copy), the command first waiting on a fifo (bound read-only at /sync)
// until meanwhile, which runs once the command has started (its workspace
// copied in), has returned: what meanwhile does to the workspace is what
// another run's write-back does during this run. No sleeps: the fifo's
// open and read order the two.
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
	var finished atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0) // until the command opens it
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		// Opened by the command, which waits for this line: the run is
		// not over. (Opened by the release below, it is.)
		if !finished.Load() {
			meanwhile()
		}
		_, _ = f.WriteString("go\n")
	}()
	res, err := Run(context.Background(), ExecRequest{Argv: []string{"sh", "-c", "read x < /sync/go && " + script}, Workspace: ws, Timeout: 60 * time.Second}, opts)
	finished.Store(true)
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
// write-back of d/config (edited or deleted) or of a new
// d/hooks/pre-commit must not go through it to .git: the run fails and
// .git is as it was. Before,
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

// TestWriteBackWithholdsNewProtectedPaths: a path that deny_paths or
// read_only_paths cover is not written back even when it did not exist
// before the run (so no read-only bind or plan entry covered it): a new
// .env, a new sub/.git/hooks/pre-commit, files under a read-only docs and
// .github/workflows that were absent. What no entry covers is written back
// as usual. Before, all four landed on the host: only paths that existed
// before the run were checked.
func TestWriteBackWithholdsNewProtectedPaths(t *testing.T) {
	requireBwrap(t)
	ws, _ := newWorkspace(t)
	write(t, filepath.Join(ws, ".git", "config"), "[core]\n")
	script := "mkdir -p docs .github/workflows sub/.git/hooks && echo ro > docs/a && echo ci > .github/workflows/x.yml && " +
		"echo '#!/bin/sh' > sub/.git/hooks/pre-commit && echo K=1 > .env && echo K=2 > sub/.env.local && echo evil > .git/config && " +
		"echo ok > .github/dependabot.yml && echo ok > sub/made.txt"
	opts := RunOptions{MaxProcs: 64, DiskQuota: 16 << 20, InodeQuota: 1000,
		DenyPaths: pathrule.BuiltinDeny, ReadOnlyPaths: append(slices.Clone(pathrule.BuiltinReadOnly), "docs", ".github/workflows")}
	res, err := Run(context.Background(), ExecRequest{Argv: []string{"sh", "-c", script}, Workspace: ws, Timeout: 30 * time.Second}, opts)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %v exit=%d stderr=%s", err, res.ExitCode, res.Stderr)
	}
	for _, rel := range []string{"docs", ".github/workflows", "sub/.git", ".env", "sub/.env.local"} {
		if _, err := os.Lstat(filepath.Join(ws, rel)); !os.IsNotExist(err) {
			t.Errorf("%s was written back (%v)", rel, err)
		}
	}
	for rel, want := range map[string]string{".git/config": "[core]\n", ".github/dependabot.yml": "ok\n", "sub/made.txt": "ok\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, rel)); err != nil || string(b) != want {
			t.Errorf("%s is %q, %v; want %q", rel, b, err, want)
		}
	}
	// The result says what was not kept, new or not, the same way.
	want := []string{".env", ".git/config", ".github/workflows", "docs", "sub/.env.local", "sub/.git"}
	if !slices.Equal(res.NotWrittenBack, want) {
		t.Errorf("NotWrittenBack %q, want %q", res.NotWrittenBack, want)
	}
}

// TestWriteBackKeepsProtectedPathsMadeMeanwhile: the command removes the
// directory x and replaces the directory y with a file, while another run
// gives each a .git. The write-back removes what it may and leaves both
// .git (and so x and y) where they are: removing a directory never takes a
// read-only path with it, also one that did not exist before the run.
func TestWriteBackKeepsProtectedPathsMadeMeanwhile(t *testing.T) {
	requireBwrap(t)
	ws, _ := newWorkspace(t)
	write(t, filepath.Join(ws, "x", "f"), "x\n")
	write(t, filepath.Join(ws, "y", "f"), "y\n")
	opts := RunOptions{MaxProcs: 64, DiskQuota: 16 << 20, InodeQuota: 1000, ReadOnlyPaths: []string{".git"}}
	res, err := runPaused(t, ws, "rm -r x y && echo file > y", opts, func() {
		write(t, filepath.Join(ws, "x", ".git", "config"), "[core]\n")
		write(t, filepath.Join(ws, "y", ".git", "config"), "[core]\n")
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %v exit=%d stderr=%s", err, res.ExitCode, res.Stderr)
	}
	for _, rel := range []string{"x/.git/config", "y/.git/config"} {
		if b, err := os.ReadFile(filepath.Join(ws, rel)); err != nil || string(b) != "[core]\n" {
			t.Errorf("%s is %q, %v: removed with its directory", rel, b, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "x", "f")); !os.IsNotExist(err) {
		t.Errorf("x/f was not removed (%v)", err)
	}
	if want := []string{"x", "y"}; !slices.Equal(res.NotWrittenBack, want) {
		t.Errorf("NotWrittenBack %q, want %q", res.NotWrittenBack, want)
	}
}
