package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ReadFile reads rel (a slash path) under dir, never following a symlink
// out of dir, reading at most limit bytes (more is an error).
func ReadFile(dir, rel string, limit int64) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	defer func() { _ = root.Close() }()
	f, err := root.Open(filepath.FromSlash(rel))
	if err != nil {
		return nil, fmt.Errorf("worktree: %w", err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("worktree: reading %s: %w", rel, err)
	}
	if int64(len(b)) > limit {
		return nil, refuse("%s is over %d bytes", rel, limit)
	}
	return b, nil
}

// ApplyPatch applies a unified diff to the files under dir with hardened
// git (git apply: no paths outside dir, none beyond a symlink), all of it
// or nothing. It returns the diff as applied (git's --stat summary is not
// needed: the patch is what changed).
func ApplyPatch(ctx context.Context, dir, patch string) error {
	return applyPatch(ctx, dir, patch, false)
}

// CheckPatch reports whether ApplyPatch would apply patch, changing
// nothing.
func CheckPatch(ctx context.Context, dir, patch string) error {
	return applyPatch(ctx, dir, patch, true)
}

func applyPatch(ctx context.Context, dir, patch string, checkOnly bool) error {
	tmp, err := os.CreateTemp("", "airlock-patch-*")
	if err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.WriteString(patch); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("worktree: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	if _, err := git(ctx, dir, nil, "apply", "--check", tmp.Name()); err != nil {
		var ge *GitError
		if errors.As(err, &ge) {
			return refuse("the patch does not apply: %s", trimGit(ge.Stderr))
		}
		return err
	}
	if checkOnly {
		return nil
	}
	if _, err := git(ctx, dir, nil, "apply", tmp.Name()); err != nil {
		return err
	}
	return nil
}

func trimGit(s string) string {
	if len(s) > 2000 {
		s = s[:2000]
	}
	return s
}

// DiffContent returns the unified diff that replacing old with new makes
// to the file name (old nil: the file is new), by hardened git on copies
// in a temporary directory: nothing under any root is read or run.
func DiffContent(ctx context.Context, name string, old, new []byte) (string, error) {
	tmp, err := os.MkdirTemp("", "airlock-diff-*")
	if err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	from := "/dev/null"
	if old != nil {
		from = "a"
		if err := os.WriteFile(filepath.Join(tmp, "a"), old, 0o600); err != nil {
			return "", fmt.Errorf("worktree: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "b"), new, 0o600); err != nil {
		return "", fmt.Errorf("worktree: %w", err)
	}
	out, err := git(ctx, tmp, nil, "diff", "--no-index", "--no-color", "--no-ext-diff", "--", from, "b")
	var ge *GitError
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ge) && errors.As(ge.Err, &ee) && ee.ExitCode() == 1) {
		return "", err // exit 1 only says the files differ
	}
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "diff --git "):
			lines[i] = "diff --git a/" + name + " b/" + name
		case l == "--- a/a":
			lines[i] = "--- a/" + name
		case l == "+++ b/b":
			lines[i] = "+++ b/" + name
		case strings.HasPrefix(l, "@@"):
			return VisibleDiff(strings.Join(lines, "\n")), nil
		}
	}
	return VisibleDiff(out), nil
}
