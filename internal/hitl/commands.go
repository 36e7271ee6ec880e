package hitl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/policy"
)

// The built-ins of the coding loop: lifecycle commands and file changes
// without a shell.
const (
	// ToolWorktreeRun runs one of the commands the repository declares in
	// CommandsFile inside the worktree's sandbox: {worktree, command}.
	ToolWorktreeRun = "worktree.run"
	// ToolFSWrite writes a file: {worktree|workspace, path, content}.
	ToolFSWrite = "fs.write"
	// ToolFSPatch applies a unified diff: {worktree|workspace, patch}.
	ToolFSPatch = "fs.patch"
)

// CommandsFile is where a repository declares its lifecycle commands, one
// "name: command line" a line (a YAML map of strings).
const CommandsFile = ".airlock/commands.yaml"

// MaxCommandsBytes bounds CommandsFile.
const MaxCommandsBytes = 64 << 10

// GateCommands is the Decision.Gate of a worktree.run the policy allowed:
// it runs only once the exact command set is approved for its repository.
const GateCommands = "commands"

// KindCommandsApproved is the audit event of a command set approved for a
// repository.
const KindCommandsApproved audit.Kind = "commands.approved"

// Command is one lifecycle command.
type Command struct {
	Name string `json:"name"`
	Run  string `json:"run"`
}

