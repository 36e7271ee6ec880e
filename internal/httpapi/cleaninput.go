package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/airlockhq/airlock/internal/apperr"
)

// CleanInput refuses (400) a request whose path, query or form holds NUL or
// invalid UTF-8, decoded or not: such text cannot be stored in Postgres
// (a 500 at best) and does not read the same to every layer. Bodies are
// checked by the strict decoder (jsonx), with the same rule.
//
// HTML form posts (the console's) are checked the same way: their body is
// read (up to maxFormCheck bytes; the console refuses longer forms itself)
// and put back for the handler.
func CleanInput(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		field := badInput(r.URL)
		if field == "" && mediaType(r) == "application/x-www-form-urlencoded" && r.Body != nil {
			body, err := io.ReadAll(io.LimitReader(r.Body, maxFormCheck+1))
			if err != nil {
				writeError(w, r, nil, apperr.Invalid("the form could not be read"))
				return
			}
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
			if len(body) <= maxFormCheck {
				field = badValues(string(body), "form")
			}
		}
		if field != "" {
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
	return badValues(u.RawQuery, "query")
}

// maxFormCheck is the longest form body CleanInput reads (the console's
// limit).
const maxFormCheck = 1 << 20

// badValues names the first key or value of the URL-encoded raw that holds
// NUL or invalid UTF-8 ("query.agent"), or "".
func badValues(raw, prefix string) string {
	if bad(raw) {
		return prefix
	}
	// A malformed pair ("%zz", ";") makes ParseQuery return an error but
	// keep every other pair, which is what handlers read (r.URL.Query()
	// drops the error): those are checked whatever the error.
	q, _ := url.ParseQuery(raw)
	for k, vs := range q {
		if bad(k) {
			return prefix + "." + strconv.QuoteToASCII(k)
		}
		for _, v := range vs {
			if bad(v) {
				return prefix + "." + k
			}
		}
	}
	return ""
}

func bad(s string) bool { return strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) }
