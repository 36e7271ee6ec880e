package hitl

import (
	"encoding/json"
	"strings"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/risk"
)

// Impact preview of an exec (DESIGN.md "Sandboxes"; README "Impact
// preview"). A pending exec in a worktree (settings.exec_preview, on by
// default) is first run by a worker on a throwaway copy of the worktree,
// in the same sandbox with no network and the same limits; the diff it
// made there, its exit code and output, and the worktree's state it ran on
// (HEAD and the tree id of every file) become the action's preview. A
// reviewer can approve only a ready preview; the approval pins the state,
// and the worker refuses the real run (the job fails, with the reason, in
// the result and its audit event) when the worktree is no longer in it.
// A preview that failed (the copy or the sandbox could not be set up, the
// command timed out or went over its quota in the copy, the worker was lost
// three times) leaves the action pending with the failure shown: it can
// only be denied, or expire; the agent may submit the command again.

// GatePreview is the Decision.Gate of a pending exec that waits for its
// impact preview before a reviewer can approve it.
const GatePreview = "preview"

// Preview statuses.
const (
	PreviewPreparing = "preparing"
	PreviewReady     = "ready"
	PreviewFailed    = "failed"
)

// WorktreeState is the state of a worktree an exec's impact preview ran
// on: its HEAD commit and the git tree id of every file in it (committed
// or not, untracked and ignored files included, .git left out).
type WorktreeState struct {
	Head string `json:"head"`
	Tree string `json:"tree"`
}

// Pin is the state as the approval pins it: "<head>:<tree>".
func (s WorktreeState) Pin() string { return s.Head + ":" + s.Tree }

// networkNote is the preview's note for an exec that asked for the network.
const networkNote = "the command asked for the network; the preview ran without it, so what it would do over the network is not shown"

// wantsExecPreview reports whether a pending action gets an impact
// preview: an exec in a worktree, with settings.exec_preview on.
func wantsExecPreview(a *Action, settings policy.EffectiveSettings) bool {
	return a.Tool == ToolExec && settings.ExecPreview && WorktreeOf(a.Tool, a.Args) != ""
}

// execPreviewJob returns the job that prepares a pending exec's impact
// preview. It may run again when its worker is lost: it changes nothing
// but a copy.
func execPreviewJob(a *Action) *Job {
	j := JobFor(a)
	j.Kind = JobExecPreview
	j.MaxAttempts = MaxJobAttempts
	return j
}

// previewStop is the stop reason for the preview job of a pending action
// that is being decided without it (a deny, the agent's cancel): a preview
// still running is stopped on its worker's next heartbeat instead of
// holding a worker slot for a command nobody will approve. "" when the
// action has no preview job.
func previewStop(a *Action, why string) string {
	if a.Status == StatusPending && (HasPreview(a.Tool) || a.Decision.Gate == GatePreview) {
		return why
	}
	return ""
}

// execPin returns the worktree state an exec's approval pins, or "" for an
// action that waits for no impact preview. Without a ready preview the
// exec cannot be approved.
func execPin(a *Action) (string, error) {
	if a.Tool != ToolExec || a.Decision.Gate != GatePreview {
		return "", nil
	}
	var p Preview
	if len(a.Preview) == 0 || json.Unmarshal(a.Preview, &p) != nil {
		return "", apperr.Conflict("the impact preview is not ready yet; a reviewer must see what the command changes before approving")
	}
	if p.Error != "" || p.State == nil || !isCommit(p.State.Head) || !isCommit(p.State.Tree) {
		return "", apperr.Conflict("the impact preview failed (%s); this exec can only be denied: the agent may submit it again", p.Error)
	}
	return p.State.Pin(), nil
}

// previewOf is the preview a finished preview job's result makes. A
// result with a tree is an exec's impact preview: its commit is the
// worktree's HEAD, and its exit code and output are what the command did
// in the copy.
func previewOf(r JobResult) Preview {
	p := Preview{Status: PreviewReady, Commit: r.Commit, Base: r.Base, Branch: r.Branch, Diff: r.Diff, Error: r.Error,
		Flags: risk.DiffFlags(r.Diff).Reasons}
	if r.Error != "" {
		p.Status = PreviewFailed
	}
	if r.Tree != "" {
		code := r.ExitCode
		p.State, p.Commit = &WorktreeState{Head: r.Commit, Tree: r.Tree}, ""
		p.ExitCode, p.Stdout, p.Stderr, p.Truncated, p.DurationMS = &code, r.Stdout, r.Stderr, r.Truncated, r.DurationMS
	}
	return p
}

// previewExpected reports whether a's impact preview is on its way: a
// pending exec waiting for it. (The other previews keep their contract:
// no preview until it is prepared.)
func (a *Action) previewExpected() bool {
	return a.Status == StatusPending && a.Decision.Gate == GatePreview
}

// PreviewStatus returns PreviewPreparing, PreviewReady or PreviewFailed
// for an action with a preview (or an impact preview on its way), else "".
func (a *Action) PreviewStatus() string {
	if len(a.Preview) == 0 {
		if a.previewExpected() {
			return PreviewPreparing
		}
		return ""
	}
	var p Preview
	if json.Unmarshal(a.Preview, &p) != nil {
		return PreviewFailed
	}
	switch {
	case p.Status != "":
		return p.Status
	case p.Error != "":
		return PreviewFailed
	}
	return PreviewReady
}

// withPreviewStatus returns a's view with its preview's status: an impact
// preview on its way shows as {"status":"preparing"}, one stored before statuses
// were recorded gets the status it has; an exec's impact preview of a
// command that asked for the network says that the copy had none.
func (a Action) withPreviewStatus() Action {
	if len(a.Preview) == 0 {
		if a.previewExpected() {
			a.Preview = json.RawMessage(`{"status":"` + PreviewPreparing + `"}`)
		}
		return a
	}
	network, _ := a.Args["network"].(bool)
	network = network && a.Tool == ToolExec
	if !network && strings.Contains(string(a.Preview), `"status"`) {
		return a
	}
	var p Preview
	if json.Unmarshal(a.Preview, &p) != nil {
		return a
	}
	p.Status = a.PreviewStatus()
	if network && p.State != nil {
		p.Note = networkNote
	}
	if b, err := json.Marshal(p); err == nil {
		a.Preview = b
	}
	return a
}

// ForAuditor returns the view of a for auditors (and anyone but reviewers
// and the agent): a as stored, with its preview's status.
func (a Action) ForAuditor() Action { return a.withPreviewStatus() }

// ForAgent returns the view of a for the agent that submitted it. An
// exec's impact preview keeps only its status, state and note: what the
// command printed, changed or exited with in the copy is for reviewers,
// since the command itself was not approved (a preview of `cat secret`
// must not hand the agent the secret).
func (a Action) ForAgent() Action {
	a = a.withPreviewStatus()
	if a.Tool != ToolExec || len(a.Preview) == 0 {
		return a
	}
	var p Preview
	if json.Unmarshal(a.Preview, &p) != nil {
		a.Preview = nil
		return a
	}
	b, err := json.Marshal(Preview{Status: p.Status, State: p.State, Note: p.Note})
	if err != nil {
		b = nil // fail closed: nothing rather than everything
	}
	a.Preview = b
	return a
}
