package worker

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/pathrule"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/worktree"
)

// MaxWriteBytes bounds the content of one fs.write and the patch of one
// fs.patch.
const MaxWriteBytes = 4 << 20

// readCommands reads the worktree's command set: the bytes of
// hitl.CommandsFile (never through a symlink), its hash and its commands.
func (e *SandboxExecutor) readCommands(wt string) (content []byte, hash string, cmds []hitl.Command, root string, err error) {
	info, err := e.Worktrees.Open(wt)
	if err != nil {
		return nil, "", nil, "", err
	}
	content, err = worktree.ReadFile(info.Path, hitl.CommandsFile, hitl.MaxCommandsBytes)
	if err != nil {
		return nil, "", nil, "", fmt.Errorf("the repository declares no commands here (%s): %w", hitl.CommandsFile, err)
	}
	cmds, err = hitl.ParseCommands(content)
	if err != nil {
		return nil, "", nil, "", err
	}
	return content, hitl.CommandsHash(content), cmds, info.Path, nil
}

// previewCommands is the preview of a pending worktree.run: the command set
// it would run under (Commit: its hash; Diff: the file, every command).
func (e *SandboxExecutor) previewCommands(job *client.Job) (client.JobResult, error) {
	wt, _ := job.Args["worktree"].(string)
	name, _ := job.Args["command"].(string)
	content, hash, cmds, _, err := e.readCommands(wt)
	if err != nil {
		return client.JobResult{}, err
	}
	if !hasCommand(cmds, name) {
		return client.JobResult{}, fmt.Errorf("%s declares no command %q", hitl.CommandsFile, name)
	}
	return client.JobResult{Commit: hash, Diff: string(content)}, nil
}

func hasCommand(cmds []hitl.Command, name string) bool {
	_, ok := commandLine(cmds, name)
	return ok
}

func commandLine(cmds []hitl.Command, name string) (string, bool) {
	for _, c := range cmds {
		if c.Name == name {
			return c.Run, true
		}
	}
	return "", false
}

// runCommand runs an approved worktree.run: the command set must still be
// the one approved (job.Pin, its hash), read again now. The command runs
// as `sh -c LINE` in the worktree's sandbox: the exec allowlist does not
// apply (a reviewer approved this exact line), the sandbox does
// (bubblewrap, no network, quotas, deny and read-only paths).
func (e *SandboxExecutor) runCommand(ctx context.Context, job *client.Job) (client.JobResult, error) {
	wt, _ := job.Args["worktree"].(string)
	name, _ := job.Args["command"].(string)
	_, hash, cmds, root, err := e.readCommands(wt)
	if err != nil {
		return client.JobResult{}, err
	}
	if job.Pin == "" || hash != job.Pin {
		return client.JobResult{}, fmt.Errorf("%s changed since its command set was approved: run again to have the new one reviewed", hitl.CommandsFile)
	}
	line, ok := commandLine(cmds, name)
	if !ok {
		return client.JobResult{}, fmt.Errorf("%s declares no command %q", hitl.CommandsFile, name)
	}
	opts := e.Options
	if common, err := e.Worktrees.CommonDir(ctx, wt); err == nil {
		opts.ExtraBinds = append(opts.ExtraBinds, sandbox.Bind{Source: common, Dest: common})
	}
	opts.DenyPaths, opts.ReadOnlyPaths = jobPaths(job)
	req := sandbox.ExecRequest{Argv: []string{"sh", "-c", line}, Workspace: root, Timeout: DefaultExecTimeout}
	res, err := sandbox.Run(ctx, req, opts)
	if err != nil {
		return client.JobResult{}, err
	}
	return resultOf(res), nil
}

// fsRoot returns the directory an fs.write or fs.patch works in.
func (e *SandboxExecutor) fsRoot(job *client.Job) (string, error) {
	if wt, _ := job.Args["worktree"].(string); wt != "" {
		if e.Worktrees == nil {
			return "", fmt.Errorf("this worker serves no repositories")
		}
		info, err := e.Worktrees.Open(wt)
		if err != nil {
			return "", err
		}
		return info.Path, nil
	}
	name, _ := job.Args["workspace"].(string)
	root, ok := e.Workspaces[name]
	if !ok {
		return "", fmt.Errorf("workspace %q is not served by this worker", name)
	}
	return root, nil
}

