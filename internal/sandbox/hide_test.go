package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestHiddenAndReadOnlyPaths runs, in real bubblewrap and with and
// without a disk quota, a script that reads everything and then tries to
// change a hidden file, a read-only file and a .git file: it reads nothing
// hidden, and the host keeps all three as they were.
func TestHiddenAndReadOnlyPaths(t *testing.T) {
	requireBwrap(t)
	for _, quota := range []int64{0, 16 << 20} {
		ws, _ := newWorkspace(t)
		put := func(rel, content string) { write(t, filepath.Join(ws, rel), content) }
		put("notes.txt", "plain\n")
		put(".env", "TOKEN=secret-one\n")
		put("keys/deploy.pem", "secret-two\n")
		put("locked/prod.yaml", "old\n")
		put(".git/config", "[core]\n")
		if err := os.Link(filepath.Join(ws, ".env"), filepath.Join(ws, "alias.txt")); err != nil {
			t.Fatal(err)
		}
		script := "grep -r secret . ; cat alias.txt ; echo x > .env ; echo new > locked/prod.yaml ; echo evil > .git/config ; echo made > fresh.txt ; true"
		opts := RunOptions{MaxProcs: 64, DiskQuota: quota, InodeQuota: 1000,
			DenyPaths: []string{".env", "*.pem"}, ReadOnlyPaths: []string{".git", "locked"}}
		res, err := Run(context.Background(), ExecRequest{Argv: []string{"sh", "-c", script}, Workspace: ws, Timeout: 30 * time.Second}, opts)
		if err != nil {
			t.Fatalf("quota %d: Run: %v", quota, err)
		}
		if out := string(res.Stdout); strings.Contains(out, "secret") {
			t.Errorf("quota %d: hidden content read: %q", quota, out)
		}
		for rel, want := range map[string]string{".env": "TOKEN=secret-one\n", "locked/prod.yaml": "old\n", ".git/config": "[core]\n",
			"keys/deploy.pem": "secret-two\n", "fresh.txt": "made\n"} {
			if b, err := os.ReadFile(filepath.Join(ws, rel)); err != nil || string(b) != want {
				t.Errorf("quota %d: %s is %q, %v; want %q", quota, rel, b, err, want)
			}
		}
		// With a quota the writes were made on the copy and not kept: the
		// result says so. Without one they failed in the command.
		var want []string
		if quota > 0 {
			want = []string{".env", ".git/config", "locked/prod.yaml"}
		}
		if !slices.Equal(res.NotWrittenBack, want) {
			t.Errorf("quota %d: NotWrittenBack %q, want %q", quota, res.NotWrittenBack, want)
		}
	}
}

// TestHiddenByHostPath: deny and read-only entries also match the
// workspace's files by their host paths. An absolute entry naming a file
// in the workspace hides it, and with the workspace being the worker's
// home directory, "~/.ssh" (a built-in deny entry) and "~/.gitconfig" hide
// and protect the workspace's own. Before, only the paths the command sees
// (relative, /workspace/...) were matched: both were readable and the
// first writable.
func TestHiddenByHostPath(t *testing.T) {
	requireBwrap(t)
	ws, _ := newWorkspace(t)
	t.Setenv("HOME", ws) // the worker's home is the workspace
	put := func(rel, content string) { write(t, filepath.Join(ws, rel), content) }
	put(".ssh/id_ecdsa", "secret-key\n")
	put("config/prod.yaml", "secret-prod\n")
	put(".gitconfig", "[user]\n")
	script := "cat .ssh/id_ecdsa config/prod.yaml ; echo evil > .gitconfig ; true"
	opts := RunOptions{MaxProcs: 64, DenyPaths: []string{"~/.ssh", filepath.Join(ws, "config/prod.yaml")}, ReadOnlyPaths: []string{"~/.gitconfig"}}
	res, err := Run(context.Background(), ExecRequest{Argv: []string{"sh", "-c", script}, Workspace: ws, Timeout: 30 * time.Second}, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if out := string(res.Stdout); strings.Contains(out, "secret") {
		t.Errorf("hidden content read: %q", out)
	}
	if b, err := os.ReadFile(filepath.Join(ws, ".gitconfig")); err != nil || string(b) != "[user]\n" {
		t.Errorf(".gitconfig is %q, %v: it was written", b, err)
	}
}
