package web

import (
	"encoding/json"
	"fmt"

	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/web/templates"
)

// lifecycleView fills in what a reviewer reads on the page of a
// worktree.run (the command line it runs and the whole command set that
// approving approves for the repository) or of an fs.write or fs.patch
// (the diff it makes).
func lifecycleView(a *hitl.Action, b *templates.BuiltinView) {
	str := func(k string) string { s, _ := a.Args[k].(string); return s }
	var p hitl.Preview
	ready := len(a.Preview) > 0 && json.Unmarshal(a.Preview, &p) == nil
	switch {
	case !ready && a.Status == hitl.StatusPending:
		b.DiffPending = true
		if a.Tool == hitl.ToolWorktreeRun {
			b.PendingTitle = "Command set"
			b.PendingText = "A worker is reading " + hitl.CommandsFile + " in the worktree. Approval is possible once every command is shown here."
		} else {
			b.PendingTitle = "Preview"
			b.PendingText = "A worker is computing the diff this change makes to the files as they are now. Approval is possible once it is shown here."
		}
		return
	case !ready:
		return
	case p.Error != "":
		b.HasResult, b.Error, b.ExitCode = true, "preview failed: "+p.Error, -1
		return
	}
	b.DiffFlags = p.Flags
	switch a.Tool {
	case hitl.ToolWorktreeRun:
		commandSetView(p, str("command"), str("worktree"), b)
	case hitl.ToolFSWrite:
		b.Diff, b.DiffTitle = templates.UnifiedDiff(p.Diff), "What approving writes to "+str("path")
		b.DiffPin = filesPin("Made against the file as the worker read it", "the write is refused if the file", p.Commit)
	case hitl.ToolFSPatch:
		b.Diff, b.DiffTitle = templates.UnifiedDiff(p.Diff), "What approving changes (the patch applies cleanly)"
		b.DiffPin = filesPin("Checked against the files it touches as the worker read them", "the patch is refused if one of them", p.Commit)
	}
}

// filesPin says what an fs.write or fs.patch approval pins: the state of
// the files its diff was made against (preview.commit, a digest of their
// contents, no git commit).
func filesPin(against, refused, digest string) string {
	if digest == "" {
		return ""
	}
	return fmt.Sprintf("%s (state sha256 %.12s…): approving pins that state, and %s changes before it runs.", against, digest, refused)
}

// commandSetView shows a worktree.run's command set as it runs: the
// commands hitl.ParseCommands reads from the file (the same parse the
// worker runs them from), name by name, with every hidden character
// marked and what in them is risky flagged, then the file as written. A
// file ParseCommands refuses shows why, and the run can only be denied.
func commandSetView(p hitl.Preview, command, worktree string, b *templates.BuiltinView) {
	b.DiffFlags = nil // the preview's flags read a diff, and the file is none
	cmds, err := hitl.ParseCommands([]byte(p.Diff))
	if err != nil {
		b.HasResult, b.Error, b.ExitCode = true, "the command set is refused: "+err.Error()+"; deny this run", -1
		b.Diff, b.DiffTitle = templates.UnifiedDiff(p.Diff), "The file "+hitl.CommandsFile+" as written (refused)"
		return
	}
	for _, c := range cmds {
		b.Commands = append(b.Commands, templates.CommandRow{Name: c.Name, Run: c.Run, Runs: c.Name == command})
		if c.Name == command {
			b.Argv = []string{"sh", "-c", c.Run}
		}
	}
	b.CommandFlags = hitl.CommandSetFlags(cmds).Reasons
	repo, _ := hitl.WorktreeRepo(worktree)
	b.CommandsTitle = fmt.Sprintf("Command set %s (sha256 %.12s…): approving approves every command below for repository %s, until the file changes",
		hitl.CommandsFile, p.Commit, repo)
	b.Diff, b.DiffTitle = templates.UnifiedDiff(p.Diff), "The file "+hitl.CommandsFile+" as written (the commands above are what it declares)"
}
