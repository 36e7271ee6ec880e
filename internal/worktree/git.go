// Package worktree runs the git side of Airlock's worktree tools on a worker
// host: a worktree per task on its own branch, its diff, the commit a
// reviewer approves and the merge of exactly that commit. Every git call is
// hardened: no hooks, no fsmonitor, no external diff or textconv, no filter
// drivers, no signing, no pager or editor, no system or global config.
package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// hardening is passed as -c to every git call. Command-line configuration
// beats the repository's own, so a planted .git/config cannot turn any of
// it back on.
var hardening = []string{
	"core.hooksPath=/dev/null",
	"core.fsmonitor=false",
	"core.pager=cat",
	"core.editor=false",
	"sequence.editor=false",
	"core.askPass=",
	"core.sshCommand=false",
	"core.attributesFile=/dev/null",
	"diff.external=",
	"commit.gpgSign=false",
	"tag.gpgSign=false",
	"merge.verifySignatures=false",
	"credential.helper=",
	"protocol.allow=never",
	"submodule.recurse=false",
	"uploadpack.packObjectsHook=",
	"safe.directory=*",
	"gc.auto=0",
	"maintenance.auto=false",
	"advice.detachedHead=false",
	"init.defaultBranch=main",
}

// infoAttributes neutralises attribute-driven programs for every path: no
// filter driver (clean/smudge/process), no diff driver (textconv, command),
// no merge driver, no ident expansion. $GIT_DIR/info/attributes outranks
// every .gitattributes in the tree.
const infoAttributes = "# Written by Airlock: no filter, diff or merge drivers run here.\n* -filter !diff !merge -ident\n"

// callTimeout bounds one git call.
const callTimeout = 2 * time.Minute

// maxOutput bounds what one git call may print.
const maxOutput = 8 << 20

// gitEnv is the whole environment of a git call.
func gitEnv(extra ...string) []string {
	env := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=/nonexistent",
		"LANG=C",
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_AUTHOR_NAME=Airlock", "GIT_AUTHOR_EMAIL=airlock@localhost",
		"GIT_COMMITTER_NAME=Airlock", "GIT_COMMITTER_EMAIL=airlock@localhost",
	}
	return append(env, extra...)
}

// GitError is a failed git call, with what git said.
type GitError struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *GitError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.Args, " "), e.Err, strings.TrimSpace(e.Stderr))
}

func (e *GitError) Unwrap() error { return e.Err }

// boundedBuffer keeps at most max bytes and remembers that it dropped some.
type boundedBuffer struct {
	bytes.Buffer
	max       int
	truncated bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); len(p) > room {
		b.truncated = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// git runs one hardened git command in dir and returns its stdout.
func git(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	full := make([]string, 0, 2*len(hardening)+len(args)+2)
	for _, h := range hardening {
		full = append(full, "-c", h)
	}
	full = append(full, "-C", dir)
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Env = gitEnv(env...)
	cmd.Stdin = nil
	stdout := &boundedBuffer{max: maxOutput}
	stderr := &boundedBuffer{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &GitError{Args: args, Stderr: stderr.String(), Err: err}
	}
	if stdout.truncated {
		return stdout.String(), &GitError{Args: args, Stderr: "output over 8 MiB", Err: errors.New("too much output")}
	}
	return stdout.String(), nil
}

// harden writes the info/attributes that switch attribute-driven programs
// off in a repository (shared by all its worktrees).
func harden(ctx context.Context, repo string) error {
	common, err := git(ctx, repo, nil, "rev-parse", "--git-common-dir")
	if err != nil {
		return err
	}
	common = strings.TrimSpace(common)
	if !filepath.IsAbs(common) {
		common = filepath.Join(repo, common)
	}
	info := filepath.Join(common, "info")
	if err := os.MkdirAll(info, 0o755); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	path := filepath.Join(info, "attributes")
	cur, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("worktree: %w", err)
	}
	if strings.HasSuffix(string(cur), infoAttributes) {
		return nil
	}
	// Appended: the last matching line wins, so ours overrides the rest.
	if len(cur) > 0 && cur[len(cur)-1] != '\n' {
		cur = append(cur, '\n')
	}
	return os.WriteFile(path, append(cur, infoAttributes...), 0o644)
}

// scratchRepo creates an empty repository at gitDir (inside the worker's
// own temporary directory tmp) whose info/attributes are attributes. A git
// call given GIT_DIR=gitDir and GIT_WORK_TREE=<a directory> reads this
// repository's config and attributes, never one found in or above that
// directory: whatever an agent planted there (a .git, or the directory
// itself made a bare repository) is not looked at.
func scratchRepo(ctx context.Context, tmp, gitDir, attributes string) error {
	if _, err := git(ctx, tmp, nil, "init", "--quiet", "--bare", gitDir); err != nil {
		return err
	}
	if _, err := git(ctx, tmp, []string{"GIT_DIR=" + gitDir}, "config", "core.bare", "false"); err != nil {
		return err
	}
	info := filepath.Join(gitDir, "info")
	if err := os.MkdirAll(info, 0o700); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	if err := os.WriteFile(filepath.Join(info, "attributes"), []byte(attributes), 0o600); err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	return nil
}
