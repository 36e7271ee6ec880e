package policy

import (
	"bytes"
	"slices"

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
}

// Clone returns a deep copy of d that shares no memory with it.
func (d Document) Clone() Document {
	out := Document{Default: d.Default, Rules: make([]Rule, len(d.Rules)), Settings: d.Settings.clone()}
	for i, r := range d.Rules {
		if r.Timeout != nil {
			t := *r.Timeout
			r.Timeout = &t
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
	return out
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
