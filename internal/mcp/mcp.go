// Package mcp holds Airlock's MCP server registry as a domain: the shape of
// a registration, every rule a registration must pass (Validate), who may
// read what (View), and the Registry service the JSON API and the console
// both call. It knows nothing of HTTP or Postgres: Store is implemented by
// internal/store.
//
// The registry is the allowlist of MCP connectors: the stdio proxy launches
// only a registered command, and the gateway connects only to a registered
// URL.
package mcp

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock/internal/apperr"
)

// Transports of a registration.
const (
	TransportStdio = "stdio" // launched by `airlock mcp proxy` on the agent host
	TransportHTTP  = "http"  // reached over MCP Streamable HTTP (gateway or proxy)
)

// Bounds of a registration.
const (
	MaxNameLen       = 64
	MaxCommandLen    = 4096
	MaxArgs          = 256
	MaxArgLen        = 4096
	MaxEnv           = 128
	MaxEnvKeyLen     = 128
	MaxEnvValueLen   = 32 << 10
	MaxPaths         = 64
	MaxPathLen       = 4096
	MaxURLLen        = 2048
	MaxHeaders       = 32
	MaxAllowPrivate  = 32
	redactedEnvValue = "[redacted]"
)

// Server is one MCP server registration as an admin writes it. Fields of
// the other transport must be left out.
type Server struct {
	// Name is the registration's key, [a-z0-9-]{1,64}; its tools are the
	// Airlock tools mcp.<name>.<tool>.
	Name      string `json:"name"`
	Transport string `json:"transport"`

	// stdio: the command the proxy launches (absolute path or a bare
	// name looked up in the proxy's PATH), its arguments (passed as they
	// are, never through a shell), the environment it gets (env, plus
	// the pass_env names copied from the proxy's environment; nothing
	// else), and its sandbox.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	PassEnv []string          `json:"pass_env,omitempty"`
	// Sandbox runs the command in bubblewrap; stdio only, default true.
	Sandbox       *bool    `json:"sandbox,omitempty"`
	ReadOnlyPaths []string `json:"read_only_paths,omitempty"`
	// Network gives the sandboxed command the network; default false.
	Network bool `json:"network,omitempty"`

	// http: the server's Streamable HTTP endpoint, the request headers
	// set from environment variables of the connecting process (header
	// name → variable name: the value never enters the registry), and the
	// private ranges it may be reached in (netguard refuses every other
	// non-public address).
	URL            string            `json:"url,omitempty"`
	HeadersFromEnv map[string]string `json:"headers_from_env,omitempty"`
	AllowPrivate   []string          `json:"allow_private,omitempty"`
}

// Registration is a stored version of a Server.
type Registration struct {
	Server
	Version   int       `json:"version"`
	UpdatedBy string    `json:"updated_by"`
	UpdatedAt time.Time `json:"updated_at"`
	// Redacted is true when env values were withheld from the reader.
	Redacted bool `json:"redacted,omitempty"`
}

// Prefixes returns the parsed allow_private CIDRs of a validated server.
func (s Server) Prefixes() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(s.AllowPrivate))
	for _, c := range s.AllowPrivate {
		if p, err := netip.ParsePrefix(c); err == nil {
			out = append(out, p)
		}
	}
	return out
}

var (
	nameRE       = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)
	envKeyRE     = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
	bareCmdRE    = regexp.MustCompile(`^[A-Za-z0-9_+][A-Za-z0-9._+-]*$`)
	absCmdRE     = regexp.MustCompile(`^(/[A-Za-z0-9._+-]+)+$`)
	headerNameRE = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
)

// reservedEnvPrefixes may never be set in, or passed to, a server's
// environment: the dynamic loader's knobs and Airlock's own settings
// (AIRLOCK_TOKEN above all).
var reservedEnvPrefixes = []string{"LD_", "DYLD_", "AIRLOCK_"}

// credentialEnvPrefixes may not be passed from the agent host's
// environment (pass_env): cloud credentials stay with the host. An admin
// who means a server to hold one sets it in env.
var credentialEnvPrefixes = []string{"AWS_", "AZURE_", "GOOGLE_", "GCLOUD_", "CLOUDSDK_", "ARM_"}

