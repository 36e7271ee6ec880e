package policy

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Fleet defaults for settings that neither policy sets.
const (
	DefaultInjectionAction = Approve
	DefaultEscalateAt      = RiskHigh
	DefaultPendingTimeout  = 15 * time.Minute
	DefaultAmountCap       = 1000.0
	DefaultMaxPending      = 1000
	DefaultMaxArgsBytes    = 64 << 10
	DefaultResultInjection = ResultFlag
)

// The values of the setting result_injection_action: what a prompt
// injection found in a tool's reported result does.
const (
	// ResultFlag keeps the result and marks the action and its audit
	// event with the findings.
	ResultFlag = "flag"
	// ResultRedact marks them too, drops the result's output (and error)
	// from the stored action, and has the MCP surfaces answer the model
	// with an error naming the finding instead of the result.
	ResultRedact = "redact"
)

// Bounds on the numeric settings.
const (
	MaxMaxPending   = 1_000_000
	MinMaxArgsBytes = 1 << 10
	MaxMaxArgsBytes = 1 << 20
)

// EscalateNever is the EffectiveSettings.EscalateAt value meaning risk never
// escalates an allow.
const EscalateNever = "none"

// maxAllowedHosts bounds Settings.AllowedHosts.
const maxAllowedHosts = 1000

// EffectiveSettings are the settings a decision uses: the fleet's, with the
// agent's overrides applied and defaults filled in.
type EffectiveSettings struct {
	// InjectionAction is what a prompt-injection hit does.
	InjectionAction Effect
	// EscalateAt is the risk level at or above which an allow becomes
	// approve, or EscalateNever.
	EscalateAt string
	// DefaultTimeout is the pending timeout of approve decisions whose rule
	// sets none.
	DefaultTimeout time.Duration
	// AmountCap is for the risk classifier.
	AmountCap float64
	// AllowedHosts is for the risk classifier; never nil.
	AllowedHosts []string
	// SeparationOfDuties: the agent's owner and the token's issuer may not
	// approve its actions.
	SeparationOfDuties bool
	// MaxPending bounds the agent's pending actions.
	MaxPending int
	// MaxArgsBytes bounds one call's args, as JSON.
	MaxArgsBytes int
	// ResultInjectionAction is ResultFlag or ResultRedact.
	ResultInjectionAction string
	// ResultInjectionThresholds grade injection findings in what re-enters
	// the agent's context (InjectionVerdict).
	ResultInjectionThresholds Thresholds
	// DenyPaths is pathrule.BuiltinDeny, then the fleet's and the agent's
	// deny_paths (duplicates dropped); never nil.
	DenyPaths []string
	// ReadOnlyPaths is pathrule.BuiltinReadOnly, then the fleet's and the
	// agent's read_only_paths; never nil. Both lists may share memory with
	// the built-in ones (the submit path allocates nothing for them): read
	// them, never write to them.
	ReadOnlyPaths []string
	// ExecPreview: a pending exec in a worktree gets an impact preview
	// (default true).
	ExecPreview bool
	// Notify are the targets of every pending action: the fleet's
	// settings.notify, then the agent's; may share memory with the
	// policies (read it, never write to it).
	Notify []string
	// Remind is settings.remind as set (nil: not set; on when a target
	// applies to the action).
	Remind *bool
}

type effectiveSettingsJSON struct {
	InjectionAction    Effect      `json:"injection_action"`
	EscalateAt         string      `json:"escalate_at"`
	DefaultTimeout     Duration    `json:"default_timeout"`
	AmountCap          float64     `json:"amount_cap"`
	AllowedHosts       []string    `json:"allowed_hosts"`
	SeparationOfDuties bool        `json:"separation_of_duties"`
	MaxPending         int         `json:"max_pending"`
	MaxArgsBytes       int         `json:"max_args_bytes"`
	ResultInjection    string      `json:"result_injection_action"`
	Thresholds         *Thresholds `json:"result_injection_thresholds,omitempty"`
	DenyPaths          []string    `json:"deny_paths"`
	ReadOnlyPaths      []string    `json:"read_only_paths"`
	ExecPreview        *bool       `json:"exec_preview,omitempty"`
}

