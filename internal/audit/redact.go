package audit

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Redacted replaces a secret wherever one is found.
const Redacted = "[REDACTED]"

// Argument names whose values are secrets whatever they look like are
// read as words: a name is split at what is not a letter or digit, between
// a lower-case letter and an upper-case one, before the last of a run of
// capitals followed by a lower-case letter, and between letters and digits
// (apiKey, X-Api-Key, DB_PASSWORD, APIKey, oauth2Token). It names a secret
// when one word is a secret word, or a run of its words is a secret phrase
// (secretKeyWords): never for part of a word, so "bypass_cache",
// "passport", "passage" and "classname" name no secret, and an agent
// cannot hide a command from the reviewer under such a name. A word
// written of several run together counts by its end ("dbpassword",
// "githubtoken", "clientsecret"), or, for the long words no other word
// holds, anywhere ("passwordhash"). A name whose last word says it names
// where a secret is or what kind, not the secret (secret_name, token_type,
// password_file, ssh_key_path), is no secret's: its value may decide what
// the call does.
var (
	// secretKeyWords: words and phrases (space-separated) naming a secret.
	// A session id is one, as a cookie is: it lets its holder in.
	secretKeyWords = phrases("pass", "password", "passwords", "passwd", "passphrase", "secret", "secrets",
		"token", "tokens", "apikey", "api key", "api keys", "accesskey", "access key", "privatekey",
		"private key", "signingkey", "signing key", "secretkey", "authorization", "auth header",
		"credential", "credentials", "cookie", "cookies", "sessionid", "session id", "ssn", "cvv",
		"cardnumber", "card number", "credit card", "connectionstring", "connection string", "dsn")
	// secretKeyEnds end a word of several run together that names a
	// secret ("dbpassword", "accesstoken"); not "pass" (bypass, compass,
	// surpass).
	secretKeyEnds = []string{"password", "passwords", "passwd", "passphrase", "secret", "secrets", "token", "tokens",
		"apikey", "accesskey", "privatekey", "signingkey", "secretkey", "authorization", "credential", "credentials",
		"cookie", "cookies", "sessionid", "ssn", "cvv", "cardnumber", "connectionstring", "dsn"}
	// secretKeyInside are found anywhere in a word: no other word holds
	// them.
	secretKeyInside = []string{"password", "passwd", "passphrase", "credential", "apikey", "privatekey", "connectionstring"}
	// notSecretLast are last words naming where a secret is or what kind.
	notSecretLast = map[string]bool{"file": true, "files": true, "filename": true, "filepath": true, "path": true,
		"paths": true, "dir": true, "directory": true, "name": true, "names": true, "type": true}
)

// secretKeyHints: every name isSecretKey accepts holds one of them
// (lowercase): a name holding none is not split into words.
var secretKeyHints = []string{"pass", "secret", "token", "key", "auth", "credential", "cookie", "session", "ssn", "card", "cvv", "connection", "dsn"}

func phrases(ps ...string) [][]string {
	out := make([][]string, len(ps))
	for i, p := range ps {
		out[i] = strings.Fields(p)
	}
	return out
}

func isSecretKey(k string) bool {
	lower := strings.ToLower(k)
	hinted := false
	for _, h := range secretKeyHints {
		if strings.Contains(lower, h) {
			hinted = true
			break
		}
	}
	if !hinted {
		return false
	}
	words := keyWords(k)
	if len(words) == 0 || len(words) > 1 && notSecretLast[words[len(words)-1]] {
		return false
	}
	for i, w := range words {
		for _, p := range secretKeyWords {
			if len(p) <= len(words)-i && slices.Equal(p, words[i:i+len(p)]) {
				return true
			}
		}
		for _, e := range secretKeyEnds {
			if strings.HasSuffix(w, e) {
				return true
			}
		}
		for _, in := range secretKeyInside {
			if strings.Contains(w, in) {
				return true
			}
		}
	}
	return false
}

// keyWords splits an argument's name into lower-case words (see
// secretKeyWords).
func keyWords(k string) []string {
	var words []string
	rs := []rune(k)
	start := -1
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			if start >= 0 {
				words = append(words, strings.ToLower(string(rs[start:i])))
				start = -1
			}
			continue
		}
		if start >= 0 && wordBreak(rs, i) {
			words = append(words, strings.ToLower(string(rs[start:i])))
			start = -1
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		words = append(words, strings.ToLower(string(rs[start:])))
	}
	return words
}