// forbiddenHeaders are request headers the connection owns.
var forbiddenHeaders = map[string]bool{
	"host": true, "content-length": true, "content-type": true, "transfer-encoding": true, "connection": true,
	"upgrade": true, "te": true, "trailer": true, "keep-alive": true, "proxy-authorization": true,
	"proxy-connection": true, "mcp-session-id": true, "mcp-protocol-version": true, "accept": true,
}

func invalid(field, format string, args ...any) error {
	e := apperr.Validation(format, args...)
	e.Details = map[string]any{"field": field}
	return e
}

// ValidName checks a registration name.
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return invalid("name", "name must be 1-%d characters of a-z, 0-9 and -", MaxNameLen)
	}
	return nil
}

// Validate checks every rule of a registration and returns it normalised
// (sandbox defaulted, CIDRs and lists in canonical order). Errors are
// validation_failed with details.field.
func Validate(s Server) (Server, error) {
	if err := ValidName(s.Name); err != nil {
		return s, err
	}
	switch s.Transport {
	case TransportStdio:
		return validateStdio(s)
	case TransportHTTP:
		return validateHTTP(s)
	case "":
		return s, invalid("transport", "transport is required: stdio or http")
	}
	return s, invalid("transport", "transport must be stdio or http, not %q", s.Transport)
}

func validateStdio(s Server) (Server, error) {
	switch {
	case s.URL != "":
		return s, invalid("url", "url is for http servers; a stdio server has a command")
	case len(s.HeadersFromEnv) > 0:
		return s, invalid("headers_from_env", "headers_from_env is for http servers")
	case len(s.AllowPrivate) > 0:
		return s, invalid("allow_private", "allow_private is for http servers")
	}
	if err := validCommand(s.Command); err != nil {
		return s, err
	}
	if len(s.Args) > MaxArgs {
		return s, invalid("args", "at most %d args", MaxArgs)
	}
	for i, a := range s.Args {
		if len(a) > MaxArgLen || strings.ContainsRune(a, 0) || !utf8.ValidString(a) {
			return s, invalid(fmt.Sprintf("args[%d]", i), "an arg is valid UTF-8 without NUL, at most %d bytes", MaxArgLen)
		}
	}
	if len(s.Env) > MaxEnv {
		return s, invalid("env", "at most %d env variables", MaxEnv)
	}
	for k, v := range s.Env {
		if err := validEnvName("env", k, false); err != nil {
			return s, err
		}
		if len(v) > MaxEnvValueLen || strings.ContainsRune(v, 0) || !utf8.ValidString(v) {
			return s, invalid("env."+k, "an env value is valid UTF-8 without NUL, at most %d bytes", MaxEnvValueLen)
		}
	}
	if len(s.PassEnv) > MaxEnv {
		return s, invalid("pass_env", "at most %d pass_env names", MaxEnv)
	}
	seen := map[string]bool{}
	for i, k := range s.PassEnv {
		if err := validEnvName(fmt.Sprintf("pass_env[%d]", i), k, true); err != nil {
			return s, err
		}
		if _, set := s.Env[k]; set || seen[k] {
			return s, invalid(fmt.Sprintf("pass_env[%d]", i), "%s is named twice (env and pass_env, or twice in pass_env)", k)
		}
		seen[k] = true
	}
	if len(s.ReadOnlyPaths) > MaxPaths {
		return s, invalid("read_only_paths", "at most %d read_only_paths", MaxPaths)
	}
	for i, p := range s.ReadOnlyPaths {
		if len(p) > MaxPathLen || !path.IsAbs(p) || path.Clean(p) != p || strings.ContainsRune(p, 0) || !utf8.ValidString(p) {
			return s, invalid(fmt.Sprintf("read_only_paths[%d]", i), "a read-only path is absolute and clean (no .., no trailing /), at most %d bytes", MaxPathLen)
		}
	}
	if s.Sandbox == nil {
		t := true
		s.Sandbox = &t
	}
	if !*s.Sandbox && (len(s.ReadOnlyPaths) > 0 || s.Network) {
		return s, invalid("sandbox", "read_only_paths and network configure the sandbox; they need sandbox: true")
	}
	s.PassEnv = sortedCopy(s.PassEnv)
	s.ReadOnlyPaths = sortedCopy(s.ReadOnlyPaths)
	return s, nil
}

