// Package openapitest checks HTTP exchanges against the OpenAPI document
// (internal/openapi) with kin-openapi: the shared test helpers wrap their
// HTTP clients in Transport so every response of every API test is
// validated.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/airlockhq/airlock/internal/openapi"
)

// Validator checks responses against the document.
type Validator struct {
	doc    *openapi3.T
	router routers.Router
	errSch *openapi3.Schema
}

var load = sync.OnceValues(func() (*Validator, error) {
	data, err := openapi.JSON()
	if err != nil {
		return nil, err
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("openapitest: loading the document: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapitest: the document is not valid OpenAPI: %w", err)
	}
	// Routes are matched on the path alone: the server URL "/" stands for
	// whichever address the test server listens on.
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("openapitest: building the router: %w", err)
	}
	errRef := doc.Components.Schemas["Error"]
	if errRef == nil || errRef.Value == nil {
		return nil, errors.New("openapitest: the document has no Error schema")
	}
	return &Validator{doc: doc, router: router, errSch: errRef.Value}, nil
})

// Load returns the validator of the embedded document (loaded and checked
// once per test binary).
func Load() (*Validator, error) { return load() }

// Doc returns the loaded document.
func (v *Validator) Doc() *openapi3.T { return v.doc }

// Covers reports whether the document speaks for path: the JSON API and the
// operational endpoints, not the console's pages.
func Covers(path string) bool {
	return strings.HasPrefix(path, "/api/") || path == "/healthz" || path == "/readyz" || path == "/metrics"
}

// ValidateResponse checks one response (status, headers, body) to req
// against the document. A path the document does not know must be answered
// 404 with the error body; a known path with a method it does not list
// must be answered 405 with Allow and the error body.
//
// reqBody is the request's body (nil when it is not known): when the server
// accepted the request (a 2xx), the request is validated too.
func (v *Validator) ValidateResponse(req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	route, params, err := v.router.FindRoute(req)
	if err != nil && v.otherMethod(req) {
		err = routers.ErrMethodNotAllowed
	} else if err != nil {
		err = routers.ErrPathNotFound
	}
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		if status != http.StatusNotFound {
			return fmt.Errorf("%s %s: path not in the document, answered %d (want 404)", req.Method, req.URL.Path, status)
		}
		return v.errorBody(req, header, body)
	case errors.Is(err, routers.ErrMethodNotAllowed):
		if status != http.StatusMethodNotAllowed {
			return fmt.Errorf("%s %s: method not in the document, answered %d (want 405)", req.Method, req.URL.Path, status)
		}
		if header.Get("Allow") == "" {
			return fmt.Errorf("%s %s: 405 without an Allow header", req.Method, req.URL.Path)
		}
		return v.errorBody(req, header, body)
	case err != nil:
		return fmt.Errorf("%s %s: finding the route: %w", req.Method, req.URL.Path, err)
	}
	if status == http.StatusSwitchingProtocols {
		if _, ok := route.Operation.Responses.Map()["101"]; !ok {
			return fmt.Errorf("%s %s: 101 is not a documented answer", req.Method, req.URL.Path)
		}
		return nil
	}
	if status < 300 && reqBody != nil {
		// What the server accepted, the document must accept too: a strict
		// request schema that refuses a field the server takes (or the other
		// way round) is drift.
		rin := &openapi3filter.RequestValidationInput{
			Request: withBody(req, reqBody), PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
		}
		if err := openapi3filter.ValidateRequest(req.Context(), rin); err != nil {
			return fmt.Errorf("%s %s -> %d: the server accepted a request the document refuses: %w\nrequest: %s",
				req.Method, req.URL.Path, status, err, clip(reqBody))
		}
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status: status,
		Header: header,
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			MultiError:            true,
			// An NDJSON stream is many JSON values; its lines are not read.
			ExcludeResponseBody: strings.HasPrefix(header.Get("Content-Type"), "application/x-ndjson"),
		},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(req.Context(), in); err != nil {
		return fmt.Errorf("%s %s -> %d: %w\nbody: %s", req.Method, req.URL.Path, status, err, clip(body))
	}
	return nil
}

// withBody returns a copy of req reading body.
func withBody(req *http.Request, body []byte) *http.Request {
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return r
}

// otherMethod reports whether the document has req's path with another
// method (the router tells a wrong method from a wrong path only for paths
// without parameters).
func (v *Validator) otherMethod(req *http.Request) bool {
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == req.Method {
			continue
		}
		other := req.Clone(req.Context())
		other.Method = m
		if _, _, err := v.router.FindRoute(other); err == nil {
			return true
		}
	}
	return false
}

// errorBody checks an answer that must be the error body.
func (v *Validator) errorBody(req *http.Request, header http.Header, body []byte) error {
	if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("%s %s: error answer of type %q, want application/json", req.Method, req.URL.Path, ct)
	}
	var val any
	if err := json.Unmarshal(body, &val); err != nil {
		return fmt.Errorf("%s %s: error answer is not JSON: %w", req.Method, req.URL.Path, err)
	}
	if err := v.errSch.VisitJSON(val, openapi3.EnableJSONSchema2020()); err != nil {
		return fmt.Errorf("%s %s: error answer does not match Error: %w\nbody: %s", req.Method, req.URL.Path, err, clip(body))
	}
	return nil
}

func clip(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}

// Transport wraps next (nil: http.DefaultTransport) so that every response
// to a path the document covers is validated; failures go to report. The
// response body is read in full and handed on unchanged. Streams (NDJSON,
// websockets) are checked by status and media type only.
func Transport(report func(error), next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{report: report, next: next}
}

type transport struct {
	report func(error)
	next   http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	reqBody := []byte{}
	if req.Body != nil && req.Body != http.NoBody && Covers(req.URL.Path) {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		reqBody = b
		req = withBody(req, b)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil || !Covers(req.URL.Path) {
		return resp, err
	}
	v, lerr := Load()
	if lerr != nil {
		t.report(lerr)
		return resp, err
	}
	var body []byte
	if isStream(resp) {
		// A stream's lines are not one JSON value; check its answer without
		// holding it in memory.
	} else if resp.Body != nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			return resp, err
		}
	}
	if verr := v.ValidateResponse(req, reqBody, resp.StatusCode, resp.Header, body); verr != nil {
		t.report(verr)
	}
	return resp, nil
}

func isStream(resp *http.Response) bool {
	return resp.StatusCode == http.StatusSwitchingProtocols ||
		strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson")
}
