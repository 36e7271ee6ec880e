package hitl

import (
	"context"

	"github.com/airlockhq/airlock/internal/risk"
	"github.com/airlockhq/airlock/internal/sandbox"
)

// JobResultView is a job's result as the action stores it: what the
// worker reported, with what the server found in it.
type JobResultView struct {
	JobResult
	// Injection is the graded prompt-injection finding of stdout, stderr,
	// diff and error, when it reaches the caution threshold. At refuse the
	// output is withheld: Stdout, Stderr, Diff and Error are empty and
	// Note says why.
	Injection *ResultInjection `json:"injection,omitempty"`
	// Note says what Airlock withheld.
	Note string `json:"note,omitempty"`
	// SandboxHint, on a failed run whose output shows a permission error,
	// says that the sandbox may be the cause (sandbox.PermissionHint).
	SandboxHint string `json:"sandbox_hint,omitempty"`
}

// jobResultView scans what a job's output would bring into the agent's
// context (stdout, stderr, a worktree.diff's diff and error) under the
// agent's settings and adds the sandbox hint of a failed run. (A preview's
// diff, for the reviewer, is stored apart: previewOf.)
func (s *Service) jobResultView(ctx context.Context, jobID string, r JobResult) (JobResultView, error) {
	v := JobResultView{JobResult: r, SandboxHint: sandbox.PermissionHint(r.ExitCode, r.Stdout, r.Stderr)}
	if r.Error != "" && v.SandboxHint == "" {
		v.SandboxHint = sandbox.PermissionHint(1, r.Error, "")
	}
	if r.Stdout == "" && r.Stderr == "" && r.Diff == "" && r.Error == "" {
		return v, nil
	}
	findings := risk.ScanResult([]any{r.Stdout, r.Stderr, r.Diff}, r.Error)
	if len(findings) == 0 {
		return v, nil
	}
	agentID, err := s.store.JobAgent(ctx, jobID)
	if err != nil {
		return v, err
	}
	inj, err := s.gradeInjection(ctx, agentID, findings)
	if err != nil || inj == nil {
		return v, err
	}
	v.Injection = inj
	if inj.Withheld() {
		v.Stdout, v.Stderr, v.Diff, v.Error, v.Note = "", "", "", "", withheldNote(inj)
	}
	return v, nil
}