// checkFSPath refuses a path an fs tool must not read or write: outside
// the root (absolute, or climbing out with ".."), covered by a deny or
// read-only entry (.git metadata always), as the sandbox reads the entries
// (by the path in the workspace and by the host path under root), or
// going through a symlink in the root. The rules judge the path's name;
// a symlink would take the read or write to another name (a -> .git,
// s -> .env), so fs tools never follow one, into the root or out of it.
// (The reads and writes themselves open every component without following
// a symlink too, so one swapped in after this check fails them.)
func checkFSPath(job *client.Job, root, p string) (string, error) {
	if p == "" || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("refused: empty path or NUL byte")
	}
	if path.IsAbs(p) || filepath.IsAbs(p) {
		return "", fmt.Errorf("refused: %q is absolute; paths are relative to the workspace or worktree", p)
	}
	clean := path.Clean(p)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("refused: %q is not a file inside the workspace or worktree", p)
	}
	deny, readOnly := jobPaths(job)
	home, _ := os.UserHomeDir()
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real // host paths as the sandbox's scan reads them
	}
	if e, hit := pathrule.Compile(home, deny).MatchFile(root, clean); hit {
		return "", fmt.Errorf("refused: %q is covered by deny_paths entry %q", p, e)
	}
	if e, hit := pathrule.Compile(home, readOnly).MatchFile(root, clean); hit {
		return "", fmt.Errorf("refused: %q is covered by read_only_paths entry %q", p, e)
	}
	if err := worktree.CheckNoSymlink(root, clean); err != nil {
		return "", fmt.Errorf("refused: %w", err)
	}
	return clean, nil
}

// MaxPatchedBytes bounds the files one fs.patch reads to apply to (all
// of them together).
const MaxPatchedBytes = 64 << 20

// fsFiles checks (checkFSPath) and reads, never through a symlink, the
// files an fs.write (its path) or fs.patch (every path hitl.PatchPaths
// names) of tool touches under root: the state its preview shows the diff
// against, which the approval pins (their Digest) and the approved run
// checks again (checkPin). An fs.write reads at most MaxWriteBytes, an
// fs.patch MaxPatchedBytes.
func fsFiles(job *client.Job, tool, root string) (*worktree.Files, error) {
	var paths []string
	limit := int64(MaxWriteBytes)
	switch tool {
	case hitl.ToolFSWrite:
		p, _ := job.Args["path"].(string)
		paths = []string{p}
	case hitl.ToolFSPatch:
		patch, _ := job.Args["patch"].(string)
		if len(patch) > MaxWriteBytes {
			return nil, fmt.Errorf("args.patch is over %d MiB", MaxWriteBytes>>20)
		}
		if paths = hitl.PatchPaths(patch); len(paths) == 0 {
			return nil, fmt.Errorf("args.patch names no file")
		}
		limit = MaxPatchedBytes
	default:
		return nil, fmt.Errorf("%s changes no files", tool)
	}
	clean := make([]string, 0, len(paths))
	for _, p := range paths {
		c, err := checkFSPath(job, root, p)
		if err != nil {
			return nil, err
		}
		clean = append(clean, c)
	}
	return worktree.ReadFiles(root, clean, limit)
}

// checkPin refuses the approved run of an fs.write or fs.patch whose
// files are no longer in the state the reviewer saw its diff against:
// job.Pin is their Digest as the preview read them (hitl's fsPin). A job
// without a pin (the policy allowed the call: no preview, no reviewer)
// is not checked.
func checkPin(job *client.Job, files *worktree.Files) error {
	if job.Pin == "" || files.Digest() == job.Pin {
		return nil
	}
	what := strings.Join(files.Paths(), ", ")
	if len(files.Paths()) > 1 {
		what = "one of " + what
	}
	return fmt.Errorf("refused: %s changed since the reviewer saw its diff: submit again", what)
}