// validCommand: an absolute path or a bare name, with none of a shell's
// metacharacters (the proxy never runs a shell, but a command is also read
// by people and copied into configurations).
func validCommand(c string) error {
	switch {
	case c == "":
		return invalid("command", "a stdio server needs a command")
	case len(c) > MaxCommandLen:
		return invalid("command", "command is at most %d bytes", MaxCommandLen)
	case strings.HasPrefix(c, "/"):
		if !absCmdRE.MatchString(c) || path.Clean(c) != c {
			return invalid("command", "command must be a clean absolute path of letters, digits and . _ + - (no shell metacharacters, no spaces, no ..)")
		}
	case !bareCmdRE.MatchString(c) || c == "." || c == "..":
		return invalid("command", "command must be an absolute path or a bare program name of letters, digits and . _ + - (no shell metacharacters, no spaces, no relative paths)")
	}
	return nil
}

func validEnvName(field, k string, passed bool) error {
	if len(k) > MaxEnvKeyLen || !envKeyRE.MatchString(k) {
		return invalid(field, "an environment variable name is [A-Z_][A-Z0-9_]*, at most %d characters", MaxEnvKeyLen)
	}
	for _, p := range reservedEnvPrefixes {
		if strings.HasPrefix(k, p) {
			return invalid(field, "%s: %s* variables are never given to an MCP server", k, p)
		}
	}
	if passed {
		for _, p := range credentialEnvPrefixes {
			if strings.HasPrefix(k, p) {
				return invalid(field, "%s: cloud credentials (%s*) are not passed from the agent host", k, p)
			}
		}
	}
	return nil
}

// validHeaderEnv checks a headers_from_env variable name: read from the
// environment of whatever makes the connection (the proxy's agent host,
// or the gateway's Airlock server), so the host's cloud credentials are
// refused as pass_env refuses them, and so are PG* (the server's own
// database credentials): a registration would otherwise send them to the
// URL it names.
func validHeaderEnv(field, k string) error {
	if err := validEnvName(field, k, true); err != nil {
		return err
	}
	if strings.HasPrefix(k, "PG") {
		return invalid(field, "%s: PG* variables (the database credentials of the host) are not read into headers", k)
	}
	return nil
}

// HeaderValues are the headers a http registration's headers_from_env
// sets, each from lookup when set there and not empty. Every name is
// checked again as Validate checks it (a registration stored before a
// rule, or read over the network): a refused name is an error, and no
// header is sent.
func HeaderValues(s Server, lookup func(string) (string, bool)) (map[string]string, error) {
	out := make(map[string]string, len(s.HeadersFromEnv))
	for h, env := range s.HeadersFromEnv {
		if err := validHeaderEnv("headers_from_env."+h, env); err != nil {
			return nil, err
		}
		if v, ok := lookup(env); ok && v != "" {
			out[h] = v
		}
	}
	return out, nil
}

func validateHTTP(s Server) (Server, error) {
	switch {
	case s.Command != "":
		return s, invalid("command", "command is for stdio servers; an http server has a url")
	case len(s.Args) > 0:
		return s, invalid("args", "args are for stdio servers")
	case len(s.Env) > 0:
		return s, invalid("env", "env is for stdio servers; an http server's credentials come through headers_from_env")
	case len(s.PassEnv) > 0:
		return s, invalid("pass_env", "pass_env is for stdio servers")
	case s.Sandbox != nil && *s.Sandbox:
		return s, invalid("sandbox", "sandbox is for stdio servers")
	case len(s.ReadOnlyPaths) > 0:
		return s, invalid("read_only_paths", "read_only_paths are for stdio servers")
	case s.Network:
		return s, invalid("network", "network is for stdio servers")
	}
	s.Sandbox = nil
	if len(s.AllowPrivate) > MaxAllowPrivate {
		return s, invalid("allow_private", "at most %d allow_private CIDRs", MaxAllowPrivate)
	}
	prefixes := make([]netip.Prefix, 0, len(s.AllowPrivate))
	canon := make([]string, 0, len(s.AllowPrivate))
	for i, c := range s.AllowPrivate {
		p, err := netip.ParsePrefix(c)
		if err != nil || p.Addr().Zone() != "" {
			return s, invalid(fmt.Sprintf("allow_private[%d]", i), "%q is not a CIDR such as 10.0.0.0/8 or fd00::/8", c)
		}
		if p.Bits() == 0 {
			return s, invalid(fmt.Sprintf("allow_private[%d]", i), "%q allows every address; name the private ranges the server is in", c)
		}
		p = p.Masked()
		prefixes = append(prefixes, p)
		canon = append(canon, p.String())
	}
	s.AllowPrivate = dedupSorted(canon)
	if err := validURL(s.URL, prefixes); err != nil {
		return s, err
	}
	if len(s.HeadersFromEnv) > MaxHeaders {
		return s, invalid("headers_from_env", "at most %d headers", MaxHeaders)
	}
	for h, env := range s.HeadersFromEnv {
		if !headerNameRE.MatchString(h) || len(h) > 128 || forbiddenHeaders[strings.ToLower(h)] || strings.HasPrefix(strings.ToLower(h), "proxy-") {
			return s, invalid("headers_from_env", "%q is not a header a registration may set", h)
		}
		if err := validHeaderEnv("headers_from_env."+h, env); err != nil {
			return s, err
		}
	}
	return s, nil
}

