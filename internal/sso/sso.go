package sso

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/identity"
)

// GroupSync keeps a user's Airlock reviewer groups in line with the
// provider's groups. SetMemberships is called after every successful
// sign-in with the user's provider groups as the ID token lists them; it
// makes the user a member of exactly the groups it keeps among them.
type GroupSync interface {
	SetMemberships(ctx context.Context, username string, groups []string) error
}

// NoGroupSync is the GroupSync that changes nothing.
type NoGroupSync struct{}

// SetMemberships does nothing.
func (NoGroupSync) SetMemberships(context.Context, string, []string) error { return nil }

// CallbackPath is the console path the provider redirects back to; the
// redirect URL registered at the provider is the public URL followed by it.
const CallbackPath = "/ui/sso/callback"

// LoginPath is the console path that starts a sign-in.
const LoginPath = "/ui/sso/login"

// FlowCookie holds a sign-in in progress (state, nonce, PKCE verifier),
// signed, between the start and the callback.
const FlowCookie = "airlock_sso"

// FlowTTL is how long a sign-in may take at the provider.
const FlowTTL = 10 * time.Minute

// Service runs single sign-on.
type Service struct {
	cfg      Config
	ident    *identity.Service
	groups   GroupSync
	redirect string
	key      []byte
	log      *slog.Logger
	client   *http.Client
	now      func() time.Time

	mu       sync.Mutex
	provider *oidc.Provider
}

// Options wire a Service.
type Options struct {
	Identity *identity.Service
	// PublicURL is where browsers reach this server (AIRLOCK_PUBLIC_URL);
	// the provider redirects to PublicURL + CallbackPath.
	PublicURL string
	// Key is the server's signing key; the flow cookie's MAC key is
	// derived from it, so a sign-in started on one instance ends on any.
	Key []byte
	// Groups syncs reviewer groups (nil: NoGroupSync).
	Groups GroupSync
	Logger *slog.Logger
	// HTTPClient reaches the provider (nil: a client with a 10s timeout).
	HTTPClient *http.Client
}

// New returns the Service of cfg, or nil when single sign-on is not
// configured.
func New(cfg Config, o Options) (*Service, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	if err := cfg.Normalise(); err != nil {
		return nil, err
	}
	pub, err := url.Parse(strings.TrimRight(o.PublicURL, "/"))
	if err != nil || (pub.Scheme != "http" && pub.Scheme != "https") || pub.Host == "" {
		return nil, fmt.Errorf("sso: the public URL %q is not an http(s) URL (AIRLOCK_PUBLIC_URL)", o.PublicURL)
	}
	s := &Service{cfg: cfg, ident: o.Identity, groups: o.Groups, redirect: pub.String() + CallbackPath,
		log: o.Logger, client: o.HTTPClient, now: time.Now}
	if s.groups == nil {
		s.groups = NoGroupSync{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.client == nil {
		s.client = &http.Client{Timeout: 10 * time.Second}
	}
	m := hmac.New(sha256.New, o.Key)
	m.Write([]byte("airlock sso flow v1"))
	s.key = m.Sum(nil)
	return s, nil
}

// Issuer is the configured provider's issuer URL.
func (s *Service) Issuer() string { return s.cfg.Issuer }

// RedirectURL is the redirect URL to register at the provider.
func (s *Service) RedirectURL() string { return s.redirect }

// discover reads the provider's discovery document once (again after a
// failure: a provider down at start is retried at the next sign-in).
func (s *Service) discover(ctx context.Context) (*oidc.Provider, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.provider != nil {
		return s.provider, nil
	}
	// The key set fetches the provider's keys later with the context given
	// here: it must outlive this request (s.client bounds each fetch).
	pctx := oidc.ClientContext(context.WithoutCancel(ctx), s.client)
	p, err := oidc.NewProvider(pctx, s.cfg.Issuer)
	if err != nil {
		s.log.WarnContext(ctx, "sso: reading the provider's discovery document", "issuer", s.cfg.Issuer, "err", err)
		return nil, apperr.New(apperr.CodeUnavailable, "the identity provider cannot be reached; try again or sign in with a password")
	}
	s.provider = p
	return p, nil
}

func (s *Service) oauth(p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: s.redirect, Scopes: s.cfg.Scopes}
}

// Start is a sign-in to start: where to go after it (the console) or the
// CLI's loopback address to come back to.
type Start struct {
	// Next is a console path to land on ("" for the role's landing page).
	Next string
	// CLIRedirect is the CLI's loopback URL (http://127.0.0.1:PORT/…,
	// http://[::1]:PORT/… or http://localhost:PORT/…); "" for a console
	// sign-in.
	CLIRedirect string
	// CLIChallenge is the base64url SHA-256 of the CLI's PKCE verifier.
	CLIChallenge string
	// CLIState is echoed to the CLI's loopback address.
	CLIState string
}

// flow is what the flow cookie carries.
type flow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x,omitempty"`
	CLI      string `json:"c,omitempty"`
	CLIChal  string `json:"cc,omitempty"`
	CLIState string `json:"cs,omitempty"`
	Expires  int64  `json:"e"`
}

