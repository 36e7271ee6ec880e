package policy

import (
	"encoding/json"
	"strconv"
	"strings"
)

// InjectionThresholds is the setting result_injection_thresholds: the
// injection scores (risk.GradeInjection, 1–100) from which a finding in
// what re-enters an agent's context (a reported result, a connector's
// result, exec output) is treated with caution, escalated or refused. A
// nil field is not set (the fleet's value, or the default, applies); 0
// turns that level off.
type InjectionThresholds struct {
	// Caution: the result is kept and flagged (fleet default 1: every
	// finding).
	Caution *int `json:"caution,omitempty"`
	// Escalate: the result is kept, flagged and shown to reviewers as an
	// escalation (fleet default 70: a high grade).
	Escalate *int `json:"escalate,omitempty"`
	// Refuse: the result is withheld from the agent (as with
	// result_injection_action redact). Fleet default 0: off.
	Refuse *int `json:"refuse,omitempty"`
}

// Thresholds are the effective result_injection_thresholds; 0 is off.
type Thresholds struct {
	Caution  int `json:"caution"`
	Escalate int `json:"escalate"`
	Refuse   int `json:"refuse"`
}

// Default result_injection_thresholds.
const (
	DefaultCautionScore  = 1
	DefaultEscalateScore = 70
	DefaultRefuseScore   = 0
)

// The verdicts of an injection score under the effective settings
// (EffectiveSettings.InjectionVerdict), mildest first.
const (
	VerdictNone     = ""
	VerdictCaution  = "caution"
	VerdictEscalate = "escalate"
	VerdictRefuse   = "refuse"
)

// InjectionVerdict maps the injection score of what re-enters the agent's
// context to a verdict. result_injection_action redact refuses every
// finding (score > 0) whatever the thresholds: of the two settings the
// stricter wins. Otherwise the highest threshold the score reaches
// decides; below caution the finding is ignored.
func (s EffectiveSettings) InjectionVerdict(score int) string {
	t := s.ResultInjectionThresholds
	switch {
	case score <= 0:
		return VerdictNone
	case s.ResultInjectionAction != ResultFlag:
		return VerdictRefuse // redact, or anything unknown: fail closed
	case t.Refuse > 0 && score >= t.Refuse:
		return VerdictRefuse
	case t.Escalate > 0 && score >= t.Escalate:
		return VerdictEscalate
	case t.Caution > 0 && score >= t.Caution:
		return VerdictCaution
	}
	return VerdictNone
}

// resolveThresholds applies the fleet's and then the agent's thresholds
// over the defaults, field by field.
func resolveThresholds(layers ...*Settings) Thresholds {
	t := Thresholds{Caution: DefaultCautionScore, Escalate: DefaultEscalateScore, Refuse: DefaultRefuseScore}
	for _, s := range layers {
		v := s.ResultInjectionThresholds
		if v == nil {
			continue
		}
		if v.Caution != nil {
			t.Caution = *v.Caution
		}
		if v.Escalate != nil {
			t.Escalate = *v.Escalate
		}
		if v.Refuse != nil {
			t.Refuse = *v.Refuse
		}
	}
	return t
}

// String formats thresholds for the overrides list:
// "caution=1,escalate=70,refuse=off".
func (t Thresholds) String() string {
	f := func(v int) string {
		if v <= 0 {
			return "off"
		}
		return strconv.Itoa(v)
	}
	return "caution=" + f(t.Caution) + ",escalate=" + f(t.Escalate) + ",refuse=" + f(t.Refuse)
}

func (t *InjectionThresholds) clone() *InjectionThresholds {
	if t == nil {
		return nil
	}
	return &InjectionThresholds{Caution: clonePtr(t.Caution), Escalate: clonePtr(t.Escalate), Refuse: clonePtr(t.Refuse)}
}

