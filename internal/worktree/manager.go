package worktree

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Manager manages the worktrees of a worker host's registered repositories.
// Worktrees live under Root/<repo>/<name>, each on branch airlock/<name>,
// with a small record of its base next to it.
type Manager struct {
	Repos map[string]string // repository name → path
	Root  string
}

// Info describes one worktree.
type Info struct {
	Worktree   string `json:"worktree"` // "<repo>/<name>", what agents pass back
	Branch     string `json:"branch"`
	Base       string `json:"base"`        // the branch it was made from and merges into
	BaseCommit string `json:"base_commit"` // the commit it was made from
	Path       string `json:"-"`
	repo       string
}

// branchPrefix starts the name of every worktree's branch.
const branchPrefix = "airlock/"

var (
	namePart   = regexp.MustCompile(`^wt-[0-9a-f]{12}$`)
	branchName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$`)
)

// Error is a refusal or failure a reviewer or agent can read.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func refuse(format string, a ...any) error { return &Error{Msg: fmt.Sprintf(format, a...)} }

func (m *Manager) repoPath(name string) (string, error) {
	p, ok := m.Repos[name]
	if !ok {
		return "", refuse("repository %q is not served by this worker", name)
	}
	return p, nil
}

// Create makes a new worktree of repo on a new branch from base (default:
// the repository's HEAD branch).
func (m *Manager) Create(ctx context.Context, repo, base string) (Info, error) {
	rp, err := m.repoPath(repo)
	if err != nil {
		return Info{}, err
	}
	if err := harden(ctx, rp); err != nil {
		return Info{}, err
	}
	if base == "" {
		head, err := git(ctx, rp, nil, "symbolic-ref", "--short", "HEAD")
		if err != nil {
			return Info{}, refuse("repository %q has no branch checked out; name a base", repo)
		}
		base = strings.TrimSpace(head)
	}
	if !branchName.MatchString(base) || strings.Contains(base, "..") {
		return Info{}, refuse("base %q is not a branch name", base)
	}
	if strings.HasPrefix(base, branchPrefix) {
		// A worktree's branch is its agent's: a worktree made from it would
		// read what that agent committed, and its merge would move it.
		return Info{}, refuse("base %q is a worktree's branch: a worktree starts from a branch of the repository", base)
	}
	baseCommit, err := git(ctx, rp, nil, "rev-parse", "--verify", "--quiet", "refs/heads/"+base+"^{commit}")
	if err != nil {
		return Info{}, refuse("base branch %q does not exist in %q", base, repo)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "wt-" + hex.EncodeToString(b)
	info := Info{Worktree: repo + "/" + name, Branch: branchPrefix + name, Base: base,
		BaseCommit: strings.TrimSpace(baseCommit), Path: filepath.Join(m.Root, repo, name), repo: repo}
	if err := os.MkdirAll(filepath.Dir(info.Path), 0o755); err != nil {
		return Info{}, fmt.Errorf("worktree: %w", err)
	}
	if _, err := git(ctx, rp, nil, "worktree", "add", "--quiet", "-b", info.Branch, info.Path, info.BaseCommit); err != nil {
		return Info{}, err
	}
	record, _ := json.Marshal(info)
	if err := os.WriteFile(info.Path+".json", record, 0o644); err != nil {
		return Info{}, fmt.Errorf("worktree: %w", err)
	}
	return info, nil
}

// Open returns the worktree named by an agent ("<repo>/<name>").
func (m *Manager) Open(worktree string) (Info, error) {
	repo, name, ok := strings.Cut(worktree, "/")
	if !ok || !namePart.MatchString(name) {
		return Info{}, refuse("%q is not a worktree name", worktree)
	}
	if _, err := m.repoPath(repo); err != nil {
		return Info{}, err
	}
	path := filepath.Join(m.Root, repo, name)
	raw, err := os.ReadFile(path + ".json")
	if errors.Is(err, os.ErrNotExist) {
		return Info{}, refuse("no worktree %q (abandoned, merged or never created)", worktree)
	}
	if err != nil {
		return Info{}, fmt.Errorf("worktree: %w", err)
	}
	var info Info
	if err := json.Unmarshal(raw, &info); err != nil || info.Worktree != worktree {
		return Info{}, fmt.Errorf("worktree: bad record for %s", worktree)
	}
	info.Path, info.repo = path, repo
	return info, nil
}

// Diff returns the unified diff of everything in the worktree (committed or
// not, untracked files included) against its base commit, as full text
// (VisibleDiff).
func (m *Manager) Diff(ctx context.Context, worktree string) (string, error) {
	info, err := m.Open(worktree)
	if err != nil {
		return "", err
	}
	wt, err := m.worktreeGit(ctx, info)
	if err != nil {
		return "", err
	}
	if _, err := wt(ctx, "add", "--all"); err != nil {
		return "", err
	}
	diff, err := wt(ctx, "diff", "--cached", "--text", "--no-ext-diff", "--no-textconv", "--no-color", info.BaseCommit)
	return VisibleDiff(diff), err
}

// Preview is what a reviewer approves: the commit and its diff.
type Preview struct {
	Commit string
	Base   string
	Branch string
	Diff   string
}

// Prepare commits whatever is uncommitted in the worktree (author: the
// agent) and returns that commit with its diff against the base commit:
// exactly what the reviewer will see and what a merge may take. The diff is
// full text, binary files included (VisibleDiff).
func (m *Manager) Prepare(ctx context.Context, worktree, agent string) (Preview, error) {
	info, err := m.Open(worktree)
	if err != nil {
		return Preview{}, err
	}
	wt, err := m.worktreeGit(ctx, info)
	if err != nil {
		return Preview{}, err
	}
	if _, err := wt(ctx, "add", "--all"); err != nil {
		return Preview{}, err
	}
	if _, err := wt(ctx, "diff", "--cached", "--quiet"); err != nil {
		var ge *GitError
		if !errors.As(err, &ge) {
			return Preview{}, err
		}
		author := fmt.Sprintf("%s <%s@agents.airlock>", agent, agent)
		if _, err := wt(ctx, "commit", "--quiet", "--no-verify", "--author", author,
			"-m", "Changes by agent "+agent+" (committed by Airlock for review)"); err != nil {
			return Preview{}, err
		}
	}
	commit, err := wt(ctx, "rev-parse", "HEAD")
	if err != nil {
		return Preview{}, err
	}
	commit = strings.TrimSpace(commit)
	// --text: a NUL byte must not turn the diff into "Binary files …
	// differ" and hide what the merge lands.
	diff, err := wt(ctx, "diff", "--text", "--no-ext-diff", "--no-textconv", "--no-color", info.BaseCommit, commit)
	if err != nil {
		return Preview{}, err
	}
	diff = VisibleDiff(diff)
	if diff == "" {
		return Preview{}, refuse("worktree %s has no changes to merge", worktree)
	}
	return Preview{Commit: commit, Base: info.Base, Branch: info.Branch, Diff: diff}, nil
}

// Merge merges exactly commit — the one the reviewer approved — into the
// worktree's base branch: a fast-forward when possible, else a merge
// commit. It refuses when the worktree's branch has moved since, and
// reports conflicts without resolving anything.
func (m *Manager) Merge(ctx context.Context, worktree, commit string) (string, error) {
	info, err := m.Open(worktree)
	if err != nil {
		return "", err
	}
	rp, _ := m.repoPath(info.repo)
	head, err := git(ctx, rp, nil, "rev-parse", "--verify", "refs/heads/"+info.Branch+"^{commit}")
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(head) != commit {
		return "", refuse("branch %s has moved since the approval (now %s, approved %s): nothing merged", info.Branch, short(head), short(commit))
	}
	baseRef := "refs/heads/" + info.Base
	baseHead, err := git(ctx, rp, nil, "rev-parse", "--verify", baseRef+"^{commit}")
	if err != nil {
		return "", refuse("base branch %s is gone", info.Base)
	}
	baseHead = strings.TrimSpace(baseHead)
	checkedOut := false
	if cur, err := git(ctx, rp, nil, "symbolic-ref", "--quiet", "HEAD"); err == nil && strings.TrimSpace(cur) == baseRef {
		checkedOut = true
	}
	if checkedOut {
		// The base is checked out in the repository: merge there, so its
		// working tree follows. Local changes there stop the merge.
		if status, err := git(ctx, rp, nil, "status", "--porcelain", "--untracked-files=no"); err != nil || status != "" {
			return "", refuse("the base checkout in %s has uncommitted changes: nothing merged", info.repo)
		}
		if _, err := git(ctx, rp, nil, "merge", "--no-edit", "--no-verify", "-m", "Merge "+info.Branch+" (approved in Airlock)", commit); err != nil {
			conflicts, _ := git(ctx, rp, nil, "diff", "--name-only", "--diff-filter=U")
			_, _ = git(ctx, rp, nil, "merge", "--abort")
			if conflicts != "" {
				return "", refuse("merge conflict in: %s (nothing merged; resolve in the worktree and ask again)", strings.Join(strings.Fields(conflicts), ", "))
			}
			return "", err
		}
	} else {
		// Not checked out: move the ref without a working tree.
		newHead := commit
		if _, err := git(ctx, rp, nil, "merge-base", "--is-ancestor", baseHead, commit); err != nil {
			tree, err := git(ctx, rp, nil, "merge-tree", "--write-tree", "--no-messages", baseHead, commit)
			if err != nil {
				return "", refuse("merge conflict between %s and %s (nothing merged)", info.Base, info.Branch)
			}
			newHead, err = git(ctx, rp, nil, "commit-tree", strings.TrimSpace(strings.SplitN(tree, "\n", 2)[0]),
				"-p", baseHead, "-p", commit, "-m", "Merge "+info.Branch+" (approved in Airlock)")
			if err != nil {
				return "", err
			}
			newHead = strings.TrimSpace(newHead)
		}
		if _, err := git(ctx, rp, nil, "update-ref", "-m", "airlock merge", baseRef, newHead, baseHead); err != nil {
			return "", err
		}
	}
	merged, err := git(ctx, rp, nil, "rev-parse", baseRef)
	return strings.TrimSpace(merged), err
}

// Abandon removes the worktree, its branch and its record.
func (m *Manager) Abandon(ctx context.Context, worktree string) error {
	info, err := m.Open(worktree)
	if err != nil {
		return err
	}
	rp, _ := m.repoPath(info.repo)
	if _, err := git(ctx, rp, nil, "worktree", "remove", "--force", info.Path); err != nil {
		return err
	}
	if _, err := git(ctx, rp, nil, "branch", "-D", info.Branch); err != nil {
		return err
	}
	return os.Remove(info.Path + ".json")
}

func short(c string) string {
	c = strings.TrimSpace(c)
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// CommonDir returns the repository's git directory a worktree shares.
func (m *Manager) CommonDir(ctx context.Context, worktree string) (string, error) {
	info, err := m.Open(worktree)
	if err != nil {
		return "", err
	}
	return m.commonDir(ctx, info)
}

func (m *Manager) commonDir(ctx context.Context, info Info) (string, error) {
	rp, err := m.repoPath(info.repo)
	if err != nil {
		return "", err
	}
	dir, err := git(ctx, rp, nil, "rev-parse", "--path-format=absolute", "--git-common-dir")
	return strings.TrimSpace(dir), err
}

// worktreeGit returns a function running hardened git on the worktree's
// files. The worktree's .git file is an agent's to write (fs.write, a
// command in the sandbox), so git never looks for the repository there:
// GIT_DIR is the worktree's own directory in the repository's git
// directory (<common>/worktrees/<name>, found from the registered
// repository, and checked to belong to this worktree) and GIT_WORK_TREE
// the worktree. A .git replaced with "gitdir: <a repository the agent
// wrote>" lends no config, filter driver or hook to the worker.
func (m *Manager) worktreeGit(ctx context.Context, info Info) (func(ctx context.Context, args ...string) (string, error), error) {
	common, err := m.commonDir(ctx, info)
	if err != nil {
		return nil, err
	}
	gitDir := filepath.Join(common, "worktrees", filepath.Base(info.Path))
	// git worktree add records where the worktree's .git is; another name
	// (git made one up because this one was taken) is not this worktree.
	raw, err := os.ReadFile(filepath.Join(gitDir, "gitdir"))
	if err != nil {
		return nil, fmt.Errorf("worktree: %s is not registered in its repository: %w", info.Worktree, err)
	}
	recorded := strings.TrimSpace(string(raw))
	if !filepath.IsAbs(recorded) {
		recorded = filepath.Join(gitDir, recorded)
	}
	if !samePath(filepath.Dir(recorded), info.Path) {
		return nil, fmt.Errorf("worktree: %s is not registered in its repository (%s names %s)", info.Worktree, gitDir, recorded)
	}
	env := []string{"GIT_DIR=" + gitDir, "GIT_WORK_TREE=" + info.Path}
	return func(ctx context.Context, args ...string) (string, error) {
		return git(ctx, info.Path, env, args...)
	}, nil
}

// samePath reports whether a and b name the same directory, symlinks in
// their parents resolved (the worktree root may sit under one, e.g. /tmp).
func samePath(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	return errA == nil && errB == nil && ra == rb
}