// ParseCommands reads the content of CommandsFile: a map of command names
// to command lines, returned sorted by name. Anything else is refused.
func ParseCommands(content []byte) ([]Command, error) {
	if len(content) > MaxCommandsBytes {
		return nil, fmt.Errorf("%s is over %d KiB", CommandsFile, MaxCommandsBytes>>10)
	}
	var m map[string]string
	if err := yaml.Unmarshal(content, &m); err != nil {
		return nil, fmt.Errorf("%s must map command names to command lines: %w", CommandsFile, err)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("%s declares no command", CommandsFile)
	}
	out := make([]Command, 0, len(m))
	for name, run := range m {
		if !validName(name) {
			return nil, fmt.Errorf("%s: command name %q must be 1-64 letters, digits, . _ -", CommandsFile, name)
		}
		if strings.TrimSpace(run) == "" || strings.ContainsRune(run, 0) {
			return nil, fmt.Errorf("%s: command %q is empty or holds a NUL byte", CommandsFile, name)
		}
		out = append(out, Command{Name: name, Run: run})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// CommandsHash identifies a command set: the SHA-256 of the file's bytes,
// in hex. Any change to the file is another command set.
func CommandsHash(content []byte) string {
	h := sha256.Sum256(content)
	return hex.EncodeToString(h[:])
}

// CommandSetApproval records that a reviewer approved the exact command
// set (Hash, the file's content) of a repository: every worktree.run of
// that repository whose file has this hash runs without asking again.
type CommandSetApproval struct {
	Repo       string    `json:"repo"`
	Hash       string    `json:"hash"`
	Content    string    `json:"content"`
	ApprovedBy string    `json:"approved_by"`
	ActionID   string    `json:"action_id"`
	ApprovedAt time.Time `json:"approved_at"`
}

// CommandSetStore persists command set approvals.
type CommandSetStore interface {
	// CommandSetApproval returns the approval of repo's command set hash,
	// or nil when there is none.
	CommandSetApproval(ctx context.Context, repo, hash string) (*CommandSetApproval, error)
}

// The preview of a worktree.run reuses Preview: Commit carries the command
// set's hash and Diff the content of CommandsFile, so that the reviewer
// sees every command before approving.

// HasPreview reports whether a pending call of tool gets a preview job:
// a merge (the commit and its diff), a worktree.run (the command set), an
// fs.write or fs.patch (the diff it makes).
func HasPreview(tool string) bool {
	switch tool {
	case ToolWorktreeMerge, ToolWorktreeRun, ToolFSWrite, ToolFSPatch:
		return true
	}
	return false
}

// runPin returns the command set hash a worktree.run approval pins, and
// the approval to record: the one in the preview the reviewer saw.
func runPin(a *Action, reviewer string, now time.Time) (string, *CommandSetApproval, error) {
	var p Preview
	if len(a.Preview) == 0 || json.Unmarshal(a.Preview, &p) != nil {
		return "", nil, apperr.Conflict("the command set is not read yet; a reviewer must see every command before approving")
	}
	if p.Error != "" || len(p.Commit) != 64 {
		return "", nil, apperr.Conflict("reading the command set failed (%s); deny this run", p.Error)
	}
	repo, _ := WorktreeRepo(WorktreeOf(a.Tool, a.Args))
	return p.Commit, &CommandSetApproval{Repo: repo, Hash: p.Commit, Content: p.Diff, ApprovedBy: reviewer,
		ActionID: a.ID, ApprovedAt: now}, nil
}

// commandSetEvent is the audit event of an approved command set.
func commandSetEvent(a *Action, c *CommandSetApproval) audit.Event {
	return a.AuditEvent(KindCommandsApproved, c.ApprovedBy, map[string]any{
		"repo": c.Repo, "hash": c.Hash, "commands": c.Content})
}

// gateRun makes a worktree.run the policy allowed wait for its command set:
// pending until the preview shows a command set approved for the
// repository (or a reviewer approves it).
func gateRun(a *Action, d *policy.Decision, settings policy.EffectiveSettings) {
	if a.Tool != ToolWorktreeRun || d.Effect != policy.Allow {
		return
	}
	d.Effect = policy.Approve
	d.Approvals = max(d.Approvals, 1)
	if d.Timeout <= 0 {
		d.Timeout = settings.DefaultTimeout
	}
	a.Decision.Effect = string(policy.Approve)
	a.Decision.Gate = GateCommands
	a.Decision.Reason += "; worktree.run runs only a command set (" + CommandsFile + ") a reviewer approved for the repository"
}

// approveByCommandSet approves a gated worktree.run whose preview shows a
// command set already approved for its repository. It is a no-op for any
// other action, or when the command set is not approved: the run stays
// pending with the command set shown.
func (s *Service) approveByCommandSet(ctx context.Context, a *Action) (*Action, error) {
	if a.Tool != ToolWorktreeRun || a.Decision.Gate != GateCommands || a.Status != StatusPending || len(a.Approvals) > 0 {
		return a, nil
	}
	var p Preview
	if json.Unmarshal(a.Preview, &p) != nil || p.Error != "" || len(p.Commit) != 64 {
		return a, nil
	}
	repo, _ := WorktreeRepo(WorktreeOf(a.Tool, a.Args))
	approval, err := s.store.CommandSetApproval(ctx, repo, p.Commit)
	if err != nil || approval == nil {
		return a, err
	}
	out, err := s.mutate(ctx, a.ID, func(a *Action, now time.Time) (*change, error) {
		if a.Status != StatusPending || len(a.Approvals) > 0 {
			return nil, notPending(a)
		}
		var cur Preview
		if json.Unmarshal(a.Preview, &cur) != nil || cur.Commit != approval.Hash {
			return nil, notPending(a)
		}
		a.Status = StatusApproved
		a.Decision = Decision{Effect: string(policy.Allow), By: "policy", RuleID: a.Decision.RuleID,
			PolicyVersion: a.Decision.PolicyVersion, Source: "commands", Gate: GateCommands,
			Reason: fmt.Sprintf("command set %s of repository %s approved by %s (action %s)", short(approval.Hash), repo, approval.ApprovedBy, approval.ActionID)}
		job := JobFor(a)
		job.Pin = approval.Hash
		return &change{fx: Effects{Job: job, NotInPlanMode: true}, events: []audit.Event{a.AuditEvent(audit.KindActionApproved, "system",
			map[string]any{"commands_hash": approval.Hash, "commands_approved_by": approval.ApprovedBy, "commands_action": approval.ActionID})}}, nil
	})
	if err != nil && (apperr.CodeOf(err) == apperr.CodeConflict || errors.Is(err, ErrPlanMode)) {
		return s.store.Action(ctx, a.ID) // decided meanwhile, or plan mode: it stays as it is
	}
	return out, err
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// PatchPaths returns the paths a unified diff touches (both sides of a
// rename), as its ---/+++ and rename headers name them, without the a/ and
// b/ prefixes; /dev/null is left out.
func PatchPaths(patch string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		p = strings.TrimSpace(p)
		if i := strings.IndexByte(p, '\t'); i >= 0 {
			p = p[:i]
		}
		if p == "" || p == "/dev/null" {
			return
		}
		if strings.HasPrefix(p, "a/") || strings.HasPrefix(p, "b/") {
			p = p[2:]
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for line := range strings.SplitSeq(patch, "\n") {
		switch {
		case strings.HasPrefix(line, "--- "):
			add(line[4:])
		case strings.HasPrefix(line, "+++ "):
			add(line[4:])
		case strings.HasPrefix(line, "rename from "):
			add("a/" + line[len("rename from "):])
		case strings.HasPrefix(line, "rename to "):
			add("b/" + line[len("rename to "):])
		case strings.HasPrefix(line, "diff --git "):
			f := strings.Fields(line[len("diff --git "):])
			for _, p := range f {
				add(p)
			}
		}
	}
	return out
}

// checkPatch runs the hard path tier on every path an fs.patch touches, as
// for an fs.write of each.
func (h *hardPaths) checkPatch(args map[string]any, settings policy.EffectiveSettings) *hardPathMatch {
	patch, _ := args["patch"].(string)
	for _, p := range PatchPaths(patch) {
		if m := h.check(ToolFSWrite, map[string]any{"path": p}, settings); m != nil {
			m.reason = strings.Replace(m.reason, "args.path", "the patch", 1)
			return m
		}
	}
	return nil
}

// fsTarget is TargetOf for fs.write and fs.patch.
func fsTarget(tool string, args map[string]any) (string, error) {
	str := func(k string) (string, bool) { s, ok := args[k].(string); return s, ok }
	switch tool {
	case ToolFSWrite:
		if p, _ := str("path"); p == "" {
			return "", apperr.Invalid("fs.write needs args.path, a path relative to the workspace or worktree")
		}
		if _, ok := str("content"); !ok {
			return "", apperr.Invalid("fs.write needs args.content, a string")
		}
	case ToolFSPatch:
		p, _ := str("patch")
		if len(PatchPaths(p)) == 0 {
			return "", apperr.Invalid("fs.patch needs args.patch, a unified diff naming the files it changes")
		}
	}
	ws, _ := str("workspace")
	wt, _ := str("worktree")
	return rootTarget(tool, ws, wt)
}

// FSPathProblem says why an fs.write or fs.patch must not run because a
// path it names is not a file inside its workspace or worktree (absolute,
// "~", climbing out with ".."), or "". The submit validator denies such a
// call, as it denies an exec naming such a path; the worker checks again.
func FSPathProblem(tool string, args map[string]any) string {
	var paths []string
	switch tool {
	case ToolFSWrite:
		p, _ := args["path"].(string)
		paths = []string{p}
	case ToolFSPatch:
		p, _ := args["patch"].(string)
		paths = PatchPaths(p)
	}
	for _, p := range paths {
		if !insideRoot(p) {
			return fmt.Sprintf("%s names %q: paths must be files inside the workspace or worktree (relative, not climbing out with ..)", tool, p)
		}
	}
	return ""
}

// insideRoot reports whether p names a file under a root: relative, not
// climbing out with "..", not the root itself, no NUL byte.
func insideRoot(p string) bool {
	if strings.ContainsRune(p, 0) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") || strings.Contains(p, "\\") {
		return false
	}
	c := path.Clean(p)
	return c != "." && c != ".." && !strings.HasPrefix(c, "../")
}

// runTarget is TargetOf for worktree.run.
func runTarget(args map[string]any) (string, error) {
	wt, _ := args["worktree"].(string)
	repo, ok := WorktreeRepo(wt)
	if !ok || !validName(repo) {
		return "", apperr.Invalid("worktree.run needs args.worktree, a name returned by worktree.create")
	}
	if c, _ := args["command"].(string); !validName(c) {
		return "", apperr.Invalid("worktree.run needs args.command, the name of a command in %s", CommandsFile)
	}
	return "repo:" + repo, nil
}
