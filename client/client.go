// Package client is the Go client for Airlock's HTTP API. Agents use Submit,
// Wait, Cancel and ReportResult; the admin and reviewer calls serve tools and
// tests.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client talks to one Airlock server with one token.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// New returns a client for the server at baseURL (e.g. http://127.0.0.1:8080)
// authenticating with token (an agent token, or a user token from Login).
func New(baseURL, token string) *Client {
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, http: &http.Client{Timeout: 90 * time.Second}}
}

// WithHTTPClient returns a copy of c using hc.
func (c *Client) WithHTTPClient(hc *http.Client) *Client {
	cp := *c
	cp.http = hc
	return &cp
}

// WithToken returns a copy of c using token.
func (c *Client) WithToken(token string) *Client {
	cp := *c
	cp.token = token
	return &cp
}

// Token returns the token c authenticates with.
func (c *Client) Token() string { return c.token }

// Error is an error answer from the server.
type Error struct {
	Status  int            `json:"-"`
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
	// RetryAfter is the answer's Retry-After (429, 503), 0 when absent.
	RetryAfter time.Duration `json:"-"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("airlock: %d %s: %s", e.Status, e.Code, e.Message)
}

// StatusOf returns the HTTP status of an *Error in err's chain, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// Do sends a request with a JSON body (nil for none) and decodes a JSON
// answer into out (nil to discard). It returns the HTTP status.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) (int, error) {
	return c.do(ctx, method, path, nil, body, out)
}

// do is Do with extra request headers.
func (c *Client) do(ctx context.Context, method, path string, header http.Header, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("airlock: encoding request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, err
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := readBody(resp)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		var eb struct {
			Error Error `json:"error"`
		}
		if err := json.Unmarshal(data, &eb); err != nil || eb.Error.Code == "" {
			return resp.StatusCode, &Error{Status: resp.StatusCode, Code: "http_error", Message: strings.TrimSpace(string(data)),
				RetryAfter: retryAfter(resp.Header)}
		}
		eb.Error.Status = resp.StatusCode
		eb.Error.RetryAfter = retryAfter(resp.Header)
		return resp.StatusCode, &eb.Error
	}
	if out != nil && len(data) > 0 {
		var err error
		if a, ok := out.(*Action); ok {
			err = a.decode(data) // the submit path's answer: one scan fewer
		} else {
			err = json.Unmarshal(data, out)
		}
		if err != nil {
			return resp.StatusCode, fmt.Errorf("airlock: decoding response: %w", err)
		}
	}
	return resp.StatusCode, nil
}

// retryAfter reads a Retry-After of whole seconds (0: none, or a date).
func retryAfter(h http.Header) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After")))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// maxBody bounds what a response may hold.
const maxBody = 64 << 20

// readBody reads a response's body (up to maxBody) into one buffer of the
// size it announced.
func readBody(resp *http.Response) ([]byte, error) {
	var buf bytes.Buffer
	if n := resp.ContentLength; n > 0 && n <= maxBody {
		buf.Grow(int(n) + bytes.MinRead) // ReadFrom wants MinRead spare to see the end without growing
	}
	_, err := buf.ReadFrom(io.LimitReader(resp.Body, maxBody))
	return buf.Bytes(), err
}

// Risk is an action's risk assessment.
type Risk struct {
	Level   string   `json:"level"`
	Score   int      `json:"score"`
	Reasons []string `json:"reasons"`
	// Injection reports a prompt-injection scan hit in the arguments.
	Injection bool `json:"injection"`
}

// Decision says who or what decided an action.
type Decision struct {
	Effect        string `json:"effect"`
	By            string `json:"by"`
	RuleID        string `json:"rule_id"`
	PolicyVersion int    `json:"policy_version"`
	Source        string `json:"source"`
	Reason        string `json:"reason"`
	// Gate is what a call still waits for: "commands" for a worktree.run
	// whose command set must be approved first, "preview" for a pending
	// exec in a worktree that can be approved once its impact preview is
	// ready.
	Gate string `json:"gate,omitempty"`
	// Rules are every approve rule that sent the call to review when more
	// than one did (the first is RuleID's), each with the reviewer groups
	// it names: every one holds the call.
	Rules []HeldRule `json:"rules,omitempty"`
}

// HeldRule is one of the approve rules that sent a call to review.
type HeldRule struct {
	Source    string   `json:"source"` // agent or fleet
	RuleID    string   `json:"rule_id"`
	Reviewers []string `json:"reviewers,omitempty"`
}

// Approval is one reviewer's approval.
type Approval struct {
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Scope   string    `json:"scope"`
	Comment string    `json:"comment,omitempty"`
}

// Action is the server's action object.
type Action struct {
	ID                 string          `json:"id"`
	AgentID            string          `json:"agent_id"`
	AgentInstance      string          `json:"agent_instance"`
	ConversationID     string          `json:"conversation_id"`
	StepID             string          `json:"step_id"`
	CorrelationID      string          `json:"correlation_id"`
	Tool               string          `json:"tool"`
	Args               map[string]any  `json:"args"`
	Reason             string          `json:"reason"`
	Status             string          `json:"status"`
	Risk               Risk            `json:"risk"`
	Decision           Decision        `json:"decision"`
	Approvals          []Approval      `json:"approvals"`
	RequiredApprovals  int             `json:"required_approvals"`
	ConfirmationPhrase string          `json:"confirmation_phrase,omitempty"`
	ExpiresAt          *time.Time      `json:"expires_at"`
	CreatedAt          time.Time       `json:"created_at"`
	UpdatedAt          time.Time       `json:"updated_at"`
	Result             json.RawMessage `json:"result,omitempty"`
	Preview            json.RawMessage `json:"preview,omitempty"`
	// PreviewSHA256 names the preview as the server stores it, for
	// reviewers while pending ("" for none): ApproveShown sends it back.
	PreviewSHA256 string `json:"preview_sha256,omitempty"`
}

// Pending reports whether the action still waits for a decision.
func (a *Action) Pending() bool { return a.Status == "pending" }

// SubmitRequest is what an agent asks to do.
type SubmitRequest struct {
	Tool           string         `json:"tool"`
	Args           map[string]any `json:"args"`
	AgentInstance  string         `json:"agent_instance,omitempty"`
	ConversationID string         `json:"conversation_id,omitempty"`
	StepID         string         `json:"step_id,omitempty"`
	CorrelationID  string         `json:"correlation_id,omitempty"`
	Reason         string         `json:"reason,omitempty"`
	IdempotencyKey string         `json:"idempotency_key,omitempty"`
}

// Submit asks to make a tool call. The returned action is approved, denied
// or pending; Wait for a pending one.
func (c *Client) Submit(ctx context.Context, req SubmitRequest) (*Action, error) {
	var a Action
	if req.Args == nil {
		req.Args = map[string]any{}
	}
	if _, err := c.Do(ctx, http.MethodPost, "/api/v1/actions", req, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Get returns an action.
func (c *Client) Get(ctx context.Context, id string) (*Action, error) {
	var a Action
	if _, err := c.Do(ctx, http.MethodGet, "/api/v1/actions/"+url.PathEscape(id), nil, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Wait long-polls until the action is decided or ctx ends, and returns it
// as last seen (still pending if ctx ended first, with ctx's error).
//
// A poll refused because this agent already holds as many long polls as
// it may on the server instance (429 with Retry-After) is asked again
// after Retry-After, until ctx ends: the poll waits for a slot as it
// would for the decision. Any other error ends Wait.
func (c *Client) Wait(ctx context.Context, id string) (*Action, error) {
	for {
		wait := 60 * time.Second
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		wait = max(wait, 0)
		var a Action
		path := "/api/v1/actions/" + url.PathEscape(id) + "?wait=" + wait.Round(time.Millisecond).String()
		_, err := c.Do(ctx, http.MethodGet, path, nil, &a)
		var e *Error
		if err != nil && errors.As(err, &e) && e.Status == http.StatusTooManyRequests && e.RetryAfter > 0 && ctx.Err() == nil {
			t := time.NewTimer(e.RetryAfter)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		if !a.Pending() {
			return &a, nil
		}
		if ctx.Err() != nil || wait == 0 {
			return &a, context.DeadlineExceeded
		}
	}
}

// Cancel withdraws a pending action.
func (c *Client) Cancel(ctx context.Context, id string) (*Action, error) {
	var a Action
	if _, err := c.Do(ctx, http.MethodPost, "/api/v1/actions/"+url.PathEscape(id)+"/cancel", nil, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Result is what an agent reports after running an approved action.
type Result struct {
	Outcome string `json:"outcome"` // succeeded | failed
	Output  any    `json:"output,omitempty"`
	Error   string `json:"error,omitempty"`
}

// ReportResult records how an approved action went.
func (c *Client) ReportResult(ctx context.Context, id string, r Result) (*Action, error) {
	var a Action
	if _, err := c.Do(ctx, http.MethodPost, "/api/v1/actions/"+url.PathEscape(id)+"/result", r, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// UnmarshalJSON decodes an action with the numbers in its args kept
// exactly as the server holds them (json.Number), never rounded through
// float64: 10000000000000001 stays 10000000000000001.
func (a *Action) UnmarshalJSON(b []byte) error { return a.decode(b) }

// decode is UnmarshalJSON, and json.Unmarshal(b, a) without its first pass
// (the validity scan, before UnmarshalJSON scans again): the one JSON value
// in b, nothing after it but white space.
func (a *Action) decode(b []byte) error {
	type plain Action // without UnmarshalJSON
	a.Args = nil      // decoded afresh, not merged into
	// Args is the only free-form field: UseNumber reaches nothing else.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode((*plain)(a)); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("invalid character after the action")
	}
	return nil
}
