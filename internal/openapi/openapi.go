// Package openapi holds Airlock's written HTTP contract: the OpenAPI 3.1
// document of the whole JSON API, embedded in the binary and served at
// GET /api/v1/openapi.json. Tests validate every response against it
// (internal/openapi/openapitest) and check the Go client's types against it.
package openapi

import (
	_ "embed"
	"fmt"
	"sync"

	"sigs.k8s.io/yaml"
)

// source is the document as written (YAML, for comments and review).
//
//go:embed openapi.yaml
var source []byte

var jsonDoc = sync.OnceValues(func() ([]byte, error) {
	b, err := yaml.YAMLToJSON(source)
	if err != nil {
		return nil, fmt.Errorf("openapi: converting the embedded document: %w", err)
	}
	return b, nil
})

// JSON returns the document as JSON. The embedded YAML is checked by the
// package's tests, so an error here means a broken build.
func JSON() ([]byte, error) { return jsonDoc() }