// wordBreak reports a word starting at rs[i], a letter or digit after
// another: apiKey, APIKey, oauth2Token.
func wordBreak(rs []rune, i int) bool {
	prev, r := rs[i-1], rs[i]
	switch {
	case unicode.IsDigit(prev) != unicode.IsDigit(r):
		return true
	case unicode.IsLower(prev) && unicode.IsUpper(r):
		return true
	case unicode.IsUpper(prev) && unicode.IsUpper(r):
		return i+1 < len(rs) && unicode.IsLower(rs[i+1])
	}
	return false
}

// secretPattern finds secrets by their shape inside any string.
type secretPattern struct {
	// hints are lowercase substrings one of which every match contains: a
	// string holding none is not run through re. Redaction runs on every
	// submitted string, and most hold no secret.
	hints []string
	re    *regexp.Regexp
	// keep and tail are the indexes of re's groups named so (-1 for none):
	// what a match starts with (a URL's user, a flag's name) or ends with
	// (a URL password's "@") that is no secret and stays. What lies
	// between is the secret, replaced by Redacted.
	keep, tail int
	// skip, when set, spares matches that only look like secrets.
	skip func(match string) bool
}

func pattern(re string, hints ...string) secretPattern {
	r := regexp.MustCompile(re)
	return secretPattern{hints: hints, re: r, keep: r.SubexpIndex("keep"), tail: r.SubexpIndex("tail")}
}

// skipping returns p with a skip function.
func (p secretPattern) skipping(skip func(string) bool) secretPattern {
	p.skip = skip
	return p
}

// credentialIsURL reports a header match whose credential's first word
// is a URL: the header was empty, and what follows is the next argument.
func credentialIsURL(m string) bool {
	_, cred, _ := strings.Cut(m, ":")
	first, _, _ := strings.Cut(strings.TrimLeft(cred, " \t"), " ")
	return strings.Contains(first, "://")
}

// isWorkingDir reports a shell's working-directory variable (PWD=/workspace,
// PWD: ~/src), which shares its name with the connection-string password
// key (Pwd=…) but holds a path, not a secret.
func isWorkingDir(m string) bool {
	if len(m) < 4 || !strings.EqualFold(m[:3], "pwd") {
		return false
	}
	v := strings.TrimLeft(m[3:], " \t\"'=:")
	return strings.HasPrefix(v, "/") || strings.HasPrefix(v, "~")
}

// Redaction takes the secret and nothing else, so that what a reviewer
// reads of a redacted call is still the whole of what it does: a match
// never runs on into text a shell (or a file's reader) would take as
// something else (TestRedactHidesNoCommand), nor into a path's "." and
// ".." segments (pathCut, TestRedactHidesNoPath).
const (
	// secretChar is a character of a secret written as a word: anything
	// but white space, quotes and what ends or expands a shell word.
	secretChar = "[^\\s&\"',;|<>(){}$`]"
	// pemSep separates a private key's lines: white space, or \n and \r
	// written out (a key inside a JSON or shell string, escaped once or
	// more).
	pemSep = `(\s|\\+r|\\+n)+`
	// pemNL is one line break (real or written out), with the blanks
	// around it: a key's headers and short lines each stand on a line of
	// their own.
	pemNL = `[ \t]*(\r?\n|(\\+r)?\\+n)[ \t]*`
	// pemHeader is an armour header's value: text without quotes, shell
	// operators or redirections, and an address in angle brackets at its
	// end (Comment: Alice <alice@example.org>).
	pemHeader = `[^\r\n\\;&|$` + "`" + `()'"<>]*(<[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+>)?`
	// authScheme is a known authentication scheme; anything else before a
	// space is not taken for one (curl -H Authorization:x -Tfile).
	authScheme = `(basic|bearer|digest|token|apikey|api-key|aws4-hmac-sha256|negotiate|ntlm|oauth|bot|ssws|splunk|hoba|mutual|dpop|hawk|vapid|signature|googlelogin|scram-sha-1|scram-sha-256)`
	// authParam is a token68 or a name=value auth-param.
	authParam = `[A-Za-z0-9_-]+=("[^"\\\r\n;|&$` + "`" + `]*"|[A-Za-z0-9._~+/=:-]+)`
	// token68 is a credential written as one word, never starting with
	// '-' (the next argument of a command).
	token68 = `[A-Za-z0-9._~+/:][A-Za-z0-9._~+/:-]*=*`
)