// validURL: https, or plain http only to a loopback host that
// allow_private covers (a server on the same machine).
func validURL(raw string, allow []netip.Prefix) error {
	if raw == "" {
		return invalid("url", "an http server needs a url")
	}
	if len(raw) > MaxURLLen || !utf8.ValidString(raw) || strings.ContainsAny(raw, "\x00 \t\r\n\\") {
		return invalid("url", "url must be an absolute https URL of at most %d bytes", MaxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return invalid("url", "url must be an absolute https URL")
	}
	switch {
	case u.User != nil:
		return invalid("url", "url must not hold credentials; use headers_from_env")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return invalid("url", "url must not have a fragment")
	case u.Hostname() == "":
		return invalid("url", "url needs a host")
	}
	if p := u.Port(); p != "" {
		if n, err := parsePort(p); err != nil || n == 0 {
			return invalid("url", "url's port must be 1-65535")
		}
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if !loopbackAllowed(u.Hostname(), allow) {
			return invalid("url", "plain http is allowed only to a loopback address that allow_private covers (such as http://127.0.0.1:8000 with allow_private [127.0.0.0/8]); use https")
		}
		return nil
	}
	return invalid("url", "url's scheme must be https (or http to loopback), not %q", u.Scheme)
}

func parsePort(p string) (int, error) {
	n := 0
	if len(p) > 5 {
		return 0, fmt.Errorf("port too long")
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("port not a number")
		}
		n = n*10 + int(c-'0')
	}
	if n > 65535 {
		return 0, fmt.Errorf("port out of range")
	}
	return n, nil
}

func loopbackAllowed(host string, allow []netip.Prefix) bool {
	var addrs []netip.Addr
	if strings.EqualFold(host, "localhost") {
		addrs = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}
	} else if a, err := netip.ParseAddr(host); err == nil && a.Unmap().IsLoopback() {
		addrs = []netip.Addr{a.Unmap()}
	}
	for _, a := range addrs {
		for _, p := range allow {
			if p.Contains(a) {
				return true
			}
		}
	}
	return false
}

func sortedCopy(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := append([]string(nil), in...)
	sort.Strings(out)
	return out
}

func dedupSorted(in []string) []string {
	out := sortedCopy(in)
	if len(out) == 0 {
		return nil
	}
	w := 1
	for i := 1; i < len(out); i++ {
		if out[i] != out[w-1] {
			out[w] = out[i]
			w++
		}
	}
	return out[:w]
}

// View is what a reader holding roles may see of reg: admins and agents
// (the stdio proxy must launch the command with its environment, which
// therefore reaches the agent host anyway) see everything; reviewers and
// auditors see env names with their values withheld.
// Roles are named as internal/auth names them ("admin", "agent", ...).
func View(reg Registration, roles []string) Registration {
	for _, r := range roles {
		if r == "admin" || r == "agent" {
			return reg
		}
	}
	return Redact(reg)
}

// Redact withholds env values (the audit trail and non-admin staff).
func Redact(reg Registration) Registration {
	if len(reg.Env) == 0 {
		return reg
	}
	env := make(map[string]string, len(reg.Env))
	for k := range reg.Env {
		env[k] = redactedEnvValue
	}
	reg.Env = env
	reg.Redacted = true
	return reg
}

