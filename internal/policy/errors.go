package policy

import (
	"fmt"

	"github.com/airlockhq/airlock/internal/apperr"
)

// ValidationError describes why a policy document is invalid. The HTTP layer
// reports it as 422 with these details; errors.As also finds an
// *apperr.Error (code validation_failed) in it.
type ValidationError struct {
	// RuleIndex is the index of the offending rule in Document.Rules, or -1
	// when the problem is not about one rule.
	RuleIndex int
	// RuleID is the offending rule's id, when it has one.
	RuleID string
	// Field is the JSON name of the offending field: a rule field ("when",
	// "tool", …) when RuleIndex >= 0, else "default", "rules" or
	// "settings.<name>".
	Field string
	// Message says what is wrong, in words fit for the API client.
	Message string
}

func (e *ValidationError) Error() string {
	if e.RuleIndex < 0 {
		return fmt.Sprintf("policy: %s: %s", e.Field, e.Message)
	}
	if e.RuleID != "" {
		return fmt.Sprintf("policy rule %d (%q): %s: %s", e.RuleIndex, e.RuleID, e.Field, e.Message)
	}
	return fmt.Sprintf("policy rule %d: %s: %s", e.RuleIndex, e.Field, e.Message)
}

// Details returns the error's fields for an API error body:
// rule_index (omitted when -1), rule_id (when set) and field.
func (e *ValidationError) Details() map[string]any {
	d := map[string]any{"field": e.Field}
	if e.RuleIndex >= 0 {
		d["rule_index"] = e.RuleIndex
	}
	if e.RuleID != "" {
		d["rule_id"] = e.RuleID
	}
	return d
}

// AppError converts e into the project's error type with code
// validation_failed and Details.
func (e *ValidationError) AppError() *apperr.Error {
	ae := apperr.Validation("%s", e.Error())
	ae.Details = e.Details()
	return ae
}

// As lets errors.As(err, &appErr) find an *apperr.Error in a
// *ValidationError, so apperr.CodeOf reports validation_failed.
func (e *ValidationError) As(target any) bool {
	if p, ok := target.(**apperr.Error); ok {
		*p = e.AppError()
		return true
	}
	return false
}

func docError(field, format string, args ...any) *ValidationError {
	return &ValidationError{RuleIndex: -1, Field: field, Message: fmt.Sprintf(format, args...)}
}

func ruleError(index int, id, field, format string, args ...any) *ValidationError {
	return &ValidationError{RuleIndex: index, RuleID: id, Field: field, Message: fmt.Sprintf(format, args...)}
}
