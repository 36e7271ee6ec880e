package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/jsonx"
)

// Rule is one policy rule. The JSON field names are part of the API.
type Rule struct {
	// ID names the rule in decisions and audit records; required, unique
	// within its document, 1–64 characters from [A-Za-z0-9._-].
	ID string `json:"id"`
	// Tool is an exact tool name or a glob with path.Match syntax ("fs.*",
	// "payments.?end"; '*' does not cross '/'); "*" alone matches every
	// tool.
	Tool string `json:"tool"`
	// Effect is what the rule does when it matches.
	Effect Effect `json:"effect"`
	// When is an optional CEL condition over args, agent, risk and tool; the
	// rule matches only when it evaluates to true.
	When string `json:"when,omitempty"`
	// Approvals is how many distinct reviewers must approve; only on approve
	// rules; 0 means 1; at most MaxApprovals.
	Approvals int `json:"approvals,omitempty"`
	// Timeout is how long an action held by this rule stays pending; only on
	// approve rules; nil means the effective default_timeout.
	Timeout *Duration `json:"timeout,omitempty"`
	// Risk is an optional floor: the rule matches only when the action's risk
	// level is at least this (low, medium, high or critical).
	Risk string `json:"risk,omitempty"`
	// Target, when set, narrows the rule to one exact call (an "always"
	// approval writes such allow rules).
	Target *Target `json:"target,omitempty"`
	// Except lists exact calls the rule does not match (the targets that
	// "always" approvals under this rule allowed).
	Except []Target `json:"except,omitempty"`
	// Notify names notification targets told when the rule makes an
	// action pending and when it is decided; only on approve rules.
	Notify []string `json:"notify,omitempty"`
	// Reviewers names reviewer groups: only their members may approve what
	// the rule holds (empty: every reviewer); only on approve rules.
	Reviewers []string `json:"reviewers,omitempty"`
	// Escalate are steps that fire while the action is still pending,
	// each once: more targets told, more groups allowed to approve.
	Escalate []EscalationStep `json:"escalate,omitempty"`
}

// Settings are fleet-wide knobs that an agent policy may override; every
// override is listed by Set.Overrides. Nil (or empty) fields are not set.
type Settings struct {
	// InjectionAction is what a prompt-injection hit does: deny, approve
	// (fleet default) or allow.
	InjectionAction *Effect `json:"injection_action,omitempty"`
	// EscalateAt is the risk level at or above which an allow becomes
	// approve (fleet default "high"); "" or "none" means never.
	EscalateAt *string `json:"escalate_at,omitempty"`
	// DefaultTimeout is how long an approve decision stays pending when its
	// rule sets no timeout (fleet default 15m).
	DefaultTimeout *Duration `json:"default_timeout,omitempty"`
	// AmountCap is passed to the risk classifier: amounts above it raise the
	// risk (fleet default 1000).
	AmountCap *float64 `json:"amount_cap,omitempty"`
	// AllowedHosts is passed to the risk classifier: hosts outside it raise
	// the risk. Nil means not set; an empty, non-nil list overrides the
	// fleet's list with "no host allowed".
	AllowedHosts []string `json:"allowed_hosts,omitzero"`
	// SeparationOfDuties refuses an approval by the agent's owner or by the
	// user who issued the token the action was submitted with, and never
	// lets one person count twice (fleet default false).
	SeparationOfDuties *bool `json:"separation_of_duties,omitempty"`
	// MaxPending bounds the agent's pending actions; a submit beyond it is
	// refused with 429 (fleet default 1000).
	MaxPending *int `json:"max_pending,omitempty"`
	// MaxArgsBytes bounds the JSON size of one call's args; larger calls
	// are refused with 413 (fleet default 64 KiB).
	MaxArgsBytes *int `json:"max_args_bytes,omitempty"`
	// ResultInjectionAction is what a prompt injection found in a tool's
	// reported result does: flag (fleet default) keeps the result and
	// marks the action and its audit event; redact marks them too and
	// withholds the result (see ResultRedact).
	ResultInjectionAction *string `json:"result_injection_action,omitempty"`
	// ResultInjectionThresholds grade what re-enters the agent's context
	// (InjectionThresholds); the stricter of it and ResultInjectionAction
	// wins (EffectiveSettings.InjectionVerdict).
	ResultInjectionThresholds *InjectionThresholds `json:"result_injection_thresholds,omitempty"`
	// DenyPaths are paths no call may name, added to pathrule.BuiltinDeny
	// (never replacing it): a match is denied at submit, before any rule,
	// grant or reviewer, and hidden from exec inside the sandbox. Fleet
	// and agent lists are both applied.
	DenyPaths []string `json:"deny_paths,omitzero"`
	// ReadOnlyPaths are paths no call may write, delete or move, added to
	// pathrule.BuiltinReadOnly; bound read-only in the sandbox.
	ReadOnlyPaths []string `json:"read_only_paths,omitzero"`
	// Rate bounds the agent's submits per sliding minute; beyond it a
	// submit is refused with 429. The agent's replaces the fleet's.
	Rate *Rate `json:"rate,omitempty"`
	// ExecPreview runs a pending exec in a worktree first on a throwaway
	// copy and shows its diff to the reviewer, who can approve only once
	// it is ready (default true; false turns the impact preview off).
	ExecPreview *bool `json:"exec_preview,omitempty"`
	// Notify names notification targets told of every pending action (and
	// its decision), beside the rule's; fleet and agent lists both apply.
	Notify []string `json:"notify,omitzero"`
	// Remind, on by default when a notification target applies to the
	// action, tells its targets again at half its timeout when its rule
	// has no escalate steps of its own.
	Remind *bool `json:"remind,omitempty"`
}

