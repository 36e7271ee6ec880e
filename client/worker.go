package client

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Job is a leased job: the approved built-in action a worker must run.
type Job struct {
	ID        string         `json:"id"`
	ActionID  string         `json:"action_id"`
	Pin       string         `json:"pin,omitempty"`
	Fence     int64          `json:"fence"`
	Kind      string         `json:"kind"`
	Target    string         `json:"target"`
	Args      map[string]any `json:"args"`
	Attempt   int            `json:"attempt"`
	ExpiresAt time.Time      `json:"lease_expires_at"`
	TTLMillis int64          `json:"lease_ttl_ms"`
	AgentID   string         `json:"agent_id"`
	// Tool is the action's tool: what a preview job prepares the preview
	// of (worktree.merge, worktree.run, fs.write, fs.patch; exec for an
	// exec.preview job).
	Tool string `json:"tool,omitempty"`
	// DenyPaths and ReadOnlyPaths are the agent's effective deny_paths and
	// read_only_paths: the worker hides, or binds read-only, what they
	// cover in the workspace.
	DenyPaths     []string `json:"deny_paths,omitempty"`
	ReadOnlyPaths []string `json:"read_only_paths,omitempty"`
}

// UnmarshalJSON decodes a job with the numbers in its args kept exactly
// as they were approved (json.Number), never rounded through float64, as
// Action does: the worker runs what the reviewer saw.
func (j *Job) UnmarshalJSON(b []byte) error {
	type plain Job // without UnmarshalJSON
	j.Args = nil   // decoded afresh, not merged into
	// Args is the only free-form field: UseNumber reaches nothing else.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode((*plain)(j))
}

// JobResult is a worker's report of a finished job.
type JobResult struct {
	ExitCode   int    `json:"exit_code"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Truncated  bool   `json:"truncated"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`
	Worktree   string `json:"worktree,omitempty"`
	Branch     string `json:"branch,omitempty"`
	Diff       string `json:"diff,omitempty"`
	Commit     string `json:"commit,omitempty"`
	Base       string `json:"base,omitempty"`
	// Tree is the tree id of the worktree's files an exec's impact
	// preview ran on (Commit is its HEAD).
	Tree string `json:"tree,omitempty"`
}

// Lease asks for a job of kinds for targets, waiting up to wait; nil when
// none came (worker token).
func (c *Client) Lease(ctx context.Context, kinds, targets []string, wait time.Duration) (*Job, error) {
	var out struct {
		Job *Job `json:"job"`
	}
	body := map[string]any{"kinds": kinds, "targets": targets, "wait": wait.String()}
	status, err := c.Do(ctx, http.MethodPost, "/api/v1/worker/lease", body, &out)
	if err != nil || status == http.StatusNoContent {
		return nil, err
	}
	return out.Job, nil
}

// HeartbeatAnswer is the server's answer to a heartbeat: the lease's new
// end, or Stop when the job's action was stopped (cancelled by a reviewer
// or admin, its agent suspended, its token revoked): the worker must kill
// the run and report nothing.
type HeartbeatAnswer struct {
	Until  time.Time `json:"lease_expires_at"`
	Stop   bool      `json:"stop,omitempty"`
	Reason string    `json:"reason,omitempty"`
}

// Heartbeat extends the lease on a job; a 409 means the lease is lost.
func (c *Client) Heartbeat(ctx context.Context, id string, fence int64) (*HeartbeatAnswer, error) {
	var out HeartbeatAnswer
	if _, err := c.Do(ctx, http.MethodPost, "/api/v1/worker/jobs/"+url.PathEscape(id)+"/heartbeat", map[string]any{"fence": fence}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Complete reports a job's result under the lease with fence.
func (c *Client) Complete(ctx context.Context, id string, fence int64, r JobResult) (*Action, error) {
	var a Action
	_, err := c.Do(ctx, http.MethodPost, "/api/v1/worker/jobs/"+url.PathEscape(id)+"/complete", map[string]any{"fence": fence, "result": r}, &a)
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// WorkerToken is an issued worker token and the targets it serves.
type WorkerToken struct {
	AgentToken
	Targets []string `json:"targets"`
}

// IssueWorkerToken issues a worker token for the targets the worker may
// serve ("workspace:NAME", "repo:NAME") (admin); ttl 0 = default.
func (c *Client) IssueWorkerToken(ctx context.Context, name string, targets []string, ttl time.Duration) (*WorkerToken, error) {
	var t WorkerToken
	body := map[string]any{"targets": targets}
	if ttl > 0 {
		body["ttl_seconds"] = int64(ttl / time.Second)
	}
	if _, err := c.Do(ctx, http.MethodPost, "/api/v1/workers/"+url.PathEscape(name)+"/tokens", body, &t); err != nil {
		return nil, err
	}
	return &t, nil
}
