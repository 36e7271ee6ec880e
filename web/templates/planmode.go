package templates

import (
	"strings"

	"github.com/airlockhq/airlock/internal/hitl"
)

// HardStops is what the queue and the fleet page show of the switches no
// reviewer can click through: the plan mode switches that are on and the
// fleet emergency stop.
type HardStops struct {
	// PlanModes are the switches that are on, the fleet's first.
	PlanModes []hitl.PlanMode
	Stop      hitl.FleetStop
}

// FleetPlanMode returns the fleet's switch (off when it is not listed).
func (h HardStops) FleetPlanMode() hitl.PlanMode {
	for _, pm := range h.PlanModes {
		if pm.Scope == hitl.FleetScope {
			return pm
		}
	}
	return hitl.PlanMode{Scope: hitl.FleetScope}
}

// AgentPlanModes are the agents' switches that are on.
func (h HardStops) AgentPlanModes() []hitl.PlanMode {
	var out []hitl.PlanMode
	for _, pm := range h.PlanModes {
		if pm.Scope != hitl.FleetScope {
			out = append(out, pm)
		}
	}
	return out
}

// PlanScopeAgent is the agent id of an agent's plan mode scope.
func PlanScopeAgent(scope string) string { return strings.TrimPrefix(scope, "agent:") }

// planModeWho says who turned a switch on, when and why.
func planModeWho(pm hitl.PlanMode) string {
	s := "by " + pm.SetBy
	if pm.SetAt != nil {
		s += " since " + When(*pm.SetAt)
	}
	if pm.Reason != "" {
		s += ": " + pm.Reason
	}
	return s
}

// fleetStopWho says who stopped the fleet, when and why.
func fleetStopWho(st hitl.FleetStop) string {
	s := "by " + st.StoppedBy
	if st.StoppedAt != nil {
		s += " since " + When(*st.StoppedAt)
	}
	if st.Reason != "" {
		s += ": " + st.Reason
	}
	return s
}