// ToolName is the Airlock tool of MCP tool tool on server: mcp.<server>.<tool>,
// before canonicalisation (hitl.CanonicalToolName decides what is allowed).
func ToolName(server, tool string) string { return "mcp." + server + "." + tool }

// Store keeps registrations as versions: every write is the next version
// of its name together with its audit event, in one transaction. A
// deleted registration is a tombstone version; writing the name again
// continues its version numbers.
type Store interface {
	// PutMCPServer writes s as version base+1 of s.Name when the current
	// version is base (0: none, or deleted, when create is true), else
	// precondition_failed (base >= 0) or conflict/not_found. base -1
	// writes on whatever version is current (update only).
	PutMCPServer(ctx context.Context, s Server, actor string, base int, create bool) (Registration, error)
	// DeleteMCPServer writes a tombstone as the next version when the
	// current version is base (-1: any).
	DeleteMCPServer(ctx context.Context, name, actor string, base int) error
	// MCPServer returns the current version; not_found when none or deleted.
	MCPServer(ctx context.Context, name string) (Registration, error)
	// MCPServers lists the current registrations by name.
	MCPServers(ctx context.Context) ([]Registration, error)
}

// AnyVersion is a write's base for "whatever version is current".
const AnyVersion = -1

// Registry is the registry service: the API and the console call it.
type Registry struct{ store Store }

// NewRegistry returns the registry over store.
func NewRegistry(store Store) *Registry { return &Registry{store: store} }

// Create registers s (admin); conflict when the name is registered.
func (r *Registry) Create(ctx context.Context, actor string, s Server) (Registration, error) {
	v, err := Validate(s)
	if err != nil {
		return Registration{}, err
	}
	return r.store.PutMCPServer(ctx, v, actor, AnyVersion, true)
}

// Update replaces the registration of s.Name (admin) when its current
// version is base (AnyVersion: unconditional).
func (r *Registry) Update(ctx context.Context, actor string, s Server, base int) (Registration, error) {
	if base < AnyVersion {
		return Registration{}, apperr.Invalid("a registration version is 0 or more")
	}
	v, err := Validate(s)
	if err != nil {
		return Registration{}, err
	}
	return r.store.PutMCPServer(ctx, v, actor, base, false)
}

// Delete removes the registration name (admin) when its current version
// is base (AnyVersion: unconditional).
func (r *Registry) Delete(ctx context.Context, actor, name string, base int) error {
	if err := ValidName(name); err != nil {
		return apperr.NotFound("no MCP server %q", name)
	}
	if base < AnyVersion {
		return apperr.Invalid("a registration version is 0 or more")
	}
	return r.store.DeleteMCPServer(ctx, name, actor, base)
}

// Get returns the registration name as roles may see it.
func (r *Registry) Get(ctx context.Context, roles []string, name string) (Registration, error) {
	if ValidName(name) != nil {
		return Registration{}, apperr.NotFound("no MCP server %q", name)
	}
	reg, err := r.store.MCPServer(ctx, name)
	if err != nil {
		return Registration{}, err
	}
	return View(reg, roles), nil
}

// List returns every registration as roles may see it.
func (r *Registry) List(ctx context.Context, roles []string) ([]Registration, error) {
	regs, err := r.store.MCPServers(ctx)
	if err != nil {
		return nil, err
	}
	for i := range regs {
		regs[i] = View(regs[i], roles)
	}
	return regs, nil
}

// CommandEnv is the whole environment of a stdio registration's command:
// its env, then each pass_env name copied from lookup when set there.
// Every name is checked again as Validate checks it (the registration
// reached the proxy over the network): a reserved or credential name is an
// error, never passed.
func CommandEnv(s Server, lookup func(string) (string, bool)) ([]string, error) {
	out := make([]string, 0, len(s.Env)+len(s.PassEnv))
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := validEnvName("env", k, false); err != nil {
			return nil, err
		}
		out = append(out, k+"="+s.Env[k])
	}
	for _, k := range s.PassEnv {
		if err := validEnvName("pass_env", k, true); err != nil {
			return nil, err
		}
		if _, set := s.Env[k]; set {
			continue
		}
		if v, ok := lookup(k); ok {
			out = append(out, k+"="+v)
		}
	}
	return out, nil
}