// Begin starts a sign-in: the provider's authorization URL to send the
// browser to and the flow cookie's value to set for the callback.
func (s *Service) Begin(ctx context.Context, st Start) (authURL, cookie string, err error) {
	if st.CLIRedirect != "" {
		if err := checkLoopback(st.CLIRedirect); err != nil {
			return "", "", err
		}
		if b, err := base64.RawURLEncoding.DecodeString(st.CLIChallenge); err != nil || len(b) != sha256.Size {
			return "", "", apperr.Invalid("cli_challenge must be the base64url SHA-256 of the CLI's verifier (43 characters)")
		}
		if len(st.CLIState) > 256 {
			return "", "", apperr.Invalid("cli_state is too long")
		}
	} else if st.CLIChallenge != "" || st.CLIState != "" {
		return "", "", apperr.Invalid("cli_challenge and cli_state go only with cli_redirect")
	}
	p, err := s.discover(ctx)
	if err != nil {
		return "", "", err
	}
	f := flow{State: rand.Text(), Nonce: rand.Text(), Verifier: oauth2.GenerateVerifier(), Next: st.Next,
		CLI: st.CLIRedirect, CLIChal: st.CLIChallenge, CLIState: st.CLIState, Expires: s.now().Add(FlowTTL).Unix()}
	authURL = s.oauth(p).AuthCodeURL(f.State, oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier))
	return authURL, s.seal(f), nil
}

// checkLoopback accepts only a loopback http URL with a port: the code is
// for the CLI on this machine, never for another host.
func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	bad := apperr.Invalid("cli_redirect must be http://127.0.0.1:PORT/…, http://[::1]:PORT/… or http://localhost:PORT/…")
	if err != nil || u.Scheme != "http" || u.User != nil || u.Port() == "" || u.Fragment != "" {
		return bad
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsLoopback() {
		return nil
	}
	return bad
}

func (s *Service) seal(f flow) string {
	b, _ := json.Marshal(f)
	body := base64.RawURLEncoding.EncodeToString(b)
	return body + "." + s.mac(body)
}

func (s *Service) mac(body string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

var errFlow = apperr.Invalid("this sign-in was not started here or took too long; start it again")

func (s *Service) open(cookie string) (flow, error) {
	body, sig, ok := strings.Cut(cookie, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(s.mac(body))) {
		return flow{}, errFlow
	}
	b, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return flow{}, errFlow
	}
	var f flow
	if err := json.Unmarshal(b, &f); err != nil || f.State == "" || f.Nonce == "" || f.Verifier == "" {
		return flow{}, errFlow
	}
	if s.now().Unix() > f.Expires {
		return flow{}, errFlow
	}
	return f, nil
}

// Callback is the provider's answer as the browser brought it back.
type Callback struct {
	// Cookie is the flow cookie's value ("" when the browser sent none).
	Cookie string
	// State, Code, Error and ErrorDescription are the callback's query.
	State, Code, Error, ErrorDescription string
	// Addr is the client's address (audited).
	Addr netip.Addr
}

// Result is a finished sign-in.
type Result struct {
	// User is who signed in, with the roles the role map gave.
	User identity.User
	// Token is the console session (zero for a CLI sign-in).
	Token auth.Token
	// Next is where the console goes ("" for the role's landing page).
	Next string
	// CLIRedirect, for a CLI sign-in, is the loopback URL to send the
	// browser to, carrying the one-time code and the CLI's state.
	CLIRedirect string
}