// MarshalJSON writes the settings with the same field names as Settings and
// the timeout as a duration string.
func (s EffectiveSettings) MarshalJSON() ([]byte, error) {
	hosts := s.AllowedHosts
	if hosts == nil {
		hosts = []string{}
	}
	return json.Marshal(effectiveSettingsJSON{
		InjectionAction:    s.InjectionAction,
		EscalateAt:         s.EscalateAt,
		DefaultTimeout:     Duration(s.DefaultTimeout),
		AmountCap:          s.AmountCap,
		AllowedHosts:       hosts,
		SeparationOfDuties: s.SeparationOfDuties,
		MaxPending:         s.MaxPending,
		MaxArgsBytes:       s.MaxArgsBytes,
		ResultInjection:    s.ResultInjectionAction,
		Thresholds:         &s.ResultInjectionThresholds,
		DenyPaths:          nonNil(s.DenyPaths),
		ReadOnlyPaths:      nonNil(s.ReadOnlyPaths),
		ExecPreview:        &s.ExecPreview,
	})
}

// Override is one setting an agent policy overrides, with both values
// formatted for display.
type Override struct {
	// Setting is the JSON name of the setting, e.g. "injection_action".
	Setting string `json:"setting"`
	// FleetValue is the value the fleet policy gives (its default if unset).
	FleetValue string `json:"fleet_value"`
	// AgentValue is the value the agent policy sets.
	AgentValue string `json:"agent_value"`
}

// resolved is what Decide needs from the settings, with where each value
// came from ("fleet", "agent" or "default") for reasons.
type resolved struct {
	injection     Effect
	injectionFrom string
	escalateRank  int // -1: never
	escalateAt    string
	timeout       time.Duration
}

// settingsOf returns the Settings of a possibly nil policy.
func settingsOf(c *Compiled) *Settings {
	if c == nil {
		return &Settings{}
	}
	return &c.doc.Settings
}

func (s Set) resolve() resolved {
	fleet, agent := settingsOf(s.Fleet), settingsOf(s.Agent)
	r := resolved{injection: DefaultInjectionAction, injectionFrom: "default", escalateAt: DefaultEscalateAt, timeout: DefaultPendingTimeout}
	for _, p := range [...]struct {
		s    *Settings
		from string
	}{{fleet, "fleet"}, {agent, "agent"}} {
		if v := p.s.InjectionAction; v != nil {
			r.injection, r.injectionFrom = *v, p.from
		}
		if v := p.s.EscalateAt; v != nil {
			r.escalateAt = normalizeEscalate(*v)
		}
		if v := p.s.DefaultTimeout; v != nil {
			r.timeout = v.Std()
		}
	}
	r.escalateRank = -1
	if rank, ok := ruleLevelRank(r.escalateAt); ok {
		r.escalateRank = rank
	}
	return r
}

func normalizeEscalate(v string) string {
	if v == "" {
		return EscalateNever
	}
	return v
}

// EffectiveSettings returns the fleet settings with the agent's overrides
// applied and defaults filled in.
func (s Set) EffectiveSettings() EffectiveSettings {
	r := s.resolve()
	out := EffectiveSettings{
		InjectionAction: r.injection,
		EscalateAt:      r.escalateAt,
		DefaultTimeout:  r.timeout,
		AmountCap:       DefaultAmountCap,
		AllowedHosts:    []string{},
		MaxPending:      DefaultMaxPending,
		MaxArgsBytes:    DefaultMaxArgsBytes,
		ExecPreview:     true,

		ResultInjectionAction: DefaultResultInjection,
	}
	for _, p := range [...]*Settings{settingsOf(s.Fleet), settingsOf(s.Agent)} {
		if p.AmountCap != nil {
			out.AmountCap = *p.AmountCap
		}
		if p.SeparationOfDuties != nil {
			out.SeparationOfDuties = *p.SeparationOfDuties
		}
		if p.MaxPending != nil {
			out.MaxPending = *p.MaxPending
		}
		if p.MaxArgsBytes != nil {
			out.MaxArgsBytes = *p.MaxArgsBytes
		}
		if p.ResultInjectionAction != nil {
			out.ResultInjectionAction = *p.ResultInjectionAction
		}
		if p.AllowedHosts != nil {
			out.AllowedHosts = slices.Clone(p.AllowedHosts)
		}
		if p.ExecPreview != nil {
			out.ExecPreview = *p.ExecPreview
		}
	}
	out.DenyPaths, out.ReadOnlyPaths = s.mergedPaths()
	out.Notify = mergedNames(settingsOf(s.Fleet).Notify, settingsOf(s.Agent).Notify)
	for _, p := range [...]*Settings{settingsOf(s.Fleet), settingsOf(s.Agent)} {
		if p.Remind != nil {
			out.Remind = p.Remind
		}
	}
	out.ResultInjectionThresholds = resolveThresholds(settingsOf(s.Fleet), settingsOf(s.Agent))
	return out
}

