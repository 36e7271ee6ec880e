package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/pathrule"
	"github.com/airlockhq/airlock/internal/sandbox"
	"github.com/airlockhq/airlock/internal/worktree"
)

// DefaultExecTimeout applies when an exec call names no timeout_s.
const DefaultExecTimeout = 5 * time.Minute

// ExecArgs turns an exec action's args into a sandbox request for the
// workspace at root. It refuses malformed args.
func ExecArgs(args map[string]any, root string) (sandbox.ExecRequest, error) {
	req := sandbox.ExecRequest{Workspace: root, Timeout: DefaultExecTimeout}
	raw, ok := args["argv"].([]any)
	if !ok || len(raw) == 0 {
		return req, fmt.Errorf("args.argv must be a non-empty array of strings")
	}
	for _, v := range raw {
		s, ok := v.(string)
		if !ok {
			return req, fmt.Errorf("args.argv must hold only strings")
		}
		req.Argv = append(req.Argv, s)
	}
	if v, present := args["timeout_s"]; present {
		f, ok := v.(float64)
		if n, isNum := v.(json.Number); isNum { // args decoded at submit keep numbers exact
			var err error
			f, err = n.Float64()
			ok = err == nil
		}
		if !ok || f <= 0 || f > 86400 || f != math.Trunc(f) {
			return req, fmt.Errorf("args.timeout_s must be a whole number of seconds between 1 and 86400")
		}
		req.Timeout = time.Duration(f) * time.Second
	}
	if v, present := args["network"]; present {
		b, ok := v.(bool)
		if !ok {
			return req, fmt.Errorf("args.network must be true or false")
		}
		req.Network = b
	}
	if v, present := args["dir"]; present {
		s, ok := v.(string)
		if !ok {
			return req, fmt.Errorf("args.dir must be a string")
		}
		req.Dir = s
	}
	return req, nil
}

// SubmitValidator returns the check the server runs on built-in calls at
// submit: an exec the validators refuse is denied at once, with their
// reason. The server has no workspace files, so paths are checked
// lexically ("..", absolute paths); symlinks and hard links are checked
// again on the worker against the real workspace before anything runs.
// With served set, a call whose workspace or repository no worker serves
// is denied too (checked last: it may need a database read).
func SubmitValidator(pol sandbox.Policy, served *ServedTargets) func(ctx context.Context, tool string, args map[string]any) string {
	return func(ctx context.Context, tool string, args map[string]any) string {
		if why := hitl.FSPathProblem(tool, args); why != "" {
			return why
		}
		if tool == hitl.ToolExec {
			req, err := ExecArgs(args, "")
			if err != nil {
				return err.Error()
			}
			if err := sandbox.Validate(req, pol); err != nil {
				return err.Error()
			}
		}
		if served != nil {
			return served.Refuse(ctx, tool, args)
		}
		return ""
	}
}

// ExecOperands returns the check the server uses at submit to find the
// paths an exec call's command names (for deny_paths and read_only_paths),
// read by the same validators as SubmitValidator; false when they refuse
// the command.
func ExecOperands(pol sandbox.Policy) func(args map[string]any) ([]hitl.PathOperand, bool) {
	return func(args map[string]any) ([]hitl.PathOperand, bool) {
		req, err := ExecArgs(args, "")
		if err != nil {
			return nil, false
		}
		// A refused command still names the paths checked before the
		// refusal: the hard tier's reason comes first.
		ops, err := sandbox.Operands(req, pol)
		if err != nil && len(ops) == 0 {
			return nil, false
		}
		out := make([]hitl.PathOperand, len(ops))
		for i, op := range ops {
			out[i] = hitl.PathOperand{Path: op.Path, Write: op.Write}
		}
		return out, true
	}
}

// jobPaths are the deny and read-only entries a job's sandbox applies: the
// lease's, or the built-in ones when the server sent none (an older
// server); the built-in ones always.
func jobPaths(job *client.Job) (deny, readOnly []string) {
	deny = append(append([]string{}, pathrule.BuiltinDeny...), job.DenyPaths...)
	readOnly = append(append([]string{}, pathrule.BuiltinReadOnly...), job.ReadOnlyPaths...)
	return deny, readOnly
}

// SandboxExecutor runs exec jobs in bubblewrap in the named workspaces or
// in worktrees, and the worktree tools with hardened git.
type SandboxExecutor struct {
	Workspaces map[string]string
	// Worktrees serves the registered repositories (nil: none).
	Worktrees *worktree.Manager
	Policy    sandbox.Policy
	Options   sandbox.RunOptions
}

