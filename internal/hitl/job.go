package hitl

import (
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/airlockhq/airlock/internal/apperr"
)

// Built-in tools run on worker hosts, in a sandbox, once approved.
const (
	ToolExec            = "exec"
	ToolWorktreeCreate  = "worktree.create"
	ToolWorktreeDiff    = "worktree.diff"
	ToolWorktreeMerge   = "worktree.merge"
	ToolWorktreeAbandon = "worktree.abandon"

	// JobPreview is the job that prepares a pending merge's preview: the
	// worktree's changes committed (author: the agent) and the diff of
	// that commit against its base. It runs before any approval.
	JobPreview = "worktree.preview"

	// JobExecPreview is the job that prepares a pending exec's impact
	// preview (impact.go): the command run on a throwaway copy of its
	// worktree, the diff it made there and the worktree's state it ran
	// on. A kind of its own, so a worker that does not know it never
	// leases it (an older worker would prepare a merge preview instead).
	JobExecPreview = "exec.preview"
)

// IsJobKind reports whether a worker may ask for jobs of kind.
func IsJobKind(kind string) bool { return IsBuiltin(kind) || IsPreviewJob(kind) }

// PreviewJobKinds returns the kinds of job that prepare a pending
// action's preview (rather than run an approved action).
func PreviewJobKinds() []string { return []string{JobPreview, JobExecPreview} }

// IsPreviewJob reports whether kind is one of PreviewJobKinds.
func IsPreviewJob(kind string) bool { return slices.Contains(PreviewJobKinds(), kind) }

// IsBuiltin reports whether tool is executed by Airlock's workers rather
// than by the agent.
func IsBuiltin(tool string) bool {
	switch tool {
	case ToolExec, ToolWorktreeCreate, ToolWorktreeDiff, ToolWorktreeMerge, ToolWorktreeAbandon,
		ToolWorktreeRun, ToolFSWrite, ToolFSPatch:
		return true
	}
	return false
}

// MaxJobAttempts bounds the runs of a retryable built-in action.
const MaxJobAttempts = 3

// Job is the work a worker host leases for a built-in action.
type Job struct {
	ID       string
	ActionID string
	Kind     string // the tool, or JobPreview
	// Target names what the worker must serve: "workspace:<name>" or
	// "repo:<name>".
	Target      string
	MaxAttempts int
	// Pin is the commit the reviewer approved (merges), the command set
	// hash (worktree.run), the worktree state an exec's impact preview
	// ran on ("<head>:<tree>"), or the digest of the files an fs.write or
	// fs.patch touches as its preview read them.
	Pin string
}

// JobFor returns the job an approved built-in action needs, or nil for a
// tool the agent executes itself.
func JobFor(a *Action) *Job {
	if !IsBuiltin(a.Tool) {
		return nil
	}
	target, _ := TargetOf(a.Tool, a.Args)
	j := &Job{ID: uuid.Must(uuid.NewV7()).String(), ActionID: a.ID, Kind: a.Tool, Target: target, MaxAttempts: 1}
	if r, _ := a.Args["retryable"].(bool); r {
		j.MaxAttempts = MaxJobAttempts
	}
	return j
}

// WorktreeRepo returns the repository part of a worktree name
// ("<repo>/<name>").
func WorktreeRepo(worktree string) (string, bool) {
	repo, name, ok := strings.Cut(worktree, "/")
	return repo, ok && repo != "" && name != "" && !strings.Contains(name, "/")
}

// TargetOf says which workspace or repository a built-in call needs, and
// refuses calls that name none or name it badly.
func TargetOf(tool string, args map[string]any) (string, error) {
	str := func(k string) string { s, _ := args[k].(string); return s }
	switch tool {
	case ToolExec:
		ws, wt := str("workspace"), str("worktree")
		return rootTarget("exec", ws, wt)
	case ToolWorktreeCreate:
		repo := str("repo")
		if !validName(repo) {
			return "", apperr.Invalid("worktree.create needs args.repo, a repository name")
		}
		return "repo:" + repo, nil
	case ToolWorktreeRun:
		return runTarget(args)
	case ToolFSWrite, ToolFSPatch:
		return fsTarget(tool, args)
	case ToolWorktreeDiff, ToolWorktreeMerge, ToolWorktreeAbandon:
		repo, ok := WorktreeRepo(str("worktree"))
		if !ok || !validName(repo) {
			return "", apperr.Invalid("%s needs args.worktree, a name returned by worktree.create", tool)
		}
		return "repo:" + repo, nil
	}
	return "", nil
}