// Overrides lists every setting the agent policy sets, in a fixed order
// (the document's default, injection_action, escalate_at, default_timeout, amount_cap,
// allowed_hosts, separation_of_duties, max_pending, max_args_bytes,
// result_injection_action, result_injection_thresholds, then the path
// entries), with the value the fleet policy alone would give; those that
// loosen the fleet's say so (Override.Loosens). A
// setting the agent sets to the fleet's value is still listed.
func (s Set) Overrides() []Override {
	if s.Agent == nil {
		return nil
	}
	fleet := Set{Fleet: s.Fleet}.EffectiveSettings()
	a := &s.Agent.doc.Settings
	var out []Override
	if a.InjectionAction != nil {
		out = append(out, Override{"injection_action", string(fleet.InjectionAction), string(*a.InjectionAction)})
	}
	if a.EscalateAt != nil {
		out = append(out, Override{"escalate_at", fleet.EscalateAt, normalizeEscalate(*a.EscalateAt)})
	}
	if a.DefaultTimeout != nil {
		out = append(out, Override{"default_timeout", Duration(fleet.DefaultTimeout).String(), a.DefaultTimeout.String()})
	}
	if a.AmountCap != nil {
		out = append(out, Override{"amount_cap", formatAmount(fleet.AmountCap), formatAmount(*a.AmountCap)})
	}
	if a.AllowedHosts != nil {
		out = append(out, Override{"allowed_hosts", strings.Join(fleet.AllowedHosts, ","), strings.Join(a.AllowedHosts, ",")})
	}
	if a.SeparationOfDuties != nil {
		out = append(out, Override{"separation_of_duties", strconv.FormatBool(fleet.SeparationOfDuties), strconv.FormatBool(*a.SeparationOfDuties)})
	}
	if a.MaxPending != nil {
		out = append(out, Override{"max_pending", strconv.Itoa(fleet.MaxPending), strconv.Itoa(*a.MaxPending)})
	}
	if a.MaxArgsBytes != nil {
		out = append(out, Override{"max_args_bytes", strconv.Itoa(fleet.MaxArgsBytes), strconv.Itoa(*a.MaxArgsBytes)})
	}
	if a.ResultInjectionAction != nil {
		out = append(out, Override{"result_injection_action", fleet.ResultInjectionAction, *a.ResultInjectionAction})
	}
	if a.ExecPreview != nil {
		out = append(out, Override{"exec_preview", strconv.FormatBool(fleet.ExecPreview), strconv.FormatBool(*a.ExecPreview)})
	}
	out = append(out, thresholdsOverride(s, a)...)
	out = append(out, pathOverrides(fleet, a)...)
	if a.Rate != nil {
		fleetRate := "none"
		if n := (Set{Fleet: s.Fleet}).RatePerMinute(); n > 0 {
			fleetRate = strconv.Itoa(n)
		}
		out = append(out, Override{"rate.per_minute", fleetRate, strconv.Itoa(a.Rate.PerMinute)})
	}
	if a.Notify != nil {
		out = append(out, Override{"notify", strings.Join(fleet.Notify, ","), strings.Join(mergedNames(fleet.Notify, a.Notify), ",")})
	}
	if a.Remind != nil {
		fleetRemind := "default"
		if fleet.Remind != nil {
			fleetRemind = strconv.FormatBool(*fleet.Remind)
		}
		out = append(out, Override{"remind", fleetRemind, strconv.FormatBool(*a.Remind)})
	}
	if d := s.Agent.doc.Default; d != "" {
		out = append([]Override{{"default", string(fleetDefault(s.Fleet)), string(d)}}, out...)
	}
	return out
}

