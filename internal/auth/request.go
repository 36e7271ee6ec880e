package auth

import (
	"net/http"
	"strings"
)

// SessionCookie is the name of the browser session cookie.
const SessionCookie = "airlock_session"

// Credentials returns a request's token: the Authorization: Bearer header
// when there is one (a malformed header yields "", never the cookie), else
// the session cookie, and whether it came from the cookie: true only when
// the request carries one (a request with neither is no browser session).
// It is the one place a request's token is read.
func Credentials(r *http.Request) (raw string, fromCookie bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return "", false
		}
		return strings.TrimSpace(tok), false
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		return c.Value, true
	}
	return "", false
}

// SessionToken returns the session cookie's token ("" when absent).
func SessionToken(r *http.Request) string {
	if c, err := r.Cookie(SessionCookie); err == nil {
		return c.Value
	}
	return ""
}
