package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/airlockhq/airlock/internal/apperr"
)

// CleanInput refuses (400) a request whose path or query holds NUL or
// invalid UTF-8, decoded or not: such text cannot be stored in Postgres
// (a 500 at best) and does not read the same to every layer. Bodies are
// checked by the strict decoder (jsonx), with the same rule.
func CleanInput(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if field := badInput(r.URL); field != "" {
			e := apperr.Invalid("%s holds NUL or invalid UTF-8", field)
			e.Details = map[string]any{"field": field}
			writeError(w, r, nil, e)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// badInput names the first part of u that holds NUL or invalid UTF-8, or "".
func badInput(u *url.URL) string {
	if bad(u.Path) || bad(u.RawPath) {
		return "path"
	}
	if u.RawQuery == "" {
		return ""
	}
	if bad(u.RawQuery) {
		return "query"
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "" // malformed escapes: the handlers' parsers refuse or ignore them
	}
	for k, vs := range q {
		if bad(k) {
			return "query." + strconv.QuoteToASCII(k)
		}
		for _, v := range vs {
			if bad(v) {
				return "query." + k
			}
		}
	}
	return ""
}

func bad(s string) bool { return strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) }
