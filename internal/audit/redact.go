package audit

import (
	"regexp"
	"strings"
)

// Redacted replaces a secret wherever one is found.
const Redacted = "[REDACTED]"

// secretKey matches argument names whose values are secrets whatever they
// look like.
var secretKey = regexp.MustCompile(`(?i)(pass(word|wd|phrase)?|secret|token|api[-_]?key|apikey|access[-_]?key|private[-_]?key|authorization|auth[-_]?header|credential|cookie|session[-_]?id|client[-_]?secret|signing[-_]?key|ssn|card[-_]?number|cvv)`)

// secretValue matches secrets by their shape inside any string.
var secretValue = []*regexp.Regexp{
	regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)`),
	regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{8,}=*`),
	regexp.MustCompile(`(?i)\bbasic\s+[A-Za-z0-9+/]{12,}=*`),
	regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`), // JWT
	regexp.MustCompile(`\b(AKIA|ASIA)[A-Z0-9]{16}\b`),                               // AWS access key id
	regexp.MustCompile(`\bsk-(proj-|ant-)?[A-Za-z0-9_-]{20,}`),                      // OpenAI / Anthropic
	regexp.MustCompile(`\b(sk|rk|pk)_(live|test)_[A-Za-z0-9]{16,}`),                 // Stripe
	regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{30,}`),                              // GitHub
	regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{30,}`),
	regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{20,}`),                   // GitLab
	regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`),              // Slack
	regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}`),                      // Google API key
	regexp.MustCompile(`\bnpm_[A-Za-z0-9]{36}`),                        // npm
	regexp.MustCompile(`\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}`), // SendGrid
	regexp.MustCompile(`(?i)\b(aws_secret_access_key|password|passwd|secret|api_key|token)\s*[=:]\s*[^\s&"',;]+`),
	regexp.MustCompile(`(?i)(://[^/\s:@]+:)[^@\s/]+@`), // credentials in URLs
}

// Redact returns a deep copy of args with secrets replaced by Redacted: the
// values of secret-named keys, and secret-shaped substrings anywhere.
func Redact(args map[string]any) map[string]any {
	if args == nil {
		return nil
	}
	out, _ := redactValue(args, 0).(map[string]any)
	return out
}

// RedactString replaces secret-shaped substrings of s.
func RedactString(s string) string {
	for _, re := range secretValue {
		if !re.MatchString(s) {
			continue
		}
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			// Keep a URL's scheme and user, drop its password.
			if strings.HasPrefix(m, "://") {
				i := strings.LastIndex(m[:len(m)-1], ":")
				return m[:i+1] + Redacted + "@"
			}
			return Redacted
		})
	}
	return s
}

const maxRedactDepth = 64

func redactValue(v any, depth int) any {
	if depth > maxRedactDepth {
		return Redacted // deeper than any legitimate document; do not store it
	}
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, val := range x {
			if secretKey.MatchString(k) && !isEmpty(val) {
				m[k] = Redacted
				continue
			}
			m[k] = redactValue(val, depth+1)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, val := range x {
			s[i] = redactValue(val, depth+1)
		}
		return s
	case string:
		return RedactString(x)
	default:
		return v
	}
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return true // a flag like "use_token": true reveals nothing
	}
	return false
}
