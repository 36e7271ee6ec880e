package policy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/internal/apperr"
)

func TestCompileValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		doc  string
	}{
		{"design policy", designPolicy},
		{"design fleet", designFleet},
		{"empty", `{}`},
		{"empty rules", `{"rules": []}`},
		{"approvals 0 means 1", `{"rules":[{"id":"a","tool":"x","effect":"approve","approvals":0}]}`},
		{"approvals 10", `{"rules":[{"id":"a","tool":"x","effect":"approve","approvals":10}]}`},
		{"timeout 7 days", `{"rules":[{"id":"a","tool":"x","effect":"approve","timeout":"168h"}]}`},
		{"timeout 1s", `{"rules":[{"id":"a","tool":"x","effect":"approve","timeout":"1s"}]}`},
		{"globs", `{"rules":[{"id":"a","tool":"fs.*","effect":"allow"},{"id":"b","tool":"*","effect":"deny"},
			{"id":"c","tool":"pay?ents.[a-z]*","effect":"deny"}]}`},
		{"id charset", `{"rules":[{"id":"A-z_0.9","tool":"x","effect":"allow"}]}`},
		{"every risk floor", `{"rules":[{"id":"a","tool":"x","effect":"deny","risk":"low"},{"id":"b","tool":"x","effect":"deny","risk":"medium"},
			{"id":"c","tool":"x","effect":"deny","risk":"high"},{"id":"d","tool":"x","effect":"deny","risk":"critical"}]}`},
		{"dyn condition", `{"rules":[{"id":"a","tool":"x","effect":"allow","when":"args.ok"}]}`},
		{"condition over every variable", `{"rules":[{"id":"a","tool":"x","effect":"allow",
			"when":"agent.id == 'bot' && risk.level == 'low' && risk.score < 50 && !risk.injection && size(risk.reasons) == 0 && tool == 'x'"}]}`},
		{"optional and strings extension", `{"rules":[{"id":"a","tool":"x","effect":"allow",
			"when":"args.?amount.orValue(0) > 10 || args.path.lowerAscii().startsWith('/tmp')"}]}`},
		{"one comprehension", `{"rules":[{"id":"a","tool":"exec","effect":"deny","when":"args.argv.exists(a, a == '-rf')"}]}`},
		{"all settings", `{"rules":[],"settings":{"injection_action":"allow","escalate_at":"","default_timeout":"1h",
			"amount_cap":0,"allowed_hosts":["example.com","*.example.org","localhost:8080"]}}`},
		{"escalate none", `{"rules":[],"settings":{"escalate_at":"none"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc, err := ParseDocument([]byte(tt.doc))
			require.NoError(t, err)
			c, err := Compile(doc, 7)
			require.NoError(t, err)
			require.Equal(t, 7, c.Version())
			require.NoError(t, doc.Validate())
		})
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	rule := func(fields string) string {
		return `{"rules":[{"id":"ok","tool":"fs.read","effect":"allow"},{` + fields + `}]}`
	}
	tests := []struct {
		name      string
		doc       string
		ruleIndex int
		ruleID    string
		field     string
		message   string // substring
	}{
		{"missing id", rule(`"tool":"x","effect":"allow"`), 1, "", "id", "required"},
		{"bad id characters", rule(`"id":"has space","tool":"x","effect":"allow"`), 1, "has space", "id", "characters"},
		{"id too long", rule(`"id":"` + strings.Repeat("a", 65) + `","tool":"x","effect":"allow"`), 1, strings.Repeat("a", 65), "id", "1-64"},
		{"duplicate id", rule(`"id":"ok","tool":"x","effect":"deny"`), 1, "ok", "id", `duplicate id "ok" (also rule 0)`},
		{"empty tool", rule(`"id":"r","effect":"allow"`), 1, "r", "tool", "required"},
		{"bad glob", rule(`"id":"r","tool":"[","effect":"allow"`), 1, "r", "tool", "invalid glob"},
		{"bad glob suffix", rule(`"id":"r","tool":"fs.[a-","effect":"allow"`), 1, "r", "tool", "invalid glob"},
		{"tool with space", rule(`"id":"r","tool":"fs read","effect":"allow"`), 1, "r", "tool", "whitespace"},
		{"tool in upper case", rule(`"id":"r","tool":"Payments.*","effect":"deny"`), 1, "r", "tool", `must be lower case`},
		{"tool with a slash", rule(`"id":"r","tool":"payments/send","effect":"deny"`), 1, "r", "tool", "a-z 0-9 . _ -"},
		{"tool with a colon", rule(`"id":"r","tool":"payments:*","effect":"deny"`), 1, "r", "tool", "a-z 0-9 . _ -"},
		{"tool with non-ASCII", rule(`"id":"r","tool":"paymentſ.send","effect":"deny"`), 1, "r", "tool", "a-z 0-9 . _ -"},
		{"tool too long", rule(`"id":"r","tool":"` + strings.Repeat("t", 129) + `","effect":"allow"`), 1, "r", "tool", "limit"},
		{"missing effect", rule(`"id":"r","tool":"x"`), 1, "r", "effect", "required"},
		{"bad effect", rule(`"id":"r","tool":"x","effect":"block"`), 1, "r", "effect", `unknown effect "block"`},
		{"approvals on allow rule", rule(`"id":"r","tool":"x","effect":"allow","approvals":2`), 1, "r", "approvals", "only allowed on approve"},
		{"approvals on deny rule", rule(`"id":"r","tool":"x","effect":"deny","approvals":1`), 1, "r", "approvals", "only allowed on approve"},
		{"approvals negative", rule(`"id":"r","tool":"x","effect":"approve","approvals":-1`), 1, "r", "approvals", "between 1 and 10"},
		{"approvals 11", rule(`"id":"r","tool":"x","effect":"approve","approvals":11`), 1, "r", "approvals", "between 1 and 10"},
		{"timeout on allow rule", rule(`"id":"r","tool":"x","effect":"allow","timeout":"1m"`), 1, "r", "timeout", "only allowed on approve"},
		{"timeout zero", rule(`"id":"r","tool":"x","effect":"approve","timeout":"0s"`), 1, "r", "timeout", "positive"},
		{"timeout negative", rule(`"id":"r","tool":"x","effect":"approve","timeout":"-5m"`), 1, "r", "timeout", "positive"},
		{"timeout 8 days", rule(`"id":"r","tool":"x","effect":"approve","timeout":"192h"`), 1, "r", "timeout", "at most 168h"},
		{"unknown risk floor", rule(`"id":"r","tool":"x","effect":"deny","risk":"severe"`), 1, "r", "risk", `unknown risk level "severe"`},
		{"CEL syntax error", rule(`"id":"r","tool":"x","effect":"deny","when":"args.amount >"`), 1, "r", "when", "Syntax error"},
		{"CEL undeclared variable", rule(`"id":"r","tool":"x","effect":"deny","when":"amount > 100"`), 1, "r", "when", "undeclared reference to 'amount'"},
		{"CEL type error", rule(`"id":"r","tool":"x","effect":"deny","when":"args.amount + \"x\" > 1"`), 1, "r", "when", "no matching overload"},
		{"CEL non-bool int", rule(`"id":"r","tool":"x","effect":"deny","when":"1 + 2"`), 1, "r", "when", "type int; a condition must be bool"},
		{"CEL non-bool string", rule(`"id":"r","tool":"x","effect":"deny","when":"agent.id + 'x'"`), 1, "r", "when", "must be bool"},
		{"CEL blank", rule(`"id":"r","tool":"x","effect":"deny","when":"   "`), 1, "r", "when", "Syntax error"},
		{"CEL too long", rule(`"id":"r","tool":"x","effect":"deny","when":"` + longExpression() + `"`), 1, "r", "when", "limit is 4096"},
		{"CEL too expensive", rule(`"id":"r","tool":"x","effect":"deny",
			"when":"args.items.exists(a, args.items.exists(b, args.items.exists(c, a == b && b == c)))"`), 1, "r", "when", "too expensive"},
		{"bad default", `{"default":"maybe","rules":[]}`, -1, "", "default", `unknown effect "maybe"`},
		{"bad injection_action", `{"rules":[],"settings":{"injection_action":"block"}}`, -1, "", "settings.injection_action", "unknown effect"},
		{"bad escalate_at", `{"rules":[],"settings":{"escalate_at":"extreme"}}`, -1, "", "settings.escalate_at", "unknown risk level"},
		{"zero default_timeout", `{"rules":[],"settings":{"default_timeout":"0s"}}`, -1, "", "settings.default_timeout", "positive"},
		{"huge default_timeout", `{"rules":[],"settings":{"default_timeout":"1000h"}}`, -1, "", "settings.default_timeout", "at most"},
		{"negative amount_cap", `{"rules":[],"settings":{"amount_cap":-1}}`, -1, "", "settings.amount_cap", ">= 0"},
		{"bad result_injection_action", `{"rules":[],"settings":{"result_injection_action":"block"}}`, -1, "", "settings.result_injection_action", `unknown value "block" (want flag or redact)`},
		{"empty result_injection_action", `{"rules":[],"settings":{"result_injection_action":""}}`, -1, "", "settings.result_injection_action", "want flag or redact"},
		{"empty allowed host", `{"rules":[],"settings":{"allowed_hosts":["ok.com",""]}}`, -1, "", "settings.allowed_hosts", "host 1"},
		{"URL as allowed host", `{"rules":[],"settings":{"allowed_hosts":["https://ok.com"]}}`, -1, "", "settings.allowed_hosts", "not a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc, err := ParseDocument([]byte(tt.doc))
			require.NoError(t, err)
			c, err := Compile(doc, 1)
			require.Nil(t, c)
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tt.ruleIndex, ve.RuleIndex, "rule index: %v", ve)
			require.Equal(t, tt.ruleID, ve.RuleID, "rule id: %v", ve)
			require.Equal(t, tt.field, ve.Field, "field: %v", ve)
			require.Contains(t, ve.Message, tt.message)
			require.Contains(t, err.Error(), tt.field)
		})
	}
}

func longExpression() string {
	var b strings.Builder
	b.WriteString("true")
	for b.Len() <= MaxExpressionLength {
		b.WriteString(" && true")
	}
	return b.String()
}

func TestCompileTooManyRules(t *testing.T) {
	t.Parallel()
	doc := Document{Rules: make([]Rule, MaxRules+1)}
	for i := range doc.Rules {
		doc.Rules[i] = Rule{ID: fmt.Sprintf("r%d", i), Tool: "x", Effect: Allow}
	}
	_, err := Compile(doc, 1)
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, -1, ve.RuleIndex)
	require.Equal(t, "rules", ve.Field)

	doc.Rules = doc.Rules[:MaxRules]
	_, err = Compile(doc, 1)
	require.NoError(t, err)
}

func TestCompileRejectsNonFiniteAmountCap(t *testing.T) {
	t.Parallel()
	inf := 1.0
	for range 2000 {
		inf *= 10
	}
	_, err := Compile(Document{Settings: Settings{AmountCap: &inf}}, 1)
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "settings.amount_cap", ve.Field)
}

func TestCompileTimeoutFromGo(t *testing.T) {
	t.Parallel()
	_, err := Compile(Document{Rules: []Rule{{ID: "a", Tool: "x", Effect: Approve, Timeout: ptr(Duration(8 * 24 * time.Hour))}}}, 1)
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "timeout", ve.Field)
}

func TestValidationErrorAsAppError(t *testing.T) {
	t.Parallel()
	_, err := Compile(Document{Rules: []Rule{{ID: "big-spend", Tool: "payments.send", Effect: Approve, When: "args.amount >"}}}, 1)
	require.Error(t, err)
	require.Equal(t, apperr.CodeValidation, apperr.CodeOf(err))
	ae, ok := apperr.As(err)
	require.True(t, ok)
	require.Equal(t, map[string]any{"rule_index": 0, "rule_id": "big-spend", "field": "when"}, ae.Details)
	require.Contains(t, ae.Message, `policy rule 0 ("big-spend"): when: invalid CEL expression`)

	var ve *ValidationError
	require.True(t, errors.As(err, &ve))

	docErr := &ValidationError{RuleIndex: -1, Field: "default", Message: "bad"}
	require.Equal(t, "policy: default: bad", docErr.Error())
	require.Equal(t, map[string]any{"field": "default"}, docErr.Details())
	require.Equal(t, "policy rule 2: id: id is required", (&ValidationError{RuleIndex: 2, Field: "id", Message: "id is required"}).Error())
}
