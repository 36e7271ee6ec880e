package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestSandboxEnvMarksTheSandbox: the command sees AIRLOCK_SANDBOX=bwrap,
// and a request cannot set it otherwise.
func TestSandboxEnvMarksTheSandbox(t *testing.T) {
	ws, _ := newWorkspace(t)
	pol := DefaultPolicy()
	req := ExecRequest{Argv: []string{"printenv", "AIRLOCK_SANDBOX"}, Workspace: ws}
	res, err := Run(context.Background(), req, RunOptions{Policy: &pol})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v %+v %s", err, res, res.Stderr)
	}
	if got := string(res.Stdout); got != "bwrap\n" {
		t.Fatalf("AIRLOCK_SANDBOX = %q", got)
	}
	req.Env = map[string]string{"AIRLOCK_SANDBOX": "none"}
	if err := Validate(req, pol); err == nil {
		t.Fatal("a request may not set AIRLOCK_SANDBOX")
	}
}

// TestDefaultAllowlistWhichAndCp: which and cp are in the default list;
// cp's operands are confined to the workspace, and never under .git.
func TestDefaultAllowlistWhichAndCp(t *testing.T) {
	ws, outside := newWorkspace(t)
	pol := DefaultPolicy()
	res, err := Run(context.Background(), ExecRequest{Argv: []string{"which", "ls"}, Workspace: ws}, RunOptions{Policy: &pol})
	if err != nil || res.ExitCode != 0 || !strings.HasSuffix(strings.TrimSpace(string(res.Stdout)), "/ls") {
		t.Fatalf("which ls: %v %+v %s", err, res, res.Stderr)
	}
	res, err = Run(context.Background(), ExecRequest{Argv: []string{"cp", "README.md", "src/copy.md"}, Workspace: ws}, RunOptions{Policy: &pol})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("cp: %v %+v %s", err, res, res.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "src", "copy.md")); err != nil || string(b) != "hello\n" {
		t.Fatalf("copy: %q %v", b, err)
	}
	for _, argv := range [][]string{
		{"cp", filepath.Join(outside, "secret"), "stolen"},
		{"cp", "README.md", filepath.Join(outside, "planted")},
		{"cp", "../outside/secret", "."},
		{"cp", "-t", outside, "README.md"},
		{"cp", "README.md", ".git/hooks/pre-commit"},
		{"which", "--skip-alias", "ls"},
	} {
		if err := Validate(ExecRequest{Argv: argv, Workspace: ws}, pol); err == nil {
			t.Errorf("%q was allowed", argv)
		}
	}
}

// TestOutputTruncationIsUTF8Safe: output cut to MaxOutput never starts
// with half a character.
func TestOutputTruncationIsUTF8Safe(t *testing.T) {
	ws, _ := newWorkspace(t)
	write(t, filepath.Join(ws, "euro.txt"), strings.Repeat("€", 1000)) // 3 bytes each
	for _, max := range []int{100, 101, 102} {
		res, err := Run(context.Background(), ExecRequest{Argv: []string{"cat", "euro.txt"}, Workspace: ws}, RunOptions{MaxOutput: max})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run: %v %+v", err, res)
		}
		if !res.Truncated || !utf8.Valid(res.Stdout) || len(res.Stdout) > max || len(res.Stdout) < max-2 {
			t.Fatalf("max %d: %d bytes, valid %v", max, len(res.Stdout), utf8.Valid(res.Stdout))
		}
	}
}

// TestPermissionHint: a failed run whose output shows a permission error
// carries the hint; a success or another failure does not.
func TestPermissionHint(t *testing.T) {
	ws, _ := newWorkspace(t)
	write(t, filepath.Join(ws, "ro", "keep"), "x")
	res, err := Run(context.Background(), ExecRequest{Argv: []string{"cp", "README.md", "ro/new"}, Workspace: ws},
		RunOptions{ReadOnlyPaths: []string{"ro"}})
	if err != nil || res.ExitCode == 0 {
		t.Fatalf("cp into a read-only path: %v %+v", err, res)
	}
	if h := PermissionHint(res.ExitCode, string(res.Stdout), string(res.Stderr)); !strings.Contains(h, "sandbox may be the cause") {
		t.Fatalf("no hint for %q", res.Stderr)
	}
	for _, msg := range []string{"Permission denied", "Operation not permitted", "open: EACCES", "EPERM"} {
		if PermissionHint(1, "", "x: "+msg) == "" {
			t.Errorf("no hint for %q", msg)
		}
	}
	if PermissionHint(0, "", "Permission denied") != "" || PermissionHint(2, "", "No such file or directory") != "" {
		t.Error("a hint without a failed run's permission error")
	}
}
