package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/jsonx"
)

// MaxBodyBytes is the largest request body accepted.
const MaxBodyBytes = 1 << 20

// StatusOf maps an error code to its HTTP status: the one place this
// happens (the console uses it too).
func StatusOf(code apperr.Code) int {
	switch code {
	case apperr.CodeInvalid, apperr.CodeInvalidJSON:
		return http.StatusBadRequest
	case apperr.CodeValidation, apperr.CodeWrongPhrase:
		return http.StatusUnprocessableEntity
	case apperr.CodeUnauthorized:
		return http.StatusUnauthorized
	case apperr.CodeForbidden:
		return http.StatusForbidden
	case apperr.CodeNotFound:
		return http.StatusNotFound
	case apperr.CodeConflict:
		return http.StatusConflict
	case apperr.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case apperr.CodeUnsupportedMedia:
		return http.StatusUnsupportedMediaType
	case apperr.CodeRateLimited:
		return http.StatusTooManyRequests
	case apperr.CodePrecondition:
		return http.StatusPreconditionFailed
	case apperr.CodeMethod:
		return http.StatusMethodNotAllowed
	case apperr.CodeUpgradeRequired:
		return http.StatusUpgradeRequired
	case apperr.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    apperr.Code    `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// writeError answers with the error body. Errors without a code are logged
// and reported as a generic internal error: details never reach clients.
// A refusal of a request whose token only its route's statement would have
// checked confirms the token first (confirmToken).
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	e, ok := apperr.As(err)
	if !ok {
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		e = &apperr.Error{Code: apperr.CodeInternal, Message: "internal error"}
		if r.Context().Err() != nil {
			e = &apperr.Error{Code: apperr.CodeUnavailable, Message: "request cancelled"}
		}
	}
	e = confirmToken(r, e)
	SetRetryAfter(w, e)
	writeJSON(w, StatusOf(e.Code), errorBody{Error: errorDetail{Code: e.Code, Message: e.Message, Details: e.Details}})
}

// SetRetryAfter sends err's RetryAfter, if it has one, as the Retry-After
// header (whole seconds, rounded up) and returns it in seconds (0: none).
// The console uses it too.
func SetRetryAfter(w http.ResponseWriter, err error) int {
	e, ok := apperr.As(err)
	if !ok || e.RetryAfter <= 0 {
		return 0
	}
	secs := int(math.Ceil(e.RetryAfter.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	return secs
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // JSON served as application/json with nosniff: "args.amount > 100" stays readable
	_ = enc.Encode(v)
}

// jsonOnly is the media type of every JSON body.
var jsonOnly = []string{"application/json"}

// readBody reads a JSON request body up to MaxBodyBytes, refusing more with
// 413 and a non-empty body that is not labelled application/json with 415.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return readBodyAs(w, r, jsonOnly)
}

// readBodyAs is readBody for a body of one of the media types allowed.
func readBodyAs(w http.ResponseWriter, r *http.Request, allowed []string) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, apperr.New(apperr.CodeTooLarge, "request body is larger than %d bytes", MaxBodyBytes)
	}
	if err != nil {
		return nil, apperr.Invalid("reading request body: %v", err)
	}
	if len(body) > 0 && !slices.Contains(allowed, mediaType(r)) {
		return nil, apperr.New(apperr.CodeUnsupportedMedia, "Content-Type must be %s", strings.Join(allowed, " or "))
	}
	return body, nil
}

// mediaType returns the request's media type ("" when absent).
func mediaType(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "invalid"
	}
	return mt
}

// decode reads a JSON body strictly into v.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	_, err := decodeSized(w, r, v)
	return err
}

// decodeSized is decode that also returns the body's size.
func decodeSized(w http.ResponseWriter, r *http.Request, v any) (int, error) {
	body, err := readBody(w, r)
	if err != nil {
		return 0, err
	}
	return len(body), decodeJSON(body, v)
}

// decodeOptional is decode for an endpoint whose body is optional: an empty
// body leaves v as it is; any other is read and decoded as strictly (415
// when not JSON, unknown fields refused). An endpoint that takes no field
// passes a *struct{}, so that what it would otherwise drop is refused.
func decodeOptional(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readBody(w, r)
	if err != nil || len(body) == 0 {
		return err
	}
	return decodeJSON(body, v)
}

func decodeJSON(body []byte, v any) error {
	if err := jsonx.Decode(body, v); err != nil {
		e := &apperr.Error{Code: apperr.CodeInvalidJSON, Message: err.Error()}
		if je, ok := err.(*jsonx.Error); ok && je.Field != "" {
			e.Details = map[string]any{"field": je.Field}
		}
		return e
	}
	return nil
}
