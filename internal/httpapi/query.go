package httpapi

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/airlockhq/airlock/internal/apperr"
)

// queryValues returns r's query parameters, refusing (400 invalid,
// details.field "query.<key>") a key that is not one of known, the
// parameters the route takes, and a key given more than once unless it is
// one of repeatable: every API handler that reads a query reads it
// through this. A filter's name mistyped (?agent_id= for ?agent=) would
// otherwise be ignored, and the answer hold everything the filter was
// meant to leave out: an auditor reading it would not know. url.Values
// keeps every value but Get answers the first, so ?agent=a&agent=b would
// otherwise read as agent=a, and ?status=pending&status=bogus pass a value
// never checked.
func queryValues(r *http.Request, known []string, repeatable ...string) (url.Values, error) {
	q := r.URL.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the same key named whatever the map's order
	for _, k := range keys {
		if !slices.Contains(known, k) && !slices.Contains(repeatable, k) {
			e := apperr.Invalid("unknown query parameter %q: this route takes %s", k, strings.Join(append(slices.Clone(known), repeatable...), ", "))
			e.Details = map[string]any{"field": "query." + k}
			return nil, e
		}
		if len(q[k]) > 1 && !slices.Contains(repeatable, k) {
			e := apperr.Invalid("query parameter %q is given %d times; it takes one value", k, len(q[k]))
			e.Details = map[string]any{"field": "query." + k}
			return nil, e
		}
	}
	return q, nil
}
