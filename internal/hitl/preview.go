package hitl

import (
	"encoding/json"

	"github.com/airlockhq/airlock/internal/risk"
)

// PreviewRisk returns the risk a merge has once its preview is known: its
// risk at submit raised by what the diff holds (risk.DiffFlags; for a
// worktree.run, by what its command set holds: CommandSetFlags), and true,
// when the preview adds anything; else a's risk and false. The store
// records it in the transaction that stores the preview.
func (a *Action) PreviewRisk() (risk.Assessment, bool) {
	var p Preview
	if len(a.Preview) == 0 || json.Unmarshal(a.Preview, &p) != nil || p.Diff == "" {
		return a.Risk, false
	}
	f := risk.DiffFlags(p.Diff)
	if a.Tool == ToolWorktreeRun {
		// The preview is the command set, not a diff: every command in
		// it is judged as a line a diff adds, since approving the run
		// approves them all. A set refused is not approved at all.
		cmds, err := ParseCommands([]byte(p.Diff))
		if err != nil {
			return a.Risk, false
		}
		f = CommandSetFlags(cmds)
	}
	if len(f.Reasons) == 0 {
		return a.Risk, false
	}
	raised := a.Risk.Raise(f.Reasons, f.Floor)
	if raised.Level == a.Risk.Level && len(raised.Reasons) == len(a.Risk.Reasons) {
		return a.Risk, false
	}
	return raised, true
}
