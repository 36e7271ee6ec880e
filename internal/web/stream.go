package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/identity"
)

// Close codes the stream uses. Browsers (htmx-ext-ws) reconnect after
// 1011, 1012 and 1013 (and after a dropped connection, 1006); a closed
// session (1008) sends the page to the login form instead.
const (
	closeTooSlow      = websocket.StatusTryAgainLater // 1013: fell behind; reconnect and resync
	closeShuttingDown = websocket.StatusServiceRestart
	closeSessionEnded = websocket.StatusPolicyViolation
	closeRolesChanged = websocket.StatusServiceRestart
)

// stream serves GET /api/v1/stream: every change of every action, as
// {"type":"action.created"|"action.updated","action":{…}} or
// {"type":"resync"}, to reviewers (and, without confirmation phrases,
// auditors).
//
// The handshake is refused with 403 before upgrading when its Origin is not
// this server's own (cross-site websocket hijacking), and a browser (session
// cookie) must send an Origin. Bearer tokens are accepted too, for programs.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request) {
	p, fromCookie, err := h.streamPrincipal(r)
	origin := r.Header.Get("Origin")
	switch {
	case origin != "" && !sameOrigin(origin, r):
		http.Error(w, "cross-origin websocket refused", http.StatusForbidden)
		return
	case origin == "" && fromCookie:
		http.Error(w, "a browser session must send its Origin", http.StatusForbidden)
		return
	case err != nil:
		status := statusOf(err)
		if status == http.StatusUnauthorized {
			http.Error(w, "sign in first", status)
		} else {
			h.log.ErrorContext(r.Context(), "console stream: authenticating", "err", err)
			http.Error(w, "internal error", status)
		}
		return
	case !p.HasAny(auth.RoleReviewer, auth.RoleAuditor):
		http.Error(w, "the stream needs the reviewer or auditor role", http.StatusForbidden)
		return
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return // Accept has answered the request
	}
	user := ""
	if p.Kind == auth.KindUser {
		user = p.Subject
	}
	c := h.hub.add(p.Has(auth.RoleReviewer), user)
	if c == nil {
		conn.Close(closeShuttingDown, "server shutting down")
		return
	}
	defer h.hub.remove(c)
	h.serveClient(r.Context(), conn, c, p)
}

// serveClient writes c's queue to conn until either side ends. The client
// sends nothing; reading only answers pings and notices the close.
func (h *Handler) serveClient(ctx context.Context, conn *websocket.Conn, c *streamClient, p *auth.Principal) {
	ctx = conn.CloseRead(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer conn.CloseNow()

	// Pings in their own goroutine: a slow pong must not hold the writes.
	// Each ping re-checks the session, and so does a change of the user
	// (disabled, deleted, roles changed) announced on any instance, so a
	// logout, revocation or disabled user ends open streams too.
	ended := make(chan websocket.StatusCode, 1)
	go func() {
		t := time.NewTicker(h.pingEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.recheck:
			case <-t.C:
				pctx, pcancel := context.WithTimeout(ctx, h.writeTimeout)
				err := conn.Ping(pctx)
				pcancel()
				if err != nil {
					cancel()
					return
				}
			}
			if code, end := h.sessionEnded(ctx, p); end {
				ended <- code
				cancel()
				return
			}
		}
	}()

	for {
		select {
		case <-ctx.Done():
			select {
			case code := <-ended:
				conn.Close(code, closeReason[code])
			default:
			}
			return
		case <-c.dropped:
			if c.shutdown {
				conn.Close(closeShuttingDown, "server shutting down")
			} else {
				h.log.Info("console stream: dropping a client that fell behind", "user", p.Subject)
				conn.Close(closeTooSlow, "fell behind: reconnect and resync")
			}
			return
		case f := <-c.send:
			wctx, wcancel := context.WithTimeout(ctx, h.writeTimeout)
			err := conn.Write(wctx, websocket.MessageText, f.bytes(c.reviewer))
			wcancel()
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) {
					h.log.Info("console stream: dropping a client too slow to write to", "user", p.Subject)
				}
				return
			}
		}
	}
}

// sessionEnded checks the stream's principal again: a session that ended
// closes with 1008; a change of roles with 1012, so the browser reconnects
// and is served by what the user may see now. A database error keeps the
// stream (the next check decides).
func (h *Handler) sessionEnded(ctx context.Context, p *auth.Principal) (websocket.StatusCode, bool) {
	now, err := h.ident.Current(ctx, p)
	switch {
	case apperr.CodeOf(err) == apperr.CodeUnauthorized:
		return closeSessionEnded, true
	case err != nil:
		return 0, false
	case !now.HasAny(auth.RoleReviewer, auth.RoleAuditor):
		return closeSessionEnded, true
	case now.Has(auth.RoleReviewer) != p.Has(auth.RoleReviewer):
		return closeRolesChanged, true
	}
	return 0, false
}

var closeReason = map[websocket.StatusCode]string{
	closeSessionEnded: "session ended",
	closeRolesChanged: "roles changed: reconnect",
}

// streamPrincipal authenticates the stream by session cookie or bearer
// token, reporting which.
func (h *Handler) streamPrincipal(r *http.Request) (*auth.Principal, bool, error) {
	raw, fromCookie := auth.Credentials(r)
	src := identity.Bearer
	if fromCookie {
		src = identity.Cookie
	}
	p, err := h.ident.Authenticate(r.Context(), raw, src)
	return p, fromCookie, err
}

// sameOrigin reports whether origin (an Origin header) names this server as
// the request reached it. Behind a TLS-terminating proxy the scheme differs
// from the request's, so the host decides, as in coder/websocket.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}
