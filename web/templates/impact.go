package templates

// ImpactView is an exec's impact preview on its action page: what the
// command did to a throwaway copy of the worktree, and the worktree's state
// it ran on (what the approval pins).
type ImpactView struct {
	// Status is "preparing", "ready" or "failed".
	Status     string
	Diff       []DiffLine
	Flags      []string
	Head, Tree string
	HasRun     bool // the exit code and output are known
	ExitCode   int
	Stdout     string
	Stderr     string
	Truncated  bool
	DurationMS int64
	Error      string
	Note       string
	// Matches, once the approved run reported its diff, says whether it
	// is the previewed one (nil: not run yet).
	Matches *bool
}

// ImpactClass is the badge class of an impact preview's status.
func ImpactClass(status string) string {
	switch status {
	case "ready":
		return "badge status-ok"
	case "failed":
		return "badge status-bad"
	}
	return "badge"
}
