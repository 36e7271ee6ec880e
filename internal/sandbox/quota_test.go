package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// quotaOpts is a run with a small disk quota.
func quotaOpts(size, inodes int64) RunOptions {
	return RunOptions{MaxProcs: 64, DiskQuota: size, InodeQuota: inodes}
}

// freeBytes is the free space of the filesystem holding dir.
func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// tree lists every path under dir with its size.
func tree(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = fi.Size()
		if fi.IsDir() {
			out[rel] = -1
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDiskQuotaStopsAnEndlessSed: sed -i ':a;p;ba' writes its temp file
// forever. Under a 256 MiB quota it is stopped with a clear error, the
// workspace is exactly as it was (no sed temp file), no sandbox temp file
// is left anywhere, and the host's disk never saw the writes.
func TestDiskQuotaStopsAnEndlessSed(t *testing.T) {
	requireBwrap(t)
	ws, _ := newWorkspace(t)
	if err := os.WriteFile(filepath.Join(ws, "f.txt"), []byte("line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := tree(t, ws)
	free := freeBytes(t, ws)
	pol := DefaultPolicy()
	req := ExecRequest{Argv: []string{"sed", "-i", ":a;p;ba", "f.txt"}, Workspace: ws, Timeout: 60 * time.Second}
	if err := Validate(req, pol); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	opts := quotaOpts(256<<20, 1000)
	opts.Policy = &pol
	res, err := Run(context.Background(), req, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !strings.Contains(res.Error, "disk quota exceeded") || !strings.Contains(res.Error, "256 MiB") {
		t.Fatalf("result error %q does not say the disk quota was exceeded (exit %d, stderr %s)", res.Error, res.ExitCode, res.Stderr)
	}
	if res.ExitCode == 0 {
		t.Errorf("exit code 0 for a command stopped by its quota")
	}
	if after := tree(t, ws); !equalTree(before, after) {
		t.Errorf("the workspace changed:\nbefore %v\nafter  %v", before, after)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "f.txt")); string(b) != "line\n" {
		t.Errorf("f.txt is %d bytes, want its old content", len(b))
	}
	// Within 128 MiB, half of what the sed wrote: the filesystem is
	// shared with whatever else runs on this host.
	if d := free - freeBytes(t, ws); d > 128<<20 {
		t.Errorf("the workspace's filesystem lost %d bytes", d)
	}
}

func equalTree(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestInodeQuota: a command that makes more files than the inode quota is
// stopped, and none of them is kept.
func TestInodeQuota(t *testing.T) {
	requireBwrap(t)
	ws, _ := newWorkspace(t)
	before := tree(t, ws)
	res, err := Run(context.Background(), ExecRequest{Argv: []string{"sh", "-c", "i=0; while true; do i=$((i+1)); : > f$i; done"}, Workspace: ws, Timeout: 60 * time.Second}, quotaOpts(64<<20, 200))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !strings.Contains(res.Error, "more than its limit of 200 files") {
		t.Fatalf("result error %q does not name the inode quota", res.Error)
	}
	if after := tree(t, ws); !equalTree(before, after) {
		t.Errorf("files were kept: %d entries, want %d", len(after), len(before))
	}
}

// TestQuotaWritesBack: a command that ends on its own within the quota
// leaves its changes in the workspace — new, changed, deleted, renamed,
// a directory replacing a file — and what it did not touch is as it was.
func TestQuotaWritesBack(t *testing.T) {
	requireBwrap(t)
	ws, _ := newWorkspace(t)
	put := func(rel, content string) { write(t, filepath.Join(ws, rel), content) }
	put("keep.txt", "keep\n")
	put("edit.txt", "old\n")
	put("gone.txt", "bye\n")
	put("old-name.txt", "moved\n")
	put("was-file", "x\n")
	put("dir/inner.txt", "inner\n")
	if err := os.Symlink("keep.txt", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	keepInfo, _ := os.Stat(filepath.Join(ws, "keep.txt"))
	script := "echo new > edit.txt && rm gone.txt && mv old-name.txt new-name.txt && rm was-file && mkdir was-file && echo in > was-file/f && echo made > dir/made.txt && mkdir -p a/b && echo deep > a/b/c.txt"
	res, err := Run(context.Background(), ExecRequest{Argv: []string{"sh", "-c", script}, Workspace: ws, Timeout: 30 * time.Second}, quotaOpts(16<<20, 1000))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %v exit=%d error=%q stderr=%s", err, res.ExitCode, res.Error, res.Stderr)
	}
	want := map[string]string{"keep.txt": "keep\n", "edit.txt": "new\n", "new-name.txt": "moved\n", "was-file/f": "in\n",
		"dir/inner.txt": "inner\n", "dir/made.txt": "made\n", "a/b/c.txt": "deep\n"}
	for rel, content := range want {
		if b, err := os.ReadFile(filepath.Join(ws, rel)); err != nil || string(b) != content {
			t.Errorf("%s: %q, %v; want %q", rel, b, err, content)
		}
	}
	for _, rel := range []string{"gone.txt", "old-name.txt"} {
		if _, err := os.Lstat(filepath.Join(ws, rel)); !os.IsNotExist(err) {
			t.Errorf("%s still exists", rel)
		}
	}
	if target, err := os.Readlink(filepath.Join(ws, "link")); err != nil || target != "keep.txt" {
		t.Errorf("link: %q, %v", target, err)
	}
	if fi, _ := os.Stat(filepath.Join(ws, "keep.txt")); !os.SameFile(fi, keepInfo) {
		t.Errorf("keep.txt was rewritten though the command did not touch it")
	}
	if res.NotWrittenBack != nil {
		t.Errorf("NotWrittenBack %q with no deny or read-only entries", res.NotWrittenBack)
	}
	for rel := range tree(t, ws) {
		if strings.Contains(rel, ".airlock-write-") {
			t.Errorf("temporary file left: %s", rel)
		}
	}
}

// TestQuotaTimeoutKeepsNothing: a command killed by its timeout leaves
// none of its writes behind.
func TestQuotaTimeoutKeepsNothing(t *testing.T) {
	requireBwrap(t)
	ws, _ := newWorkspace(t)
	before := tree(t, ws)
	res, err := Run(context.Background(), ExecRequest{Argv: []string{"sh", "-c", "echo partial > half.txt; sleep 30"}, Workspace: ws, Timeout: time.Second}, quotaOpts(16<<20, 1000))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !strings.HasPrefix(res.Error, "timeout") {
		t.Fatalf("error %q, want a timeout", res.Error)
	}
	if after := tree(t, ws); !equalTree(before, after) {
		t.Errorf("a killed command's writes were kept: %v", after)
	}
}

// TestQuotaWorkspaceTooLarge: a workspace that does not fit its quota
// is not run, with a clear error.
func TestQuotaWorkspaceTooLarge(t *testing.T) {
	requireBwrap(t)
	ws, _ := newWorkspace(t)
	if err := os.WriteFile(filepath.Join(ws, "big"), make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), ExecRequest{Argv: []string{"true"}, Workspace: ws, Timeout: 10 * time.Second}, quotaOpts(2<<20, 1000))
	if err == nil || !strings.Contains(err.Error(), "larger than the disk quota of 2 MiB") {
		t.Fatalf("Run: %v, want the workspace refused as larger than the quota", err)
	}
}

// TestDiskQuotaWatchdog: a command that fills its quota and keeps running
// (ignoring ENOSPC) is stopped by the watchdog, not by its timeout.
func TestDiskQuotaWatchdog(t *testing.T) {
	requireBwrap(t)
	ws, _ := newWorkspace(t)
	before := tree(t, ws)
	res, err := Run(context.Background(), ExecRequest{Argv: []string{"sh", "-c", "yes > big 2>/dev/null; while true; do :; done"},
		Workspace: ws, Timeout: 120 * time.Second}, quotaOpts(32<<20, 1000))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !strings.Contains(res.Error, "disk quota exceeded") || res.ExitCode != 137 {
		t.Fatalf("exit %d, error %q: want it stopped for its quota", res.ExitCode, res.Error)
	}
	if after := tree(t, ws); !equalTree(before, after) {
		t.Errorf("the workspace changed: %v", after)
	}
}

// TestQuotaWorkspaceIsTmpfs: with a quota the command's /workspace is the
// sized tmpfs, without one the workspace itself.
func TestQuotaWorkspaceIsTmpfs(t *testing.T) {
	requireBwrap(t)
	ws, _ := newWorkspace(t)
	for _, tc := range []struct {
		quota int64
		want  string
	}{{16 << 20, "tmpfs 4096"}, {0, ""}} {
		res, err := Run(context.Background(), ExecRequest{Argv: []string{"stat", "-f", "-c", "%T %b", "/workspace"}, Workspace: ws, Timeout: 10 * time.Second}, quotaOpts(tc.quota, 1000))
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("Run: %v %+v", err, res)
		}
		got := strings.TrimSpace(string(res.Stdout))
		if tc.want != "" && got != tc.want {
			t.Errorf("quota %d: /workspace is %q, want %q", tc.quota, got, tc.want)
		}
		if tc.want == "" && strings.HasPrefix(got, "tmpfs 4096") {
			t.Errorf("without a quota /workspace is %q", got)
		}
	}
}

// TestQuotaRemovesStaleWriteBackFiles: a temporary file left by a worker
// that died while writing a run back is removed by the next run (never
// copied into it); one of a live worker is left alone.
func TestQuotaRemovesStaleWriteBackFiles(t *testing.T) {
	requireBwrap(t)
	ws, _ := newWorkspace(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(ws, "src", fmt.Sprintf("%s%d-7", tempPrefix, dead.Process.Pid))
	live := filepath.Join(ws, fmt.Sprintf("%s%d-8", tempPrefix, os.Getppid()))
	write(t, stale, "half a file")
	write(t, live, "being written")
	res, err := Run(context.Background(), ExecRequest{Argv: []string{"ls", "-a", "src"}, Workspace: ws, Timeout: 10 * time.Second}, quotaOpts(16<<20, 1000))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %v %+v", err, res)
	}
	if strings.Contains(string(res.Stdout), tempPrefix) {
		t.Errorf("the stale file was copied into the run: %s", res.Stdout)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale write-back file is still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live worker's file was removed: %v", err)
	}
}

// TestQuotaRefusesBindsIntoTheWorkspace: an extra bind inside /workspace
// would sit over the copy (and be written through to the host): refused.
func TestQuotaRefusesBindsIntoTheWorkspace(t *testing.T) {
	requireBwrap(t)
	ws, outside := newWorkspace(t)
	opts := quotaOpts(16<<20, 1000)
	opts.ExtraBinds = []Bind{{Source: outside, Dest: SandboxWorkspace + "/sub", Writable: true}}
	_, err := Run(context.Background(), ExecRequest{Argv: []string{"true"}, Workspace: ws, Timeout: 10 * time.Second}, opts)
	if err == nil || !strings.Contains(err.Error(), "inside /workspace") {
		t.Fatalf("Run: %v, want the bind refused", err)
	}
}

// TestQuotaWorkingDirectory: args.dir works on the copy (the directory is
// copied in before bwrap changes into it).
func TestQuotaWorkingDirectory(t *testing.T) {
	requireBwrap(t)
	ws, _ := newWorkspace(t)
	res, err := Run(context.Background(), ExecRequest{Argv: []string{"sh", "-c", "pwd; cat main.go; echo out > made.txt"}, Workspace: ws, Dir: "src", Timeout: 10 * time.Second}, quotaOpts(16<<20, 1000))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %v %+v", err, res)
	}
	if got := string(res.Stdout); got != "/workspace/src\npackage main\n" {
		t.Errorf("stdout %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "src", "made.txt")); err != nil || string(b) != "out\n" {
		t.Errorf("src/made.txt: %q %v", b, err)
	}
}