// secretPatterns: the shapes of secrets Airlock redacts (redact_test.go has
// an example of each).
var secretPatterns = []secretPattern{
	// Private keys (PEM: RSA, EC, OpenSSH, PKCS#8, encrypted; PGP blocks):
	// the begin line, the armour's headers (known names only), the key's
	// lines of 60 base64 characters or more (64 in PEM and PGP, 70 in
	// OpenSSH, or the whole key on one line), and, after them, up to three
	// short lines each on a line of its own (the last line, PGP's
	// checksum; one short word when the key's lines are joined by spaces)
	// and the end line. Only
	// what has a key's shape is taken: a block cut short ends at its last
	// long line, and a command hidden after a begin line, or between a
	// begin and an end line, is not taken with them.
	pattern(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----`+
		`(`+pemNL+`(Proc-Type|DEK-Info|Version|Comment|Hash|Charset|MessageID): `+pemHeader+`)*`+
		`(((`+pemSep+`)?[A-Za-z0-9+/]{60,}={0,2})+`+
		`(((`+pemNL+`[A-Za-z0-9+/=]{1,59}){0,3}|[ \t]+[A-Za-z0-9+/=]{1,59})(`+pemSep+`)?-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----)?)?`, "-----begin"),
	pattern(`\bAGE-SECRET-KEY-1[0-9A-Z]{58}`, "age-secret-key"),
	// HTTP credentials.
	pattern(`(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{8,}=*`, "bearer"),
	pattern(`(?i)\bbasic\s+[A-Za-z0-9+/]{12,}=*`, "basic"),
	// A header's credentials: an optional scheme, then a token68 or
	// comma-separated auth-params (RFC 9110 11.4), nothing more: what
	// follows on the line (another command, a URL) stays to be read.
	// A first word holding "://" is no credential but the URL after an
	// empty header (curl -H Authorization: https://…): it stays.
	pattern(`(?i)(?P<keep>\b(authorization|proxy-authorization|x-api-key|api-key|x-auth-token)\s*:\s*)`+
		`(`+authScheme+`[ \t]+)?(`+authParam+`|`+token68+`)([ \t]*,[ \t]*`+authParam+`)*`, "authorization", "api-key", "auth-token").
		skipping(credentialIsURL),
	pattern(`(?i)(?P<keep>\bsignature=)[0-9a-f]{64}\b`, "signature="), // AWS SigV4 Authorization header
	// JSON Web Tokens (header.payload.signature, base64url, header {"...).
	pattern(`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`, "eyj"),
	// Cloud providers.
	// An AWS secret access key has no shape of its own (40 base64
	// characters), so it is recognised by what comes before it: its key id,
	// or a label naming it in any spelling (aws_secret_access_key,
	// AWS_SECRET_ACCESS_KEY, SecretAccessKey, "aws secret access key", with
	// "=", ":", "=>", quotes or only a space between).
	pattern(`\b(AKIA|ASIA)[A-Z0-9]{16}\b[\s,;:|"'=]{1,8}[A-Za-z0-9/+]{40}[A-Za-z0-9/+=]*`, "akia", "asia"),
	pattern(`(?i)(?P<keep>\b(aws)?[_\-. ]?secret[_\-. ]?access[_\-. ]?key["']?[ \t]*(=>|:=|[=:])?[ \t]*["']?)[A-Za-z0-9/+]{40}[A-Za-z0-9/+=]*`, "secret"),
	pattern(`\b(AKIA|ASIA)[A-Z0-9]{16}\b`, "akia", "asia"),                                                         // AWS access key id
	pattern(`(?i)(?P<keep>\b(AccountKey|SharedAccessKey)\s*=\s*)[A-Za-z0-9+/=]{20,}`, "accesskey", "accountkey"),   // Azure connection strings
	pattern(`(?i)(?P<keep>[?&](sig|x-amz-signature|x-goog-signature)=)[A-Za-z0-9%+/=_-]{16,}`, "sig", "signature"), // Azure SAS, presigned S3/GCS URLs
	pattern(`\b[A-Za-z0-9_~.-]{3}\dQ~[A-Za-z0-9_~.-]{31,34}`, "q~"),                                                // Azure AD client secret
	pattern(`\bAIza[0-9A-Za-z_-]{35}`, "aiza"),                                                                     // Google API key
	pattern(`\bya29\.[0-9A-Za-z_-]{20,}`, "ya29."),                                                                 // Google OAuth access token
	pattern(`\bGOCSPX-[0-9A-Za-z_-]{20,}`, "gocspx-"),                                                              // Google OAuth client secret
	pattern(`\bdo[por]_v1_[a-f0-9]{64}\b`, "_v1_"),                                                                 // DigitalOcean
	pattern(`\bhv[sb]\.[A-Za-z0-9_-]{24,}`, "hvs.", "hvb."),                                                        // HashiCorp Vault
	pattern(`\bdp\.(st|ct|pt|sa)\.[A-Za-z0-9_-]{40,}`, "dp."),                                                      // Doppler
	pattern(`\bdapi[a-f0-9]{32}\b`, "dapi"),                                                                        // Databricks
	// AI providers.
	pattern(`\bsk-(proj-|ant-|svcacct-)?[A-Za-z0-9_-]{20,}`, "sk-"), // OpenAI, Anthropic
	pattern(`\bhf_[A-Za-z0-9]{30,}`, "hf_"),                         // Hugging Face
	// Code hosting and package registries.
	pattern(`\bgh[pousr]_[A-Za-z0-9]{30,}`, "ghp_", "gho_", "ghu_", "ghs_", "ghr_"), // GitHub
	pattern(`\bgithub_pat_[A-Za-z0-9_]{30,}`, "github_pat_"),
	pattern(`\bgl(pat|dt|rt|ptt|ft|soat|oas|imt|cbt)-[A-Za-z0-9_-]{20,}`, "gl"), // GitLab
	pattern(`\bnpm_[A-Za-z0-9]{36}`, "npm_"),
	pattern(`\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}`, "pypi-"),
	// Chat, payments, mail, SaaS.
	pattern(`\bxox[abposr]-[A-Za-z0-9-]{10,}`, "xox"), // Slack tokens
	pattern(`\bxapp-[0-9]-[A-Za-z0-9-]{10,}`, "xapp-"),
	pattern(`https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}`, "hooks.slack.com"),
	pattern(`\b\d{8,10}:AA[A-Za-z0-9_-]{33}\b`, ":aa"),                       // Telegram bot
	pattern(`\b(sk|rk|pk)_(live|test)_[A-Za-z0-9]{16,}`, "_live_", "_test_"), // Stripe
	pattern(`\bwhsec_[A-Za-z0-9+/=]{24,}`, "whsec_"),
	pattern(`\bSK[0-9a-fA-F]{32}\b`, "sk"),                         // Twilio API key
	pattern(`\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}`, "sg."), // SendGrid
	pattern(`\bkey-[0-9a-z]{32}\b`, "key-"),                        // Mailgun
	pattern(`\bshp(at|ca|pa|ss)_[a-fA-F0-9]{32}\b`, "shp"),         // Shopify
	pattern(`\bPMAK-[0-9a-f]{24}-[0-9a-f]{34}\b`, "pmak-"),         // Postman
	pattern(`\bNRAK-[A-Z0-9]{27}\b`, "nrak-"),                      // New Relic
	pattern(`\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}\b`, "glsa_"),    // Grafana service account
	pattern(`\blin_api_[A-Za-z0-9]{40}\b`, "lin_api_"),             // Linear
	// Assignments and flags naming a secret: PASSWORD=…, "api_key": "…",
	// Password=…; (connection strings), --password …, -p… is not guessed.
	// The value ends where a shell would end a word (secretChar), so that
	// a command after it (";git push", "|sh", "$(…)") stays to be read.
	pattern(`(?i)(?P<keep>(\b|_)(aws_secret_access_key|aws_session_token|password|passwd|pwd|secret|client_secret|api_?key|access_?token|auth_?token|refresh_?token|token)["']?\s*[=:]\s*["']?)`+secretChar+`+`,
		"pass", "pwd", "secret", "key", "token").skipping(isWorkingDir),
	pattern(`(?i)(?P<keep>(^|\s)--?(password|passwd|token|api-key|secret|client-secret)(\s+|=)["']?)[^-\s&"',;|<>(){}`+"`"+`]`+secretChar+`*`,
		"pass", "token", "key", "secret"),
	// Credentials in URLs (postgres://user:pass@host, https://user:token@…):
	// a password holding what a shell reads as the end of a word (";",
	// "&", "|", "$", redirections, parentheses, quotes) is not taken, so
	// that no command can hide in one (https://u:p&rm$IFS-rf$IFS*@host).
	// The password ends at the first '/', '?', '#' or '@' (none can be in a
	// URL's user info unescaped): what follows is the host and path the
	// URL goes to (https://u:p@evil.example/x@ok.example goes to
	// evil.example), and they stay.
	pattern(`(?P<keep>://[^/\s:@]+:)[^\s&"',;|<>(){}$`+"`"+`/?#@]+(?P<tail>@)`, "://"),
}

// Redact returns a deep copy of args with secrets replaced by Redacted: the
// values of secret-named keys, and secret-shaped substrings anywhere. It is
// applied to what agents submit and to the results they report, before
// either is stored or shown.
func Redact(args map[string]any) map[string]any {
	if args == nil {
		return nil
	}
	out, _ := redactValue(args, 0, nil).(map[string]any)
	return out
}

// Hidden is a part of args that Redact took although it is not shaped
// like a secret: a reviewer cannot read it, and an agent that runs its
// own call (a hook, the MCP gateway) runs it as written.
//
// A secret found by its shape (secretPatterns) holds only that shape's
// characters, up to a path segment (pathCut), so it is never one. The
// value of a secret-named key is taken whatever it looks like: what is
// taken of it is one when, with the secrets found in it by their shape,
// an authentication scheme before them ("Basic …") and a Cookie header's
// "; " between cookies set aside, it holds white space, a control
// character or what ends or expands a shell word (secretChar): "x; rm -rf
// /", or a passphrase of several words. A list or an object is one when a
// string in it would be, and a document nested deeper than Redact reads
// always is.
type Hidden struct {
	// Path names the value as risk reasons do: args.token,
	// args.items[2].secret, args["odd key"].
	Path string
	// Part is true when only the start of the value is taken.
	Part bool
	// What says what it holds: "white space", `";"`, "more than 64
	// levels of nesting".
	What string
}

// Reason is h as a risk reason.
func (h Hidden) Reason() string {
	where := h.Path
	if h.Part {
		where = "part of " + where
	}
	if h.What == deepWhat {
		return where + " is hidden by redaction: it holds " + deepWhat
	}
	return where + " is hidden by redaction but holds " + h.What + ", which no secret holds"
}

// RedactNoting is Redact, and reports what it hid that is not shaped like
// a secret, ordered by path.
func RedactNoting(args map[string]any) (map[string]any, []Hidden) {
	if args == nil {
		return nil, nil
	}
	n := &noter{}
	out, _ := redactValue(args, 0, n).(map[string]any)
	slices.SortStableFunc(n.hidden, func(a, b Hidden) int { return strings.Compare(a.Path, b.Path) })
	return out, n.hidden
}

// noter collects Hidden parts while redactValue walks args.
type noter struct {
	path   []step
	hidden []Hidden
}

// step is a map key, or a list index when idx >= 0.
type step struct {
	key string
	idx int
}

// maxNotedPath bounds a Hidden's Path, in bytes.
const maxNotedPath = 160

func (n *noter) note(part bool, what string) {
	var b strings.Builder
	b.WriteString("args")
	for _, s := range n.path {
		switch {
		case s.idx >= 0:
			b.WriteString("[" + strconv.Itoa(s.idx) + "]")
		case identKey.MatchString(s.key):
			b.WriteString("." + s.key)
		default:
			k := s.key
			if len(k) > 40 {
				k = strings.ToValidUTF8(k[:40], "") + "…"
			}
			b.WriteString("[" + strconv.Quote(k) + "]")
		}
	}
	p := b.String()
	if len(p) > maxNotedPath {
		p = strings.ToValidUTF8(p[:maxNotedPath], "") + "…"
	}
	n.hidden = append(n.hidden, Hidden{Path: p, Part: part, What: what})
}

// push adds a map key or a list index (idx >= 0) to the path.
func (n *noter) push(key string, idx int) { n.path = append(n.path, step{key, idx}) }

func (n *noter) pop() { n.path = n.path[:len(n.path)-1] }

// identKey is a key risk reasons write after a dot.
var identKey = regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)

// deepWhat is the What of a document nested deeper than Redact reads.
var deepWhat = fmt.Sprintf("more than %d levels of nesting", maxRedactDepth)

// leadingScheme is an authentication scheme before a credential ("Basic
// Zm9v"): white space that belongs to a secret's shape.
var leadingScheme = regexp.MustCompile(`(?i)^` + authScheme + `[ \t]+`)

// cookieList is a Cookie header's value ("sid=abc; theme=dark"), its
// values written without what ends or expands a shell word: the "; "
// between cookies belongs to the shape.
var cookieList = regexp.MustCompile(`^` + cookiePair + `(;[ \t]*` + cookiePair + `)*;?$`)

const cookiePair = `[A-Za-z0-9_.-]+=[^\s&"',;|<>(){}$` + "`" + `\\]*`

// notSecretShaped says what s, taken whole as a secret, holds that no
// secret does ("" for nothing): see Hidden.
func notSecretShaped(s string) string {
	s = strings.TrimSpace(s)
	if cookieList.MatchString(s) {
		return ""
	}
	s = leadingScheme.ReplaceAllString(s, "")
	s = strings.TrimSpace(strings.ReplaceAll(RedactString(s), Redacted, " "))
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			return "white space"
		case unicode.IsControl(r):
			return "a control character"
		case strings.ContainsRune("&\"',;|<>(){}$`", r):
			return strconv.Quote(string(r))
		}
	}
	return ""
}