// Document is a policy as stored and exchanged. Fleet and agent policies
// have the same shape.
type Document struct {
	// Default is the effect when no rule matches; empty means the fleet's
	// default for an agent policy, and deny for the fleet policy.
	Default Effect `json:"default,omitempty"`
	// Rules are evaluated in order; the most restrictive match wins.
	Rules []Rule `json:"rules"`
	// Settings are the fleet-wide knobs (or an agent's overrides of them).
	Settings Settings `json:"settings,omitzero"`
	// Budgets are spending caps; fleet and agent budgets all apply.
	Budgets []Budget `json:"budgets,omitempty"`
}

// Clone returns a deep copy of d that shares no memory with it.
func (d Document) Clone() Document {
	out := Document{Default: d.Default, Rules: make([]Rule, len(d.Rules)), Settings: d.Settings.clone(), Budgets: slices.Clone(d.Budgets)}
	for i, r := range d.Rules {
		if r.Timeout != nil {
			t := *r.Timeout
			r.Timeout = &t
		}
		if r.Target != nil {
			t := *r.Target
			r.Target = &t
		}
		r.Except = slices.Clone(r.Except)
		r.Notify, r.Reviewers = slices.Clone(r.Notify), slices.Clone(r.Reviewers)
		if r.Escalate != nil {
			steps := make([]EscalationStep, len(r.Escalate))
			for j, st := range r.Escalate {
				st.Notify, st.Reviewers = slices.Clone(st.Notify), slices.Clone(st.Reviewers)
				steps[j] = st
			}
			r.Escalate = steps
		}
		out.Rules[i] = r
	}
	return out
}

// Validate reports whether d is a valid policy document; the error is a
// *ValidationError. It does the same work as Compile.
func (d Document) Validate() error {
	_, err := Compile(d, 0)
	return err
}

func (s Settings) clone() Settings {
	out := Settings{AllowedHosts: slices.Clone(s.AllowedHosts)}
	if s.InjectionAction != nil {
		v := *s.InjectionAction
		out.InjectionAction = &v
	}
	if s.EscalateAt != nil {
		v := *s.EscalateAt
		out.EscalateAt = &v
	}
	if s.DefaultTimeout != nil {
		v := *s.DefaultTimeout
		out.DefaultTimeout = &v
	}
	if s.AmountCap != nil {
		v := *s.AmountCap
		out.AmountCap = &v
	}
	out.SeparationOfDuties = clonePtr(s.SeparationOfDuties)
	out.MaxPending = clonePtr(s.MaxPending)
	out.MaxArgsBytes = clonePtr(s.MaxArgsBytes)
	out.ResultInjectionAction = clonePtr(s.ResultInjectionAction)
	out.ResultInjectionThresholds = s.ResultInjectionThresholds.clone()
	out.DenyPaths = slices.Clone(s.DenyPaths)
	out.ReadOnlyPaths = slices.Clone(s.ReadOnlyPaths)
	out.Rate = clonePtr(s.Rate)
	out.ExecPreview = clonePtr(s.ExecPreview)
	out.Notify = slices.Clone(s.Notify)
	out.Remind = clonePtr(s.Remind)
	return out
}

// strictYAML refuses what a YAML policy must not hold although YAML allows
// it: a key given twice in one mapping (at any depth; the last would win
// silently) and more than one document (the rest would be ignored). The
// error names the line.
func strictYAML(data []byte) error {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var v any
	if err := dec.Decode(&v); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		if strings.Contains(msg, "already defined") {
			return apperr.Validation("invalid policy document: duplicate key: %s", strings.TrimPrefix(msg, "unmarshal errors:\n  "))
		}
		return apperr.Invalid("invalid policy document: %s", msg)
	}
	var next yamlv3.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return apperr.Invalid("invalid policy document: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(next.Content) == 0 || (next.Content[0].Kind == yamlv3.ScalarNode && next.Content[0].Tag == "!!null") {
		return nil // an empty document after a trailing "---"
	}
	return apperr.Validation("invalid policy document: a second YAML document at line %d; a policy is one document", next.Content[0].Line)
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// DecodeStored decodes a document as stored (written by json.Marshal of a
// validated Document), keeping numbers inside targets exact.
func DecodeStored(raw []byte, doc *Document) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(doc)
}

// ParseDocument decodes a policy document from JSON or YAML (same shape),
// as strictly as every API body (internal/jsonx: unknown fields, duplicate
// keys, invalid UTF-8, trailing data are refused). Input starting with '{' is
// read as JSON, anything else as YAML. It does not validate the
// rules; call Compile for that. Errors are *apperr.Error with code invalid.
func ParseDocument(data []byte) (Document, error) {
	js := data
	t := bytes.TrimSpace(data)
	if len(t) == 0 {
		return Document{}, apperr.Invalid("invalid policy document: empty")
	}
	if t[0] != '{' {
		if err := strictYAML(data); err != nil {
			return Document{}, err
		}
		var err error
		if js, err = yaml.YAMLToJSON(data); err != nil {
			return Document{}, apperr.Invalid("invalid policy document: %v", err)
		}
	}
	var doc Document
	if err := jsonx.Decode(js, &doc); err != nil {
		e := apperr.Invalid("invalid policy document: %v", err)
		if je, ok := err.(*jsonx.Error); ok && je.Field != "" {
			e.Details = map[string]any{"field": je.Field}
		}
		return Document{}, e
	}
	return doc, nil
}