// WorktreeOf returns the worktree a built-in call names ("" for none):
// exec, fs.write and fs.patch with args.worktree and worktree.diff, .merge,
// .abandon and .run. Only the agent that created it may name it.
func WorktreeOf(tool string, args map[string]any) string {
	switch tool {
	case ToolExec, ToolWorktreeDiff, ToolWorktreeMerge, ToolWorktreeAbandon, ToolWorktreeRun, ToolFSWrite, ToolFSPatch:
		wt, _ := args["worktree"].(string)
		return wt
	}
	return ""
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return s != "." && s != ".."
}

// Lease is a worker's claim on a job. Fence increases with every lease of
// the same job: a worker holding an older fence can neither heartbeat nor
// complete, so two runs can never both record a result.
type Lease struct {
	ID        string         `json:"id"`
	ActionID  string         `json:"action_id"`
	Fence     int64          `json:"fence"`
	Kind      string         `json:"kind"`
	Target    string         `json:"target"`
	Args      map[string]any `json:"args"`
	Attempt   int            `json:"attempt"`
	ExpiresAt time.Time      `json:"lease_expires_at"`
	// TTLMillis is the lease's length: workers count it on their own clock.
	TTLMillis int64  `json:"lease_ttl_ms"`
	AgentID   string `json:"agent_id"`
	// Pin is the approved commit of a merge, the approved command set
	// hash of a worktree.run, the worktree state ("<head>:<tree>") the
	// approved exec's impact preview ran on, or the digest of the files
	// an approved fs.write or fs.patch touches as its preview read them.
	Pin string `json:"pin,omitempty"`
	// Tool is the action's tool: what a preview job (Kind JobPreview)
	// prepares the preview of.
	Tool string `json:"tool,omitempty"`
	// DenyPaths and ReadOnlyPaths are the agent's effective path entries
	// when the job was leased, for the sandbox (hardpaths.go).
	DenyPaths     []string `json:"deny_paths,omitempty"`
	ReadOnlyPaths []string `json:"read_only_paths,omitempty"`
}

// previewJob returns the job that prepares the preview of a pending merge.
func previewJob(a *Action) *Job {
	j := JobFor(a)
	j.Kind = JobPreview
	j.MaxAttempts = MaxJobAttempts // preparing a preview changes nothing the reviewer has seen
	return j
}

// Preview is what a reviewer sees before approving a merge, a
// worktree.run, an fs.write or fs.patch, or an exec in a worktree (its
// impact preview: impact.go).
type Preview struct {
	// Status is PreviewPreparing, PreviewReady or PreviewFailed.
	Status string `json:"status,omitempty"`
	// Commit is the commit a merge takes, the SHA-256 of a
	// worktree.run's command set, or the digest of the state of the files
	// an fs.write or fs.patch touches as the worker read them (no git
	// commit): what the approval pins.
	Commit string `json:"commit,omitempty"`
	Base   string `json:"base,omitempty"`
	Branch string `json:"branch,omitempty"`
	Diff   string `json:"diff,omitempty"`
	Error  string `json:"error,omitempty"`
	// Flags name what the diff holds that a reader could miss (control
	// bytes, bidi and invisible characters, risky commands); the server
	// computes them (risk.DiffFlags), and they join the action's risk.
	Flags []string `json:"flags,omitempty"`

	// The impact preview of an exec: the worktree's state the command ran
	// on (the approval pins it), and what the command did in the copy.
	State      *WorktreeState `json:"state,omitempty"`
	ExitCode   *int           `json:"exit_code,omitempty"`
	Stdout     string         `json:"stdout,omitempty"`
	Stderr     string         `json:"stderr,omitempty"`
	Truncated  bool           `json:"truncated,omitempty"`
	DurationMS int64          `json:"duration_ms,omitempty"`
	// Note says what the preview could not show (the network, which the
	// copy never has) or what Airlock withheld.
	Note string `json:"note,omitempty"`
}

// rootTarget is the target of a call that runs in a workspace or in a
// worktree (exactly one of them): workspace:NAME or repo:NAME.
func rootTarget(tool, ws, wt string) (string, error) {
	switch {
	case ws != "" && wt != "":
		return "", apperr.Invalid("%s takes args.workspace or args.worktree, not both", tool)
	case ws != "":
		if !validName(ws) {
			return "", apperr.Invalid("args.workspace must be a workspace name")
		}
		return "workspace:" + ws, nil
	case wt != "":
		repo, ok := WorktreeRepo(wt)
		if !ok || !validName(repo) {
			return "", apperr.Invalid("args.worktree must be a worktree name returned by worktree.create")
		}
		return "repo:" + repo, nil
	}
	return "", apperr.Invalid("%s needs args.workspace or args.worktree", tool)
}