// Kinds implements Executor.
func (e *SandboxExecutor) Kinds() []string {
	kinds := []string{hitl.ToolExec, hitl.ToolFSWrite, hitl.ToolFSPatch, hitl.JobPreview}
	if e.Worktrees != nil && len(e.Worktrees.Repos) > 0 {
		kinds = append(kinds, hitl.JobExecPreview, hitl.ToolWorktreeCreate, hitl.ToolWorktreeDiff, hitl.ToolWorktreeMerge,
			hitl.ToolWorktreeAbandon, hitl.ToolWorktreeRun)
	}
	return kinds
}

// Run implements Executor. It validates again against the real workspace
// and fails closed: a refusal, a missing workspace or a sandbox that cannot
// be set up all end the job without running anything. Its output and error
// are text the server records (textResult), whatever bytes the command
// wrote.
func (e *SandboxExecutor) Run(ctx context.Context, job *client.Job) client.JobResult {
	return textResult(e.run(ctx, job))
}

// maxStream is the most of one output stream the server records (hitl's
// maxStreamBytes; the sandbox keeps as much by default).
const maxStream = 50 << 10

// textResult makes r's output and error text the server records as it is:
// its strict decoder (internal/jsonx) and PostgreSQL take only valid UTF-8
// without NUL. A byte that is not UTF-8 becomes U+FFFD and NUL becomes ␀
// (U+2400, as in a diff: worktree.VisibleDiff); every other character,
// control characters included, is kept as the command wrote it. Each
// replacement is three bytes, so a stream is then cut back to its last
// maxStream bytes, never inside a character, and marked Truncated.
func textResult(r client.JobResult) client.JobResult {
	var cutOut, cutErr bool
	r.Stdout, cutOut = tailText(visibleText(r.Stdout), maxStream)
	r.Stderr, cutErr = tailText(visibleText(r.Stderr), maxStream)
	r.Truncated = r.Truncated || cutOut || cutErr
	r.Error = visibleText(r.Error)
	return r
}

// visibleText is s with each byte that is not UTF-8 replaced by U+FFFD and
// each NUL by ␀ (textResult).
func visibleText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:]) // U+FFFD, n = 1, for a byte that is not UTF-8
		if r == 0 {
			r = 0x2400
		}
		b.WriteRune(r)
		i += n
	}
	return b.String()
}

// tailText is the last max bytes of s, starting on a character boundary,
// and whether anything was cut.
func tailText(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	n := len(s) - max
	for n < len(s) && !utf8.RuneStart(s[n]) {
		n++
	}
	return s[n:], true
}

// run is Run before its result is made text.
func (e *SandboxExecutor) run(ctx context.Context, job *client.Job) client.JobResult {
	fail := func(format string, args ...any) client.JobResult {
		return client.JobResult{ExitCode: -1, Error: fmt.Sprintf(format, args...)}
	}
	if job.Kind == hitl.ToolFSWrite || job.Kind == hitl.ToolFSPatch {
		r, err := e.runFS(ctx, job)
		if err != nil {
			return fail("%v", err)
		}
		return r
	}
	if job.Kind == hitl.JobExecPreview {
		return e.runExecPreview(ctx, job) // impact.go
	}
	if job.Kind != hitl.ToolExec {
		return e.runWorktree(ctx, job)
	}
	wt, _ := job.Args["worktree"].(string)
	if wt != "" && job.Pin != "" {
		return e.runPinnedExec(ctx, job, wt) // impact.go
	}
	var root string
	if wt != "" {
		if e.Worktrees == nil {
			return fail("this worker serves no repositories")
		}
		info, err := e.Worktrees.Open(wt)
		if err != nil {
			return fail("%v", err)
		}
		root = info.Path
	} else {
		name, _ := job.Args["workspace"].(string)
		var ok bool
		if root, ok = e.Workspaces[name]; !ok {
			return fail("workspace %q is not served by this worker", name)
		}
	}
	req, opts, err := e.execSetup(ctx, job, root, wt)
	if err != nil {
		return fail("%v", err)
	}
	res, err := sandbox.Run(ctx, req, opts)
	if err != nil {
		return fail("%v", err) // sandbox.Run's errors say "sandbox: …"
	}
	return resultOf(res)
}

// resultOf is what a sandboxed run reports. What the write-back left out
// (the workspace's deny_paths and read_only_paths cover it) is said at the
// end of stderr, so that the agent and the reviewer see that the run
// succeeded without it.
func resultOf(res sandbox.Result) client.JobResult {
	stderr := string(res.Stderr)
	if len(res.NotWrittenBack) > 0 {
		if stderr != "" && !strings.HasSuffix(stderr, "\n") {
			stderr += "\n"
		}
		stderr += "airlock: not written back (deny_paths or read_only_paths cover them): " + strings.Join(res.NotWrittenBack, ", ") + "\n"
	}
	return client.JobResult{ExitCode: res.ExitCode, Stdout: string(res.Stdout), Stderr: stderr,
		Truncated: res.Truncated, DurationMS: res.Duration.Milliseconds(), Error: res.Error}
}

