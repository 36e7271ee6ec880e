package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