// runFS runs fs.write and fs.patch. No symlink is followed (checkFSPath,
// worktree.ReadFiles and WriteFile; a patch applies to copies of the
// files read, written back the same way), and ".." cannot climb out of
// the root. An approved call runs only on the files its preview read
// (checkPin).
func (e *SandboxExecutor) runFS(ctx context.Context, job *client.Job) (client.JobResult, error) {
	start := time.Now()
	root, err := e.fsRoot(job)
	if err != nil {
		return client.JobResult{}, err
	}
	switch job.Kind {
	case hitl.ToolFSWrite:
		p, _ := job.Args["path"].(string)
		content, ok := job.Args["content"].(string)
		if !ok || len(content) > MaxWriteBytes {
			return client.JobResult{}, fmt.Errorf("args.content must be a string of at most %d MiB", MaxWriteBytes>>20)
		}
		clean, err := checkFSPath(job, root, p)
		if err != nil {
			return client.JobResult{}, err
		}
		if job.Pin != "" {
			files, err := fsFiles(job, hitl.ToolFSWrite, root)
			if err != nil {
				return client.JobResult{}, err
			}
			if err := checkPin(job, files); err != nil {
				return client.JobResult{}, err
			}
		}
		if err := worktree.WriteFile(root, clean, []byte(content)); err != nil {
			return client.JobResult{}, fmt.Errorf("refused: %w", err)
		}
		return client.JobResult{Stdout: fmt.Sprintf("wrote %d bytes to %s\n", len(content), clean), DurationMS: time.Since(start).Milliseconds()}, nil
	case hitl.ToolFSPatch:
		patch, _ := job.Args["patch"].(string)
		files, err := fsFiles(job, hitl.ToolFSPatch, root)
		if err != nil {
			return client.JobResult{}, err
		}
		if err := checkPin(job, files); err != nil {
			return client.JobResult{}, err
		}
		if err := files.ApplyPatch(ctx, patch); err != nil {
			return client.JobResult{}, err
		}
		return client.JobResult{Stdout: "patched " + strings.Join(hitl.PatchPaths(patch), ", ") + "\n", Diff: patch, DurationMS: time.Since(start).Milliseconds()}, nil
	}
	return client.JobResult{}, fmt.Errorf("this worker does not run %s", job.Kind)
}

// preview prepares the preview of a pending worktree.run (its command
// set), fs.write or fs.patch (the diff it would make, changing nothing).
func (e *SandboxExecutor) preview(ctx context.Context, job *client.Job) (client.JobResult, error) {
	switch job.Tool {
	case hitl.ToolWorktreeRun:
		if e.Worktrees == nil {
			return client.JobResult{}, fmt.Errorf("this worker serves no repositories")
		}
		return e.previewCommands(job)
	case hitl.ToolFSWrite, hitl.ToolFSPatch:
		// The diff against the files as read now, and (Commit) the digest
		// of their state, which the approval pins.
		root, err := e.fsRoot(job)
		if err != nil {
			return client.JobResult{}, err
		}
		files, err := fsFiles(job, job.Tool, root)
		if err != nil {
			return client.JobResult{}, err
		}
		var diff string
		if job.Tool == hitl.ToolFSWrite {
			p := files.Paths()[0]
			content, _ := job.Args["content"].(string)
			old, _ := files.Content(p) // nil: a new file
			if diff, err = worktree.DiffContent(ctx, p, old, []byte(content)); err != nil {
				return client.JobResult{}, err
			}
		} else {
			patch, _ := job.Args["patch"].(string)
			if err := files.CheckPatch(ctx, patch); err != nil { // the run's own apply, on copies
				return client.JobResult{}, err
			}
			diff = worktree.VisibleDiff(patch)
		}
		if len(diff) > maxDiff {
			// A reviewer must see all of what approving changes: a diff
			// cut to what a result carries would pin files whose change
			// was not shown whole.
			return client.JobResult{}, fmt.Errorf("the diff is %d KiB, over the %d KiB a reviewer can be shown: split the change", len(diff)>>10, maxDiff>>10)
		}
		return client.JobResult{Diff: diff, Commit: files.Digest()}, nil
	}
	return client.JobResult{}, fmt.Errorf("no preview for %s", job.Tool)
}