// noteWhole notes what redactWhole takes of v, when n is not nil.
func (n *noter) noteWhole(v any, part bool) {
	if n == nil {
		return
	}
	var walk func(v any, depth int) string
	walk = func(v any, depth int) string {
		if depth > maxRedactDepth {
			return deepWhat
		}
		switch x := v.(type) {
		case string:
			return notSecretShaped(x)
		case map[string]any:
			for _, val := range x {
				if w := walk(val, depth+1); w != "" {
					return w
				}
			}
		case []any:
			for _, val := range x {
				if w := walk(val, depth+1); w != "" {
					return w
				}
			}
		}
		return ""
	}
	if what := walk(v, 0); what != "" {
		n.note(part, what)
	}
}

// RedactString replaces secret-shaped substrings of s.
func RedactString(s string) string {
	lower := strings.ToLower(s)
	for i := range secretPatterns {
		p := &secretPatterns[i]
		if !p.mayMatch(lower) || !p.re.MatchString(s) {
			continue
		}
		s = p.replace(s)
		lower = strings.ToLower(s)
	}
	return s
}

// replace replaces the secret of each match of p in s with Redacted. A
// secret holding a path segment is cut before it (pathCut), and the rest
// of s from the cut on is searched again, as text that was never part of
// a match: "token=q/../token=abc" is "token=[REDACTED]/../token=[REDACTED]".
func (p *secretPattern) replace(s string) string {
	var b strings.Builder
	for {
		last, cut := 0, -1
		for _, m := range p.re.FindAllStringSubmatchIndex(s, -1) {
			if p.skip != nil && p.skip(s[m[0]:m[1]]) {
				continue
			}
			from, to := m[0], m[1]
			if p.keep >= 0 && m[2*p.keep] >= 0 {
				from = m[2*p.keep+1]
			}
			if p.tail >= 0 && m[2*p.tail] >= 0 {
				to = m[2*p.tail]
			}
			b.WriteString(s[last:from])
			c := pathCut(s[from:to])
			if c < 0 {
				b.WriteString(Redacted)
				last = m[1]
				b.WriteString(s[to:last])
				continue
			}
			if c > 0 {
				b.WriteString(Redacted)
			}
			cut = max(from+c, m[0]+1) // always past the match's start
			b.WriteString(s[from+c : cut])
			break
		}
		if cut < 0 {
			b.WriteString(s[last:])
			return b.String()
		}
		s = s[cut:]
	}
}

