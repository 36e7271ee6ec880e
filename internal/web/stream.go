package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/httpapi"
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
// The handshake is refused before upgrading, with the API's error body:
// 403 when its Origin is not this server's own (cross-site websocket
// hijacking) or when a session cookie comes without an Origin (a browser
// always sends one); 401 without acceptable credentials; 403 for a caller
// without the reviewer or auditor role (an agent token); and whatever
// websocket.Accept refuses (426 upgrade_required for a request that is no
// websocket upgrade); 429 rate_limited, with Retry-After, for a caller
// that already holds as many streams as it may on this instance
// (AIRLOCK_MAX_STREAMS: counted by user, whatever its sessions and
// tokens). Bearer tokens are accepted too, for programs.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request) {
	p, fromCookie, err := h.streamPrincipal(r)
	origin := r.Header.Get("Origin")
	switch {
	case origin != "" && !sameOrigin(origin, r):
		err = apperr.Forbidden("cross-origin websocket refused")
	case origin == "" && fromCookie:
		err = apperr.Forbidden("a browser session must send its Origin")
	case err != nil: // unauthorized (401), or a database failure (logged, 500)
	case !p.HasAny(auth.RoleReviewer, auth.RoleAuditor):
		err = apperr.Forbidden("the stream needs the reviewer or auditor role")
	}
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	// One of the caller's streams on this instance, from before the
	// upgrade to the close: beyond them, 429 with Retry-After.
	release, err := h.streams.Enter(p)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	defer release()
	aw := &acceptWriter{ResponseWriter: w}
	conn, err := websocket.Accept(aw, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		httpapi.WriteError(w, r, h.log, aw.refusal(err))
		return
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

// acceptWriter is the ResponseWriter websocket.Accept writes to: a refusal
// it answers itself (http.Error: a status of 400 or more and a text/plain
// line) is held back, so that the stream answers it as the API's error
// body (refusal); the 101 and the hijack pass through.
type acceptWriter struct {
	http.ResponseWriter
	status int // the refusal's status; 0 while none
}

func (a *acceptWriter) WriteHeader(code int) {
	if code >= http.StatusBadRequest {
		a.status = code
		return
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *acceptWriter) Write(b []byte) (int, error) {
	if a.status != 0 {
		return len(b), nil
	}
	return a.ResponseWriter.Write(b)
}

// Unwrap lets websocket.Accept (and http.ResponseController) reach the
// connection's Hijacker.
func (a *acceptWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// refusal is the API error for Accept's err and the status it chose: 426
// (no upgrade asked: its Upgrade and Connection headers say which to send)
// upgrade_required, 400 invalid, 403 forbidden; anything else (the
// connection could not be hijacked) an internal error, logged.
func (a *acceptWriter) refusal(err error) error {
	code := map[int]apperr.Code{
		http.StatusUpgradeRequired:  apperr.CodeUpgradeRequired,
		http.StatusBadRequest:       apperr.CodeInvalid,
		http.StatusForbidden:        apperr.CodeForbidden,
		http.StatusMethodNotAllowed: apperr.CodeMethod,
	}[a.status]
	if code == "" {
		return fmt.Errorf("console stream: accepting the websocket: %w", err)
	}
	return apperr.New(code, "not a websocket handshake: %s", strings.TrimPrefix(err.Error(), "failed to accept WebSocket connection: "))
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
