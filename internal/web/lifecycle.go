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
			b.PendingText = "A worker is computing the diff this change makes. It is shown here once ready."
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
		if cmds, err := hitl.ParseCommands([]byte(p.Diff)); err == nil {
			for _, c := range cmds {
				if c.Name == str("command") {
					b.Argv = []string{"sh", "-c", c.Run}
				}
			}
		}
		repo, _ := hitl.WorktreeRepo(str("worktree"))
		b.Diff = templates.UnifiedDiff(p.Diff)
		b.DiffTitle = fmt.Sprintf("Command set %s (sha256 %.12s…): approving approves every command below for repository %s, until the file changes",
			hitl.CommandsFile, p.Commit, repo)
	case hitl.ToolFSWrite:
		b.Diff, b.DiffTitle = templates.UnifiedDiff(p.Diff), "What approving writes to "+str("path")
	case hitl.ToolFSPatch:
		b.Diff, b.DiffTitle = templates.UnifiedDiff(p.Diff), "What approving changes (the patch applies cleanly)"
	}
}
