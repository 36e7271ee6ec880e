// Package notify tells reviewers where they are that an action waits: the
// notification targets admins configure (Slack incoming webhooks, signed
// generic webhooks, email over SMTP), their rules (Validate, View), the
// Targets service the JSON API and the console both call, and the
// Deliverer that sends what the outbox holds. Outbox rows are written by
// internal/store in the transaction of the change they tell of; the
// deliverer claims them, sends, and records every attempt.
package notify

import (
	"context"
	"net/mail"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/policy"
)

// Kinds of target.
const (
	KindSlack   = "slack"   // a Slack-compatible incoming webhook: Block Kit message
	KindWebhook = "webhook" // a generic webhook: signed JSON body
	KindEmail   = "email"   // email over SMTP (AIRLOCK_SMTP_ADDR)
)

// Redacted replaces a secret in every view of a target.
const Redacted = "[redacted]"

// Bounds of a target.
const (
	MaxURLLen     = 2048
	MaxSecretLen  = 1024
	MaxRecipients = 50
	MaxAllow      = 32
)

// Target is one notification target. Its JSON form is the API's; answers
// carry it through View (the secret redacted).
type Target struct {
	// Name is the key rules and settings.notify name: 1–64 characters from
	// [a-z0-9._-].
	Name string `json:"name"`
	// Kind is slack, webhook or email.
	Kind string `json:"kind"`
	// URL is where a slack or webhook target posts: https, or plain http
	// only to a loopback address that AllowPrivate covers.
	URL string `json:"url,omitempty"`
	// Secret is a webhook's HMAC-SHA256 signing key (required for webhook,
	// not allowed otherwise). Answers show Redacted.
	Secret string `json:"secret,omitempty"`
	// To are an email target's recipients.
	To []string `json:"to,omitempty"`
	// AllowPrivate are the non-public ranges (CIDRs) the URL may resolve
	// into, as for MCP http registrations; every other private, loopback
	// or link-local address is refused at connect time (internal/netguard).
	AllowPrivate []string `json:"allow_private,omitempty"`
	// CreatedBy and CreatedAt are set by the store.
	CreatedBy string    `json:"created_by,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
}

// Prefixes returns AllowPrivate parsed (entries Validate accepted).
func (t Target) Prefixes() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(t.AllowPrivate))
	for _, p := range t.AllowPrivate {
		if pr, err := netip.ParsePrefix(p); err == nil {
			out = append(out, pr.Masked())
		}
	}
	return out
}

func invalid(field, format string, args ...any) error {
	e := apperr.Invalid(format, args...)
	e.Details = map[string]any{"field": field}
	return e
}

// Validate checks a target as an admin wrote it and returns it
// normalised (CIDRs masked, recipients as given).
func Validate(t Target) (Target, error) {
	if !policy.ValidRouteName(t.Name) {
		return t, invalid("name", "name must be 1-64 characters from a-z 0-9 . _ - (starting with a letter or digit)")
	}
	if len(t.AllowPrivate) > MaxAllow {
		return t, invalid("allow_private", "at most %d ranges", MaxAllow)
	}
	for i, p := range t.AllowPrivate {
		pr, err := netip.ParsePrefix(p)
		if err != nil {
			return t, invalid("allow_private", "allow_private[%d] %q is not a CIDR such as 127.0.0.0/8", i, p)
		}
		t.AllowPrivate[i] = pr.Masked().String()
	}
	switch t.Kind {
	case KindSlack, KindWebhook:
		if len(t.To) > 0 {
			return t, invalid("to", "to is only for email targets")
		}
		if err := validURL(t.URL, t.Prefixes()); err != nil {
			return t, err
		}
		if t.Kind == KindWebhook && t.Secret == "" {
			return t, invalid("secret", "a webhook target needs a secret: its deliveries are signed with it (Airlock-Signature)")
		}
		if t.Kind == KindSlack && t.Secret != "" {
			return t, invalid("secret", "a slack target has no secret (its URL is one)")
		}
		if len(t.Secret) > MaxSecretLen || !utf8.ValidString(t.Secret) {
			return t, invalid("secret", "secret must be at most %d bytes of text", MaxSecretLen)
		}
	case KindEmail:
		if t.URL != "" || t.Secret != "" || len(t.AllowPrivate) > 0 {
			return t, invalid("url", "an email target has only to (the SMTP server is AIRLOCK_SMTP_ADDR)")
		}
		if len(t.To) == 0 || len(t.To) > MaxRecipients {
			return t, invalid("to", "an email target needs 1-%d recipients", MaxRecipients)
		}
		for i, addr := range t.To {
			a, err := mail.ParseAddress(addr)
			if err != nil || a.Name != "" || a.Address != addr || strings.ContainsAny(addr, "\r\n") {
				return t, invalid("to", "to[%d] %q is not a bare email address such as oncall@example.com", i, addr)
			}
		}
	default:
		return t, invalid("kind", "kind must be slack, webhook or email")
	}
	return t, nil
}

// validURL: https, or plain http only to a loopback host that
// allow_private covers (a receiver on the same machine), as for MCP
// registrations.
func validURL(raw string, allow []netip.Prefix) error {
	if raw == "" {
		return invalid("url", "a slack or webhook target needs a url")
	}
	if len(raw) > MaxURLLen || !utf8.ValidString(raw) || strings.ContainsAny(raw, "\x00 \t\r\n\\") {
		return invalid("url", "url must be an absolute https URL of at most %d bytes", MaxURLLen)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" || u.Hostname() == "":
		return invalid("url", "url must be an absolute https URL")
	case u.User != nil:
		return invalid("url", "url must not hold credentials")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return invalid("url", "url must not have a fragment")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if a, err := netip.ParseAddr(u.Hostname()); err == nil && a.Unmap().IsLoopback() &&
			slices.ContainsFunc(allow, func(p netip.Prefix) bool { return p.Contains(a.Unmap()) }) {
			return nil
		}
		return invalid("url", "plain http is allowed only to a loopback address that allow_private covers (such as http://127.0.0.1:9000 with allow_private [127.0.0.0/8]); use https")
	}
	return invalid("url", "url's scheme must be https (or http to loopback), not %q", u.Scheme)
}

// View returns t as every answer shows it: the secret redacted, and a
// Slack URL's path and query (which hold its credential) too.
func View(t Target) Target {
	if t.Secret != "" {
		t.Secret = Redacted
	}
	if t.Kind == KindSlack {
		if u, err := url.Parse(t.URL); err == nil && (u.Path != "" && u.Path != "/" || u.RawQuery != "") {
			t.URL = u.Scheme + "://" + u.Host + "/" + Redacted
		}
	}
	t.To = slices.Clone(t.To)
	t.AllowPrivate = slices.Clone(t.AllowPrivate)
	return t
}

// Store persists targets; every change writes its audit event in the same
// transaction.
type Store interface {
	// CreateTarget stores a new target; conflict when the name is taken.
	CreateTarget(ctx context.Context, actor string, t Target, view Target) (Target, error)
	// Targets returns every target (secrets included), by name.
	Targets(ctx context.Context) ([]Target, error)
	// DeleteTarget deletes one; not_found when there is none. Queued
	// deliveries to it then fail.
	DeleteTarget(ctx context.Context, actor, name string) error
}

// Targets is the service over notification targets.
type Targets struct {
	store Store
}

// NewTargets returns the service over store.
func NewTargets(store Store) *Targets { return &Targets{store: store} }

// Create validates and stores a target and returns its view.
func (s *Targets) Create(ctx context.Context, actor string, t Target) (Target, error) {
	t, err := Validate(t)
	if err != nil {
		return Target{}, err
	}
	out, err := s.store.CreateTarget(ctx, actor, t, View(t))
	if err != nil {
		return Target{}, err
	}
	return View(out), nil
}

// List returns every target's view.
func (s *Targets) List(ctx context.Context) ([]Target, error) {
	ts, err := s.store.Targets(ctx)
	if err != nil {
		return nil, err
	}
	for i := range ts {
		ts[i] = View(ts[i])
	}
	return ts, nil
}

// Delete deletes a target.
func (s *Targets) Delete(ctx context.Context, actor, name string) error {
	if !policy.ValidRouteName(name) {
		return apperr.NotFound("no notification target %q", name)
	}
	return s.store.DeleteTarget(ctx, actor, name)
}
