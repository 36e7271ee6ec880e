package client_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/openapi/openapitest"
)

// TestClientTypesMatchTheDocument walks each response type of the client
// and the document's schema it decodes, and fails on a field the client
// lacks or has beyond the document, at every depth, so the client and the
// server cannot drift apart.
func TestClientTypesMatchTheDocument(t *testing.T) {
	v, err := openapitest.Load()
	require.NoError(t, err)
	schemas := v.Doc().Components.Schemas
	errorDetail := schemas["Error"].Value.Properties["error"].Value
	for _, tc := range []struct {
		typ    any
		schema *openapi3.Schema
	}{
		{client.Action{}, schemas["Action"].Value},
		{client.ActionPage{}, schemas["ActionPage"].Value},
		{client.LoginResponse{}, schemas["LoginResponse"].Value},
		{client.SSOConfig{}, schemas["SSOConfig"].Value},
		{client.AgentToken{}, schemas["TokenResponse"].Value},
		{client.PolicyVersion{}, schemas["PolicyVersion"].Value},
		{client.Event{}, schemas["Event"].Value},
		{client.EventPage{}, schemas["EventPage"].Value},
		{client.VerifyReport{}, schemas["VerifyReport"].Value},
		{client.Job{}, schemas["Lease"].Value},
		{client.JobResult{}, schemas["JobResult"].Value},
		{client.Error{}, errorDetail},
		{client.Grant{}, schemas["Grant"].Value},
		{client.Suspension{}, schemas["Suspension"].Value},
		{client.HeartbeatAnswer{}, schemas["HeartbeatResponse"].Value},
		{client.Agent{}, schemas["Agent"].Value},
		{client.AgentList{}, schemas["AgentList"].Value},
		{client.NewAgent{}, schemas["CreateAgentRequest"].Value},
		{client.MCPServer{}, schemas["MCPServer"].Value},
		{client.MCPRegistration{}, schemas["MCPRegistration"].Value},
		{client.MCPServerList{}, schemas["MCPServerList"].Value},
	} {
		typ := reflect.TypeOf(tc.typ)
		t.Run(typ.Name(), func(t *testing.T) {
			for _, problem := range compare(typ, tc.schema, typ.Name()) {
				t.Error(problem)
			}
		})
	}
}

var timeType = reflect.TypeOf(time.Time{})

// compare lists the differences between a struct's JSON fields and an
// object schema's properties, recursing into nested objects and arrays.
func compare(typ reflect.Type, s *openapi3.Schema, at string) []string {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		typ = typ.Elem()
		if typ.Kind() != reflect.Struct && s.Items != nil {
			s = s.Items.Value
		}
	}
	if typ.Kind() != reflect.Struct || typ == timeType || len(s.Properties) == 0 {
		return nil
	}
	var problems []string
	fields := map[string]reflect.Type{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			// An embedded struct's fields are the outer object's.
			for j := range f.Type.NumField() {
				g := f.Type.Field(j)
				if n, _, _ := strings.Cut(g.Tag.Get("json"), ","); n != "" && n != "-" {
					fields[n] = g.Type
				}
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	for name, ft := range fields {
		p, ok := s.Properties[name]
		if !ok {
			problems = append(problems, at+"."+name+": the client has it, the document does not")
			continue
		}
		problems = append(problems, compare(ft, p.Value, at+"."+name)...)
	}
	for name := range s.Properties {
		if _, ok := fields[name]; !ok {
			problems = append(problems, at+"."+name+": the document has it, the client does not")
		}
	}
	slices.Sort(problems)
	return problems
}
