package web_test

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/airlockhq/airlock/client"
	"github.com/airlockhq/airlock/internal/apptest"
)

// askPolicy sends email.send to a reviewer and allows fs.read.
var askPolicy = map[string]any{"rules": []map[string]any{
	{"id": "reads", "tool": "fs.read", "effect": "allow"},
	{"id": "ask-before-mail", "tool": "email.send", "effect": "approve", "timeout": "15m"},
}}

// browser is an HTTP client with a cookie jar that does not follow
// redirects, like a browser session seen from the server.
type browser struct {
	t    *testing.T
	base string
	http *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{t: t, base: base, http: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// signIn logs in through the console's login form.
func signIn(t *testing.T, env *apptest.Env, user, password string) *browser {
	t.Helper()
	b := newBrowser(t, env.URL)
	resp, body := b.get("/ui/login")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = b.post("/ui/login", url.Values{"csrf": {csrfOf(t, body)}, "username": {user}, "password": {password}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "login")
	return b
}

// reviewerSession creates a reviewer and signs them in.
func userSession(t *testing.T, env *apptest.Env, name string, roles ...string) (*browser, *client.Client) {
	t.Helper()
	c := env.User(name, roles...)
	return signIn(t, env, name, name+"-password-123"), c
}

func (b *browser) do(req *http.Request) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.http.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	return resp, string(body)
}

func (b *browser) get(path string) (*http.Response, string) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.base+path, nil)
	require.NoError(b.t, err)
	return b.do(req)
}

// post sends a form as a same-origin browser would.
func (b *browser) post(path string, form url.Values, headers ...string) (*http.Response, string) {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	require.NoError(b.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return b.do(req)
}

// cookie returns the value of the session cookie.
func (b *browser) session() string {
	u, _ := url.Parse(b.base)
	for _, c := range b.http.Jar.Cookies(u) {
		if c.Name == "airlock_session" {
			return c.Value
		}
	}
	return ""
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfOf returns the form token in a page.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRe.FindStringSubmatch(page)
	require.NotNil(t, m, "no csrf token in the page")
	return html.UnescapeString(m[1])
}

// streamURL is the websocket URL of a server.
func streamURL(base string) string { return "ws" + strings.TrimPrefix(base, "http") + "/api/v1/stream" }

// dial opens the stream with the given headers.
func dial(ctx context.Context, base string, hdr http.Header) (*websocket.Conn, *http.Response, error) {
	conn, resp, err := websocket.Dial(ctx, streamURL(base), &websocket.DialOptions{HTTPHeader: hdr})
	if conn != nil {
		conn.SetReadLimit(1 << 20)
	}
	return conn, resp, err
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// message is one stream message as a client sees it.
type message struct {
	Type   string         `json:"type"`
	Action *client.Action `json:"action"`
	at     time.Time
}

// streamReader collects every message of one connection.
type streamReader struct {
	conn *websocket.Conn
	mu   sync.Mutex
	msgs []message
	err  error
	done chan struct{}
}

func readStream(ctx context.Context, conn *websocket.Conn) *streamReader {
	s := &streamReader{conn: conn, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			_, data, err := conn.Read(ctx)
			at := time.Now()
			if err != nil {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
				return
			}
			var m message
			if json.Unmarshal(data, &m) == nil {
				m.at = at
				s.mu.Lock()
				s.msgs = append(s.msgs, m)
				s.mu.Unlock()
			}
		}
	}()
	return s
}

func (s *streamReader) snapshot() []message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]message(nil), s.msgs...)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
