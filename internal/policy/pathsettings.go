package policy

import (
	"strings"

	"github.com/airlockhq/airlock/internal/pathrule"
)

// mergedPaths returns the built-in path entries followed by the fleet's
// and the agent's, without duplicates: settings add entries, never
// remove one.
func (s Set) mergedPaths() (deny, readOnly []string) {
	fleet, agent := settingsOf(s.Fleet), settingsOf(s.Agent)
	return mergeEntries(pathrule.BuiltinDeny, fleet.DenyPaths, agent.DenyPaths),
		mergeEntries(pathrule.BuiltinReadOnly, fleet.ReadOnlyPaths, agent.ReadOnlyPaths)
}

func mergeEntries(lists ...[]string) []string {
	if len(lists[1])+len(lists[2]) == 0 {
		return lists[0] // the hot path: shared, never written to
	}
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out := make([]string, 0, n)
	seen := make(map[string]bool, n)
	for _, l := range lists {
		for _, e := range l {
			if !seen[e] {
				seen[e] = true
				out = append(out, e)
			}
		}
	}
	return out
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// validatePathSettings checks deny_paths and read_only_paths entries
// (pathrule.Problem).
func validatePathSettings(s Settings) error {
	for _, f := range [...]struct {
		name    string
		entries []string
	}{{"deny_paths", s.DenyPaths}, {"read_only_paths", s.ReadOnlyPaths}} {
		if len(f.entries) > pathrule.MaxEntries {
			return docError("settings."+f.name, "%d entries; at most %d are allowed", len(f.entries), pathrule.MaxEntries)
		}
		for i, e := range f.entries {
			if msg := pathrule.Problem(e); msg != "" {
				return docError("settings."+f.name, "entry %d %q: %s", i, e, msg)
			}
		}
	}
	return nil
}

// pathOverrides lists the path entries an agent policy adds. They only
// ever tighten the fleet's, but are listed like every override.
func pathOverrides(fleet EffectiveSettings, a *Settings) []Override {
	var out []Override
	if a.DenyPaths != nil {
		out = append(out, Override{"deny_paths", strings.Join(fleet.DenyPaths, ","), strings.Join(a.DenyPaths, ",")})
	}
	if a.ReadOnlyPaths != nil {
		out = append(out, Override{"read_only_paths", strings.Join(fleet.ReadOnlyPaths, ","), strings.Join(a.ReadOnlyPaths, ",")})
	}
	return out
}

// MergedPaths returns the deny and read-only entries one policy's settings
// give on their own: the built-in ones first, then its own (for the fleet
// page; agents add theirs on top, see Set.EffectiveSettings).
func MergedPaths(s Settings) (deny, readOnly []string) {
	return mergeEntries(pathrule.BuiltinDeny, s.DenyPaths, nil), mergeEntries(pathrule.BuiltinReadOnly, s.ReadOnlyPaths, nil)
}