// mergedNames is a then b without duplicates; a alone (no copy) when b
// is empty, so that the submit path allocates nothing for it.
func mergedNames(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := slices.Clone(a)
	for _, n := range b {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func formatAmount(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// validateSettings checks every set value.
func validateSettings(s Settings) error {
	if v := s.InjectionAction; v != nil && !v.Valid() {
		return docError("settings.injection_action", "unknown effect %q (want deny, approve or allow)", *v)
	}
	if v := s.EscalateAt; v != nil && *v != "" && *v != EscalateNever && !ValidRiskLevel(*v) {
		return docError("settings.escalate_at", "unknown risk level %q (want low, medium, high, critical or none)", *v)
	}
	if v := s.DefaultTimeout; v != nil {
		if msg := timeoutProblem(v.Std()); msg != "" {
			return docError("settings.default_timeout", "%s", msg)
		}
	}
	if v := s.AmountCap; v != nil && (*v < 0 || math.IsNaN(*v) || math.IsInf(*v, 0)) {
		return docError("settings.amount_cap", "amount_cap must be a finite number >= 0")
	}
	if v := s.MaxPending; v != nil && (*v < 1 || *v > MaxMaxPending) {
		return docError("settings.max_pending", "max_pending must be between 1 and %d", MaxMaxPending)
	}
	if v := s.MaxArgsBytes; v != nil && (*v < MinMaxArgsBytes || *v > MaxMaxArgsBytes) {
		return docError("settings.max_args_bytes", "max_args_bytes must be between %d and %d", MinMaxArgsBytes, MaxMaxArgsBytes)
	}
	if v := s.ResultInjectionAction; v != nil && *v != ResultFlag && *v != ResultRedact {
		return docError("settings.result_injection_action", "unknown value %q (want flag or redact)", *v)
	}
	if len(s.AllowedHosts) > maxAllowedHosts {
		return docError("settings.allowed_hosts", "%d hosts; at most %d are allowed", len(s.AllowedHosts), maxAllowedHosts)
	}
	for i, h := range s.AllowedHosts {
		if msg := hostProblem(h); msg != "" {
			return docError("settings.allowed_hosts", "host %d %q: %s", i, h, msg)
		}
	}
	if err := validateThresholds(s.ResultInjectionThresholds); err != nil {
		return err
	}
	if err := validatePathSettings(s); err != nil {
		return err
	}
	if msg := routeNamesProblem(s.Notify); msg != "" {
		return docError("settings.notify", "%s", msg)
	}
	if v := s.Rate; v != nil && (v.PerMinute < 1 || v.PerMinute > MaxRatePerMinute) {
		return docError("settings.rate.per_minute", "per_minute must be between 1 and %d", MaxRatePerMinute)
	}
	return nil
}

// hostProblem says what is wrong with an allowed host entry, or "". Entries
// are host names, optionally with a leading "*." wildcard or a ":port";
// URLs and paths are refused so that a pasted URL fails loudly.
func hostProblem(h string) string {
	switch {
	case h == "":
		return "empty host"
	case len(h) > 253:
		return "longer than 253 characters"
	case strings.Contains(h, "://"):
		return "a host name, not a URL"
	case strings.ContainsAny(h, "/?#@ \t\r\n"):
		return "a host name must not contain '/', '?', '#', '@' or whitespace"
	}
	return ""
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *EffectiveSettings) UnmarshalJSON(b []byte) error {
	var v effectiveSettingsJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = EffectiveSettings{
		InjectionAction:    v.InjectionAction,
		EscalateAt:         v.EscalateAt,
		DefaultTimeout:     v.DefaultTimeout.Std(),
		AmountCap:          v.AmountCap,
		AllowedHosts:       v.AllowedHosts,
		SeparationOfDuties: v.SeparationOfDuties,
		MaxPending:         v.MaxPending,
		MaxArgsBytes:       v.MaxArgsBytes,

		ResultInjectionAction: v.ResultInjection,
		DenyPaths:             v.DenyPaths,
		ReadOnlyPaths:         v.ReadOnlyPaths,
		ExecPreview:           v.ExecPreview == nil || *v.ExecPreview,
	}
	if v.Thresholds != nil {
		s.ResultInjectionThresholds = *v.Thresholds
	}
	return nil
}