// execSetup is an exec job's sandbox request and options for the files at
// root (the workspace, the worktree wt, or a copy of it), validated again
// against them: a refusal says "refused: …".
func (e *SandboxExecutor) execSetup(ctx context.Context, job *client.Job, root, wt string) (sandbox.ExecRequest, sandbox.RunOptions, error) {
	opts := e.Options
	pol := e.Policy
	if wt != "" {
		// git inside the sandbox reads the repository's object store
		// through the worktree's .git file: visible, read-only.
		if common, err := e.Worktrees.CommonDir(ctx, wt); err == nil {
			opts.ExtraBinds = append(slices.Clip(opts.ExtraBinds), sandbox.Bind{Source: common, Dest: common})
			pol = pol.Clone()
			pol.GitDirs = append(pol.GitDirs, common)
		}
	}
	req, err := ExecArgs(job.Args, root)
	if err != nil {
		return req, opts, err
	}
	if err := sandbox.Validate(req, pol); err != nil {
		return req, opts, fmt.Errorf("refused: %w", err)
	}
	opts.DenyPaths, opts.ReadOnlyPaths = jobPaths(job)
	if err := sandbox.CheckPaths(req, pol, opts.DenyPaths, opts.ReadOnlyPaths); err != nil {
		return req, opts, fmt.Errorf("refused: %w", err)
	}
	return req, opts, nil
}

// runWorktree runs the worktree tools and the merge preview.
func (e *SandboxExecutor) runWorktree(ctx context.Context, job *client.Job) client.JobResult {
	fail := func(err error) client.JobResult { return client.JobResult{ExitCode: -1, Error: err.Error()} }
	if e.Worktrees == nil {
		return fail(fmt.Errorf("this worker does not run %s", job.Kind))
	}
	start := time.Now()
	str := func(k string) string { s, _ := job.Args[k].(string); return s }
	var r client.JobResult
	switch job.Kind {
	case hitl.ToolWorktreeCreate:
		info, err := e.Worktrees.Create(ctx, str("repo"), str("base"))
		if err != nil {
			return fail(err)
		}
		r = client.JobResult{Worktree: info.Worktree, Branch: info.Branch, Base: info.Base}
	case hitl.ToolWorktreeDiff:
		diff, err := e.Worktrees.Diff(ctx, str("worktree"))
		if err != nil {
			return fail(err)
		}
		r = client.JobResult{Diff: diff}
	case hitl.JobPreview:
		if job.Tool == hitl.ToolWorktreeRun || job.Tool == hitl.ToolFSWrite || job.Tool == hitl.ToolFSPatch {
			// A pending worktree.run: the command set the reviewer
			// approves; a pending fs.write or fs.patch: the diff it makes.
			pr, err := e.preview(ctx, job)
			if err != nil {
				return fail(err)
			}
			r = pr
			break
		}
		p, err := e.Worktrees.Prepare(ctx, str("worktree"), job.AgentID)
		if err != nil {
			return fail(err)
		}
		if len(p.Diff) > 512<<10 {
			// A reviewer must see all of what a merge takes.
			return fail(fmt.Errorf("the diff is %d KiB, over the 512 KiB a reviewer can be shown: split the change", len(p.Diff)>>10))
		}
		r = client.JobResult{Commit: p.Commit, Base: p.Base, Branch: p.Branch, Diff: p.Diff}
	case hitl.ToolWorktreeMerge:
		if job.Pin == "" {
			return fail(fmt.Errorf("a merge without an approved commit is refused"))
		}
		commit, err := e.Worktrees.Merge(ctx, str("worktree"), job.Pin)
		if err != nil {
			return fail(err)
		}
		r = client.JobResult{Commit: commit}
	case hitl.ToolWorktreeRun:
		res, err := e.runCommand(ctx, job)
		if err != nil {
			return fail(err)
		}
		return res
	case hitl.ToolWorktreeAbandon:
		if err := e.Worktrees.Abandon(ctx, str("worktree")); err != nil {
			return fail(err)
		}
	default:
		return fail(fmt.Errorf("this worker does not run %s", job.Kind))
	}
	r.Diff, r.Truncated = capDiff(r.Diff, r.Truncated)
	r.DurationMS = time.Since(start).Milliseconds()
	return r
}

// maxDiff is the most of a diff a job result carries.
const maxDiff = 512 << 10

// capDiff cuts diff to maxDiff bytes, never inside a character, and says
// whether it (or an earlier cut) was truncated.
func capDiff(diff string, truncated bool) (string, bool) {
	if len(diff) <= maxDiff {
		return diff, truncated
	}
	n := maxDiff
	for n > 0 && !utf8.RuneStart(diff[n]) {
		n--
	}
	return diff[:n], true
}
