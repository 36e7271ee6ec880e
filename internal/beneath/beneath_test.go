package beneath_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock/internal/beneath"
)

func openRoot(t *testing.T, dir string) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(fd) })
	return fd
}

func TestParentNeverFollowsASymlink(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	for _, d := range []string{"a/b", "real"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// One link out of the root, one inside it: both refused.
	if err := os.Symlink(outside, filepath.Join(root, "a/out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(root, "in")); err != nil {
		t.Fatal(err)
	}
	fd := openRoot(t, root)

	for _, tc := range []struct{ rel, link string }{
		{"a/out/x", "a/out"},
		{"a/out/deeper/x", "a/out"},
		{"in/x", "in"},
	} {
		for _, mkdirs := range []bool{false, true} {
			d, _, err := beneath.Parent(fd, tc.rel, mkdirs)
			var se *beneath.SymlinkError
			if !errors.As(err, &se) || se.Path != tc.link {
				if d >= 0 {
					_ = unix.Close(d)
				}
				t.Fatalf("Parent(%q, mkdirs=%v) = %v, want a SymlinkError naming %q", tc.rel, mkdirs, err, tc.link)
			}
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("the walk made %v outside the root", ents)
	}

	// The last component is not walked: a symlink there is the caller's.
	d, last, err := beneath.Parent(fd, "a/out", false)
	if err != nil || last != "out" || !beneath.IsSymlink(d, last) {
		t.Fatalf("Parent(a/out) = %d %q %v, want a's descriptor and a symlink named out", d, last, err)
	}
	_ = unix.Close(d)
}

func TestParentMakesDirectoriesOnlyWhenAsked(t *testing.T) {
	root := t.TempDir()
	fd := openRoot(t, root)
	if _, _, err := beneath.Parent(fd, "x/y/f", false); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Parent without mkdirs = %v, want not exist", err)
	}
	d, last, err := beneath.Parent(fd, "x/y/f", true)
	if err != nil || last != "f" {
		t.Fatalf("Parent with mkdirs = %q %v", last, err)
	}
	_ = unix.Close(d)
	if fi, err := os.Stat(filepath.Join(root, "x/y")); err != nil || !fi.IsDir() {
		t.Fatalf("x/y not made: %v", err)
	}
}

func TestCheckRefusesUncleanPaths(t *testing.T) {
	for _, rel := range []string{"", "/a", "a//b", "a/./b", "../a", "a/..", "a/"} {
		if err := beneath.Check(rel); err == nil {
			t.Errorf("Check(%q) = nil, want a refusal", rel)
		}
		if _, _, err := beneath.Parent(openRoot(t, t.TempDir()), rel, true); err == nil {
			t.Errorf("Parent(%q) = nil error", rel)
		}
	}
	if err := beneath.Check("a/b.c/d"); err != nil {
		t.Errorf("Check(a/b.c/d) = %v", err)
	}
}