// validateThresholds checks result_injection_thresholds: each 0 (off) to
// 100.
func validateThresholds(t *InjectionThresholds) error {
	if t == nil {
		return nil
	}
	for _, f := range [...]struct {
		name string
		v    *int
	}{{"caution", t.Caution}, {"escalate", t.Escalate}, {"refuse", t.Refuse}} {
		if f.v != nil && (*f.v < 0 || *f.v > 100) {
			return docError("settings.result_injection_thresholds."+f.name, "%s must be between 0 (off) and 100", f.name)
		}
	}
	return nil
}

// thresholdsOverride lists an agent's result_injection_thresholds.
func thresholdsOverride(s Set, a *Settings) []Override {
	if a.ResultInjectionThresholds == nil {
		return nil
	}
	fleet := resolveThresholds(settingsOf(s.Fleet))
	return []Override{{"result_injection_thresholds", fleet.String(), resolveThresholds(settingsOf(s.Fleet), a).String()}}
}

// Loosens reports whether the agent's value is looser than the fleet's:
// a more permissive default or injection_action, a later escalate_at
// (or none), a higher amount_cap, max_pending or max_args_bytes, hosts the
// fleet does not allow, separation_of_duties or exec_preview off, result_injection_action
// flag over redact, or a higher (or off) injection threshold. Settings it
// does not know (and path entries, which only add) never loosen.
func (o Override) Loosens() bool {
	f, a := o.FleetValue, o.AgentValue
	switch o.Setting {
	case "default", "injection_action":
		return Effect(a).Rank() < Effect(f).Rank()
	case "escalate_at":
		return escalateRank(a) > escalateRank(f)
	case "amount_cap":
		fv, err1 := strconv.ParseFloat(f, 64)
		av, err2 := strconv.ParseFloat(a, 64)
		return err1 == nil && err2 == nil && av > fv
	case "max_pending", "max_args_bytes":
		fv, err1 := strconv.Atoi(f)
		av, err2 := strconv.Atoi(a)
		return err1 == nil && err2 == nil && av > fv
	case "allowed_hosts":
		if f == "" {
			return false // no fleet allowlist: nothing to loosen
		}
		fleet := strings.Split(f, ",")
		if a == "" {
			return true // no allowlist at all
		}
		for _, h := range strings.Split(a, ",") {
			if !containsString(fleet, h) {
				return true
			}
		}
	case "separation_of_duties", "exec_preview":
		return f == "true" && a == "false"
	case "result_injection_action":
		return f == ResultRedact && a == ResultFlag
	case "result_injection_thresholds":
		fv, av := parseThresholds(f), parseThresholds(a)
		for i := range fv {
			if thresholdRank(av[i]) > thresholdRank(fv[i]) {
				return true
			}
		}
	}
	return false
}

// escalateRank ranks an escalate_at value: the later it escalates, the
// higher; none is beyond critical.
func escalateRank(v string) int {
	if r, ok := ruleLevelRank(v); ok {
		return r
	}
	return len(riskLevels)
}

// parseThresholds reads what Thresholds.String writes.
func parseThresholds(s string) [3]string {
	var out [3]string
	for i, part := range strings.SplitN(s, ",", 3) {
		_, v, _ := strings.Cut(part, "=")
		out[i] = v
	}
	return out
}

// thresholdRank: a higher threshold is looser, off loosest.
func thresholdRank(v string) int {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 101 // off
	}
	return n
}

func containsString(l []string, s string) bool {
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}

// fleetDefault is the effect the fleet policy gives when no rule matches.
func fleetDefault(fleet *Compiled) Effect {
	if fleet != nil && fleet.doc.Default != "" {
		return fleet.doc.Default
	}
	return Deny
}

// overrideJSON is Override as the API writes it.
type overrideJSON struct {
	Setting    string `json:"setting"`
	FleetValue string `json:"fleet_value"`
	AgentValue string `json:"agent_value"`
	Loosens    bool   `json:"loosens,omitempty"`
}

// MarshalJSON writes the override with "loosens": true when the agent's
// value loosens the fleet's.
func (o Override) MarshalJSON() ([]byte, error) {
	return json.Marshal(overrideJSON{o.Setting, o.FleetValue, o.AgentValue, o.Loosens()})
}