// Finish checks the provider's answer against the flow cookie (state),
// exchanges the code at the provider's token endpoint with the PKCE
// verifier, verifies the ID token (signature by the provider's keys,
// issuer, audience, expiry) and its nonce, and signs the user in through
// identity.Service. A wrong or missing state or nonce is invalid; the
// provider's refusal is unauthorized.
func (s *Service) Finish(ctx context.Context, cb Callback) (Result, error) {
	f, err := s.open(cb.Cookie)
	if err != nil {
		return Result{}, err
	}
	if cb.State == "" || subtle.ConstantTimeCompare([]byte(cb.State), []byte(f.State)) != 1 {
		return Result{}, apperr.Invalid("the sign-in's state does not match; start it again")
	}
	if cb.Error != "" {
		return Result{}, apperr.Unauthorized("the identity provider refused the sign-in: %s", providerError(cb.Error, cb.ErrorDescription))
	}
	if cb.Code == "" {
		return Result{}, apperr.Invalid("the identity provider sent no code")
	}
	p, err := s.discover(ctx)
	if err != nil {
		return Result{}, err
	}
	xctx := oidc.ClientContext(ctx, s.client)
	tok, err := s.oauth(p).Exchange(xctx, cb.Code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		s.log.WarnContext(ctx, "sso: exchanging the code", "err", err)
		return Result{}, apperr.Unauthorized("the identity provider did not accept the sign-in's code; start it again")
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Result{}, apperr.Unauthorized("the identity provider returned no ID token")
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: s.cfg.ClientID, Now: s.now}).Verify(xctx, raw)
	if err != nil {
		s.log.WarnContext(ctx, "sso: verifying the ID token", "err", err)
		return Result{}, apperr.Unauthorized("the identity provider's ID token did not verify")
	}
	if idt.Nonce == "" || subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		return Result{}, apperr.Invalid("the ID token's nonce does not match this sign-in; start it again")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return Result{}, apperr.Unauthorized("the ID token's claims could not be read")
	}
	groups := stringsClaim(claims[s.cfg.GroupsClaim])
	id := identity.SSOIdentity{Issuer: idt.Issuer, Subject: idt.Subject, Name: nameOf(claims), Roles: s.cfg.Roles(groups)}
	adm, err := s.ident.SyncSSOUser(ctx, id, cb.Addr)
	if err != nil {
		return Result{}, err
	}
	u := adm.User()
	// Reviewer groups follow the provider's groups before the user gets a
	// session: one whose sync failed is not let in with yesterday's
	// groups (fail closed; the next sign-in tries again).
	if err := s.groups.SetMemberships(ctx, u.Username, groups); err != nil {
		s.log.ErrorContext(ctx, "sso: syncing reviewer groups", "user", u.Username, "err", err)
		return Result{}, apperr.New(apperr.CodeUnavailable, "your reviewer groups could not be updated; try again")
	}
	res := Result{User: u}
	if f.CLI != "" {
		code, err := s.ident.IssueSSOCode(ctx, adm, f.CLIChal)
		if err != nil {
			return Result{}, err
		}
		cli, _ := url.Parse(f.CLI)
		q := cli.Query()
		q.Set("code", code)
		if f.CLIState != "" {
			q.Set("state", f.CLIState)
		}
		cli.RawQuery = q.Encode()
		res.CLIRedirect = cli.String()
		return res, nil
	}
	if res.Token, err = s.ident.StartSSOSession(ctx, adm); err != nil {
		return Result{}, err
	}
	res.Next = f.Next
	return res, nil
}

// providerError is the provider's error as a short, printable text.
func providerError(code, desc string) string {
	msg := code
	if desc != "" {
		msg += " (" + desc + ")"
	}
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, msg)
}

// stringsClaim reads a claim that is a list of strings or one string.
func stringsClaim(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// nameOf is the name a new user is given: preferred_username, else email.
func nameOf(claims map[string]any) string {
	for _, k := range []string{"preferred_username", "email"} {
		if s, ok := claims[k].(string); ok && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// Exchange turns the CLI's one-time code and PKCE verifier into a
// session (identity.Service.ExchangeSSOCode).
func (s *Service) Exchange(ctx context.Context, code, verifier string, addr netip.Addr) (auth.Token, identity.User, error) {
	return s.ident.ExchangeSSOCode(ctx, code, verifier, addr)
}
