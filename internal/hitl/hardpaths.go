package hitl

import (
	"context"
	"fmt"
	"sync"

	"github.com/airlockhq/airlock/internal/pathrule"
	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/risk"
)

// Decision sources of the hard path tier.
const (
	SourceDenyPaths     = "deny_paths"
	SourceReadOnlyPaths = "read_only_paths"
)

// PathOperand is one path a built-in exec call names, as the sandbox's
// command validators read it: Write when the program may write, delete or
// move it.
type PathOperand struct {
	Path  string
	Write bool
}

// hardPaths is the hard path tier: the built-in lists (and Airlock's own
// files) compiled once; the settings' additions compiled per call.
type hardPaths struct {
	home     string
	extra    []string // Airlock's data directory and key files
	operands func(args map[string]any) ([]PathOperand, bool)

	once     sync.Once
	deny     *pathrule.Set
	readOnly *pathrule.Set
}

func (h *hardPaths) builtins() (*pathrule.Set, *pathrule.Set) {
	h.once.Do(func() {
		h.deny = pathrule.Compile(h.home, pathrule.BuiltinDeny, h.extra)
		h.readOnly = pathrule.Compile(h.home, pathrule.BuiltinReadOnly)
	})
	return h.deny, h.readOnly
}

// added returns the entries of merged beyond the built-in ones (merged
// lists start with the built-ins, see policy.EffectiveSettings).
func added(merged, builtin []string) []string {
	if len(merged) <= len(builtin) {
		return nil
	}
	return merged[len(builtin):]
}

// hardPathMatch is a call the tier refuses.
type hardPathMatch struct {
	source string
	reason string
}

// check runs the tier on one call: every path-valued argument against the
// deny entries, every path the call may write against the read-only ones
// (and, for a directory, the read-only entries under it).
func (h *hardPaths) check(tool string, args map[string]any, settings policy.EffectiveSettings) *hardPathMatch {
	if tool == ToolFSPatch {
		return h.checkPatch(args, settings)
	}
	deny, readOnly := h.builtins()
	userDeny, userRO := added(settings.DenyPaths, pathrule.BuiltinDeny), added(settings.ReadOnlyPaths, pathrule.BuiltinReadOnly)
	var moreDeny, moreRO *pathrule.Set
	if len(userDeny) > 0 {
		moreDeny = pathrule.Compile(h.home, userDeny)
	}
	if len(userRO) > 0 {
		moreRO = pathrule.Compile(h.home, userRO)
	}
	denied := func(p string) (pathrule.Entry, bool) {
		if e, ok := deny.Match(p); ok {
			return e, true
		}
		return moreDeny.Match(p)
	}
	protected := func(p string, whole bool) (pathrule.Entry, bool) {
		if !whole {
			if e, ok := readOnly.Match(p); ok {
				return e, true
			}
			return moreRO.Match(p)
		}
		if e, ok := readOnly.Contains(p); ok {
			return e, true
		}
		return moreRO.Contains(p)
	}
	var m *hardPathMatch
	var execOps []PathOperand
	execKnown := false
	if tool == ToolExec && h.operands != nil {
		execOps, execKnown = h.operands(args)
	}
	risk.PathArgs(tool, args, func(a risk.PathArg) bool {
		if e, ok := denied(a.Path); ok {
			m = &hardPathMatch{SourceDenyPaths, fmt.Sprintf(
				"%s names %q, which deny_paths entry %q covers: no call may touch it, and no one can approve it", a.Where, a.Path, e)}
			return false
		}
		if a.Write && tool != ToolExec {
			if e, ok := protected(a.Path, a.Whole); ok {
				m = &hardPathMatch{SourceReadOnlyPaths, fmt.Sprintf(
					"%s names %q, which read_only_paths entry %q covers: %s may change it, so it is refused, and no one can approve it", a.Where, a.Path, e, tool)}
				return false
			}
		}
		return true
	})
	if m != nil || tool != ToolExec {
		return m
	}
	if !execKnown {
		// The validators refuse the command anyway (source "validator").
		return nil
	}
	for _, op := range execOps {
		if e, ok := denied(op.Path); ok {
			return &hardPathMatch{SourceDenyPaths, fmt.Sprintf(
				"exec names %q, which deny_paths entry %q covers: no call may touch it, and no one can approve it", op.Path, e)}
		}
		if !op.Write {
			continue
		}
		// The validators do not say which writes take a directory whole
		// (mv, rm -r): any may.
		if e, ok := protected(op.Path, true); ok {
			return &hardPathMatch{SourceReadOnlyPaths, fmt.Sprintf(
				"exec writes %q, which read_only_paths entry %q covers: refused, and no one can approve it", op.Path, e)}
		}
	}
	return nil
}

// leasePaths gives a lease its agent's effective path entries, so that the
// worker hides deny paths and binds read-only paths in the sandbox as the
// policy in force says.
func (s *Service) leasePaths(ctx context.Context, l *Lease) error {
	_, set, err := s.store.CachedAgentPolicy(ctx, l.AgentID)
	if err != nil {
		return fmt.Errorf("hitl: the path settings of job %s: %w", l.ID, err)
	}
	eff := set.EffectiveSettings()
	l.DenyPaths, l.ReadOnlyPaths = append(eff.DenyPaths[:0:0], eff.DenyPaths...), append(eff.ReadOnlyPaths[:0:0], eff.ReadOnlyPaths...)
	if len(s.hard.extra) > 0 {
		l.DenyPaths = append(l.DenyPaths, s.hard.extra...)
	}
	return nil
}
