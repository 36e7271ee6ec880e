// Package web is the reviewer console: server-rendered pages (templ, in
// web/templates) for the approval queue, actions, agents and policies,
// users and the audit trail, and the websocket stream that keeps open
// queues live. Its route table is in routes.go; pages post to the console's
// own routes, which call the same services as the JSON API.
package web

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"log/slog"
	"time"

	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/connlimit"
	"github.com/airlockhq/airlock/internal/eventbus"
	"github.com/airlockhq/airlock/internal/groups"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/httpapi"
	"github.com/airlockhq/airlock/internal/identity"
	"github.com/airlockhq/airlock/internal/notify"
	"github.com/airlockhq/airlock/internal/sso"
	"github.com/airlockhq/airlock/internal/store"
)

// Handler serves the console and the stream.
type Handler struct {
	svc    *hitl.Service
	ident  *identity.Service
	store  *store.Store
	api    *httpapi.Server
	signer *auth.Signer
	log    *slog.Logger
	secure bool
	// csrfKey signs form tokens; it is derived from the shared signing key,
	// so a form rendered by one instance posts to any other.
	csrfKey []byte
	hub     *hub
	static  *staticFiles
	sso     *sso.Service

	writeTimeout time.Duration
	pingEvery    time.Duration

	targets *notify.Targets
	groups  *groups.Service
	// streams bounds each caller's streams on this instance (nil: none).
	streams *connlimit.Limiter
}

// Config wires a Handler.
type Config struct {
	Service *hitl.Service
	// Identity owns users, agents, tokens and authentication; nil builds
	// one over Store, Signer and Bus.
	Identity *identity.Service
	Store    *store.Store
	// API logs users in (rate limited, audited) and sets the session cookie.
	API    *httpapi.Server
	Signer *auth.Signer
	// Bus is this instance's event bus; the stream subscribes to it.
	Bus *eventbus.Bus
	// Key is the server's signing key (AIRLOCK_JWT_KEY_FILE).
	Key    []byte
	Logger *slog.Logger
	// SecureCookies marks cookies Secure even when the request did not
	// arrive over TLS (TLS ends at a proxy).
	SecureCookies bool
	// ClientBuffer is how many messages a websocket client may fall behind
	// before it is dropped (default 256).
	ClientBuffer int
	// WriteTimeout bounds one websocket write or ping (default 5s).
	WriteTimeout time.Duration
	// PingEvery is the websocket ping interval (default 20s).
	PingEvery time.Duration
	// SSO is single sign-on (nil: not configured; the login page offers
	// only the password form).
	SSO *sso.Service
	// Targets and Groups are the notification targets and reviewer groups
	// services; nil builds them over Store.
	Targets *notify.Targets
	Groups  *groups.Service
	// Streams bounds the streams one caller holds open at once on this
	// instance (AIRLOCK_MAX_STREAMS; the MCP gateway's GET streams count
	// with them). nil: no bound.
	Streams *connlimit.Limiter
}

// New returns a Handler. Call Run to start the stream's fan-out.
func New(c Config) *Handler {
	h := &Handler{svc: c.Service, ident: c.Identity, store: c.Store, api: c.API, signer: c.Signer, log: c.Logger,
		secure: c.SecureCookies, writeTimeout: c.WriteTimeout, pingEvery: c.PingEvery, sso: c.SSO, streams: c.Streams}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.ident == nil {
		h.ident = identity.NewService(identity.Config{Store: c.Store, Signer: c.Signer, Bus: c.Bus})
	}
	if h.writeTimeout <= 0 {
		h.writeTimeout = 5 * time.Second
	}
	if h.pingEvery <= 0 {
		h.pingEvery = 20 * time.Second
	}
	buf := c.ClientBuffer
	if buf <= 0 {
		buf = 256
	}
	mac := hmac.New(sha256.New, c.Key)
	mac.Write([]byte("airlock console csrf v1"))
	h.csrfKey = mac.Sum(nil)
	h.hub = newHub(c.Store, c.Bus, h.log, buf)
	h.static = mustStatic()
	if h.targets = c.Targets; h.targets == nil {
		h.targets = notify.NewTargets(c.Store)
	}
	if h.groups = c.Groups; h.groups == nil {
		h.groups = groups.NewService(c.Store)
	}
	return h
}

// Run fans changes out to websocket clients until ctx ends; then it closes
// every stream (clients reconnect to another instance).
func (h *Handler) Run(ctx context.Context) { h.hub.run(ctx) }
