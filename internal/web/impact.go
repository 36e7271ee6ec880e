package web

import (
	"encoding/json"

	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/web/templates"
)

// impactView adds an exec's impact preview (hitl/impact.go) to its page,
// and names the diff of its approved run for what it is.
func impactView(a *hitl.Action, b *templates.BuiltinView) {
	if a.Tool != hitl.ToolExec {
		return
	}
	status := a.PreviewStatus()
	if status == "" {
		return
	}
	v := &templates.ImpactView{Status: status}
	var p hitl.Preview
	if len(a.Preview) > 0 && json.Unmarshal(a.Preview, &p) == nil {
		v.Error, v.Note, v.Flags = p.Error, p.Note, p.Flags
		if p.State != nil {
			v.Head, v.Tree = p.State.Head, p.State.Tree
		}
		if p.ExitCode != nil {
			v.HasRun, v.ExitCode = true, *p.ExitCode
			v.Stdout, v.Stderr, v.Truncated, v.DurationMS = p.Stdout, p.Stderr, p.Truncated, p.DurationMS
		}
		if p.Diff != "" {
			v.Diff = templates.UnifiedDiff(p.Diff)
		}
		if p.Note == "" && b.Network && p.State != nil {
			v.Note = "the command asked for the network; the preview ran without it, so what it would do over the network is not shown"
		}
	}
	if len(a.Result) > 0 && status == hitl.PreviewReady {
		var r hitl.JobResultView
		if json.Unmarshal(a.Result, &r) == nil && r.Error == "" {
			same := r.Diff == p.Diff
			v.Matches = &same
		}
		if b.DiffTitle != "" {
			b.DiffTitle = "What the run changed in the worktree"
		}
	}
	b.Impact = v
}