// pathCut is where a secret must end so that no path is hidden with it,
// or -1 when it holds no path segment. Redaction hides a secret from the
// reviewer, but a hook's or a gateway's agent runs what it wrote, not what
// was shown: "rm -rf ./build/token=q/../../src" must not read as
// "rm -rf ./build/token=[REDACTED]", since it deletes ./src.
//
// The rule: a "." or ".." path segment is a run of dots touching a '/'
// ("../", "/..", "./", "/.git"), or a run of two or more touching a '\'
// ("..\", "\.."). No secret holds one: base64 has '/' but no '.', a JWT
// or a Vault token '.' but no '/', and a URL's password ends before its
// host and path. When a secret holds one, it ends before its first '/'
// or '\' (where a "../" leads depends on every component before it, so
// none is hidden) or before that run of dots, whichever comes first; what
// is left is no secret and is shown: "token=a/b/../../x" is
// "token=[REDACTED]/b/../../x", and "password: ../../etc" is left as
// written. White space, quotes and what ends or expands a shell word
// already end a secret written as a word (secretChar); the white space
// some shapes hold ("Bearer x", a private key's lines) is theirs.
func pathCut(s string) int {
	seg := -1
	for i := 0; i < len(s) && seg < 0; i++ {
		switch s[i] {
		case '/':
			if i+1 < len(s) && s[i+1] == '.' {
				seg = i
			}
		case '\\':
			if strings.HasPrefix(s[i+1:], "..") {
				seg = i
			}
		case '.':
			j := i
			for j < len(s) && s[j] == '.' {
				j++
			}
			if j < len(s) && (s[j] == '/' || s[j] == '\\' && j-i >= 2) {
				seg = i
			}
			i = j - 1
		}
	}
	if seg < 0 {
		return -1
	}
	if i := strings.IndexAny(s[:seg], `/\`); i >= 0 {
		return i
	}
	return seg
}

func (p *secretPattern) mayMatch(lower string) bool {
	for _, h := range p.hints {
		if strings.Contains(lower, h) {
			return true
		}
	}
	return len(p.hints) == 0
}

const maxRedactDepth = 64

// redactValue redacts v, found at depth; n, when not nil, notes what is
// hidden that is not shaped like a secret.
func redactValue(v any, depth int, n *noter) any {
	if depth > maxRedactDepth {
		if n != nil {
			n.note(false, deepWhat)
		}
		return Redacted // deeper than any legitimate document; do not store it
	}
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, val := range x {
			if n != nil {
				n.push(k, -1)
			}
			if isSecretKey(k) && !isEmpty(val) && !isTokenCount(k, val) {
				m[k] = redactWhole(val, n)
			} else {
				m[k] = redactValue(val, depth+1, n)
			}
			if n != nil {
				n.pop()
			}
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, val := range x {
			if n != nil {
				n.push("", i)
			}
			s[i] = redactValue(val, depth+1, n)
			if n != nil {
				n.pop()
			}
		}
		return s
	case string:
		return RedactString(x)
	default:
		return v
	}
}

// isTokenCount reports a number under a name that counts tokens
// ("max_tokens", "tokens_used"): a model's token count, no secret, and
// what a budget on it reads (a budget's amount is worked out again from
// the stored args when a reviewer approves). A number under "token" (an
// OTP) and anything but a number under "tokens" stay redacted.
func isTokenCount(k string, v any) bool {
	switch v.(type) {
	case float64, json.Number, int, int64:
	default:
		return false
	}
	lower := strings.ToLower(k)
	return strings.Contains(lower, "tokens") && !isSecretKey(strings.ReplaceAll(lower, "tokens", ""))
}

// redactWhole is the value of a secret-named key: Redacted, or for a
// string holding a path segment, Redacted up to it (pathCut) and the rest
// as any string is redacted. n, when not nil, notes what is taken if it
// is not shaped like a secret.
func redactWhole(v any, n *noter) any {
	if s, ok := v.(string); ok {
		if c := pathCut(s); c >= 0 {
			rest := RedactString(s[c:])
			if c == 0 {
				return rest
			}
			n.noteWhole(s[:c], true)
			return Redacted + rest
		}
	}
	n.noteWhole(v, false)
	return Redacted
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

// HasRedaction reports whether v (args as Redact returns them) holds
// Redacted anywhere: what was there is gone, and a decision that reads
// the stored args cannot see it.
func HasRedaction(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for _, val := range x {
			if HasRedaction(val) {
				return true
			}
		}
	case []any:
		for _, val := range x {
			if HasRedaction(val) {
				return true
			}
		}
	case string:
		return strings.Contains(x, Redacted)
	}
	return false
}
