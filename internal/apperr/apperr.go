// Package apperr defines the one error type Airlock's domain packages return
// to callers: a stable machine-readable code plus a human message. The HTTP
// layer maps codes to statuses in one place; internal details never travel in
// an *Error, they are wrapped errors that get logged.
package apperr

import (
	"errors"
	"fmt"
	"time"
)

// Code is a stable snake_case error code that clients can switch on.
type Code string

// The codes Airlock uses. Each maps to one HTTP status in internal/httpapi.
const (
	CodeInvalid          Code = "invalid"            // malformed or semantically wrong input (400)
	CodeInvalidJSON      Code = "invalid_json"       // body is not acceptable JSON (400)
	CodeValidation       Code = "validation_failed"  // well-formed input that fails validation, e.g. bad CEL (422)
	CodeWrongPhrase      Code = "wrong_confirmation" // confirmation phrase does not match (422)
	CodeUnauthorized     Code = "unauthorized"       // no or bad credentials (401)
	CodeForbidden        Code = "forbidden"          // authenticated but not allowed (403)
	CodeNotFound         Code = "not_found"          // no such resource, or not visible to the caller (404)
	CodeConflict         Code = "conflict"           // state changed under the caller, duplicate, already decided (409)
	CodeTooLarge         Code = "body_too_large"     // request body over the limit (413)
	CodeUnsupportedMedia Code = "unsupported_media_type"
	CodeRateLimited      Code = "rate_limited"        // too many attempts (429)
	CodePrecondition     Code = "precondition_failed" // If-Match names a version that is no longer current (412)
	CodeMethod           Code = "method_not_allowed"  // the path exists but not with this method (405)
	CodeUpgradeRequired  Code = "upgrade_required"    // a websocket endpoint asked without the upgrade (426)
	CodeUnavailable      Code = "unavailable"         // a dependency is down; fail closed (503)
	CodeInternal         Code = "internal"            // anything else (500); message is generic
)

// Error is a domain error with a code safe to show to clients.
type Error struct {
	Code    Code
	Message string
	// Details carries optional structured context for the client, such as the
	// index of an invalid policy rule. It must never hold internal state.
	Details map[string]any
	// RetryAfter, when positive, says when trying again can succeed (the
	// HTTP layer sends it as Retry-After).
	RetryAfter time.Duration
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// New returns an *Error with the given code and formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid reports malformed input.
func Invalid(format string, args ...any) *Error { return New(CodeInvalid, format, args...) }

// NotFound reports a missing resource.
func NotFound(format string, args ...any) *Error { return New(CodeNotFound, format, args...) }

// Conflict reports a lost race or a duplicate.
func Conflict(format string, args ...any) *Error { return New(CodeConflict, format, args...) }

// Forbidden reports a caller without the right to do this.
func Forbidden(format string, args ...any) *Error { return New(CodeForbidden, format, args...) }

// Unauthorized reports missing or unacceptable credentials.
func Unauthorized(format string, args ...any) *Error { return New(CodeUnauthorized, format, args...) }

// RateLimited reports too many attempts; retry after d.
func RateLimited(d time.Duration, format string, args ...any) *Error {
	e := New(CodeRateLimited, format, args...)
	e.RetryAfter = d
	return e
}

// Validation reports well-formed input that fails semantic validation.
func Validation(format string, args ...any) *Error { return New(CodeValidation, format, args...) }

// As returns the *Error in err's chain, if any.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// CodeOf returns err's code, or CodeInternal for errors that carry none.
func CodeOf(err error) Code {
	if e, ok := As(err); ok {
		return e.Code
	}
	return CodeInternal
}
