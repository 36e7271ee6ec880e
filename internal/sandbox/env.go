package sandbox

import (
	"regexp"
	"slices"
	"strings"
)

// safeEnvNames may be set by a request without further configuration.
var safeEnvNames = map[string]bool{
	"LANG": true, "LANGUAGE": true, "TZ": true, "NO_COLOR": true, "COLUMNS": true,
	"GIT_AUTHOR_NAME": true, "GIT_AUTHOR_EMAIL": true, "GIT_AUTHOR_DATE": true,
	"GIT_COMMITTER_NAME": true, "GIT_COMMITTER_EMAIL": true, "GIT_COMMITTER_DATE": true,
}

var (
	envName       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	secretPattern = regexp.MustCompile(`(?i)(TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|(^|_)AUTH(_|$)|AUTHORIZATION|SESSION|COOKIE|_PAT$|_KEY$|^KEY$)`)
	cloudPrefix   = regexp.MustCompile(`(?i)^(AWS|AZURE|ARM|GOOGLE|GCP|GCLOUD|CLOUDSDK|GCE|GKE|DIGITALOCEAN|DO|HEROKU|VAULT|CONSUL|NOMAD|KUBE|KUBERNETES|DOCKER|NPM|YARN|PYPI|TWINE|GH|GITHUB|GITLAB|BITBUCKET|OPENAI|ANTHROPIC|HF|HUGGINGFACE|STRIPE|SLACK|TWILIO|SENTRY|DATADOG|DD|CLOUDFLARE|CF|OCI|IBMCLOUD|ALIBABA|ALICLOUD|TENCENTCLOUD|SCW|LINODE|VULTR|OS|OPENSTACK|AIRLOCK)_`)
	localeValue   = regexp.MustCompile(`^[A-Za-z0-9_.@:-]*$`)
)

// hardDenyEnv says why a variable can never enter the sandbox, or "" if it
// is not on the hard deny list: credentials, loader and proxy variables,
// agent and session sockets, and variables that make an allowed program
// run another program or read configuration the validators never saw.
func hardDenyEnv(name string) string {
	upper := strings.ToUpper(name)
	if safeEnvNames[name] {
		return ""
	}
	switch {
	case strings.HasPrefix(upper, "LD_") || strings.HasPrefix(upper, "DYLD_") || upper == "GCONV_PATH" ||
		upper == "GLIBC_TUNABLES" || strings.HasPrefix(upper, "MALLOC_") || upper == "LOCPATH" ||
		upper == "NLSPATH" || upper == "HOSTALIASES" || upper == "RES_OPTIONS" || upper == "LOCALDOMAIN":
		return "dynamic loader or libc variable"
	case strings.HasSuffix(upper, "_PROXY") || upper == "PROXY":
		return "proxy variable"
	case strings.HasPrefix(upper, "SSH_") || strings.HasPrefix(upper, "GPG_") || upper == "GNUPGHOME" ||
		strings.HasPrefix(upper, "DBUS_") || upper == "XDG_RUNTIME_DIR" || upper == "DISPLAY" ||
		upper == "WAYLAND_DISPLAY" || upper == "KRB5CCNAME":
		return "agent or session socket"
	case cloudPrefix.MatchString(name) || upper == "KUBECONFIG" || upper == "NETRC":
		return "cloud or service credential"
	case secretPattern.MatchString(name):
		return "looks like a secret"
	case strings.HasPrefix(upper, "GIT_") && !safeEnvNames[upper]:
		return "git configuration is fixed by the sandbox"
	case upper == "PATH" || upper == "HOME" || upper == "SHELL" || upper == "ENV" || upper == "BASH_ENV" ||
		upper == "IFS" || upper == "PS4" || upper == "CDPATH" || upper == "SHELLOPTS" || upper == "BASHOPTS" ||
		upper == "PAGER" || upper == "EDITOR" || upper == "VISUAL" || upper == "TMPDIR" ||
		upper == "POSIXLY_CORRECT" || upper == "RIPGREP_CONFIG_PATH" || upper == "TAR_OPTIONS" ||
		upper == "GREP_OPTIONS" || upper == "AWKPATH" || upper == "AWKLIBPATH" || upper == "LESSOPEN" ||
		upper == "MANPAGER" || upper == "PERL5OPT" || upper == "PYTHONSTARTUP" || upper == "NODE_OPTIONS" ||
		upper == "XDG_CONFIG_HOME" || upper == "XDG_CONFIG_DIRS" || upper == "PROMPT_COMMAND":
		return "controls how programs run"
	}
	return ""
}

// envRefusal says why a request may not set name=value ("" when it may).
// Allowed are the safe built-in names, LC_* and the policy's extra names,
// minus the hard deny list.
func envRefusal(name, value string, extra []string) string {
	if !envName.MatchString(name) {
		return quote(name) + " is not a valid variable name"
	}
	if reason := hardDenyEnv(name); reason != "" {
		return name + " is not allowed (" + reason + ")"
	}
	if strings.IndexByte(value, 0) >= 0 {
		return name + " must not contain NUL bytes"
	}
	isLocale := name == "LANG" || name == "LANGUAGE" || strings.HasPrefix(name, "LC_")
	switch {
	case isLocale:
		if !localeValue.MatchString(value) {
			return name + " must be a locale name"
		}
		return ""
	case name == "TZ":
		if strings.HasPrefix(value, "/") || strings.Contains(value, "..") {
			return "TZ must be a zone name"
		}
		return ""
	case safeEnvNames[name] || slices.Contains(extra, name):
		return ""
	}
	return name + " is not allowed"
}

// EnvAllowed reports whether a request may set name=value under pol.
func EnvAllowed(name, value string, pol Policy) bool {
	return envRefusal(name, value, pol.Env) == ""
}
