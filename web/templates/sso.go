package templates

import "net/url"

// ssoLoginURL is where "Sign in with SSO" starts, coming back to next.
func ssoLoginURL(next string) string {
	if next == "" {
		return "/ui/sso/login"
	}
	return "/ui/sso/login?" + url.Values{"next": {next}}.Encode()
}
