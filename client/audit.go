package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// VerifyReport is the answer of GET /api/v1/audit/verify.
type VerifyReport struct {
	OK      bool  `json:"ok"`
	Checked int64 `json:"checked"`
	Head    struct {
		Seq  int64  `json:"seq"`
		Hash string `json:"hash"`
	} `json:"head"`
	// From is the seq of the stored checkpoint the walk started after
	// (VerifyAuditFrom); 0 for a walk from the chain's start.
	From        int64  `json:"from,omitempty"`
	FirstBadSeq int64  `json:"first_bad_seq,omitempty"`
	Reason      string `json:"reason,omitempty"`
	// Unsealed counts the events found with no seal that are older than
	// the server's grace (5 s): they make the report not ok (with
	// FirstBadSeq 0 when the chain itself is whole).
	Unsealed int64 `json:"unsealed,omitempty"`
}

// VerifyAudit asks the server to verify the audit chain (auditor), also
// against checkpoints kept elsewhere (each one line of the checkpoints
// export). A verification walks the whole chain: it is not bounded by the
// client's timeout, only by ctx.
func (c *Client) VerifyAudit(ctx context.Context, checkpoints ...string) (*VerifyReport, error) {
	return c.VerifyAuditFrom(ctx, 0, checkpoints...)
}

// VerifyAuditFrom is VerifyAudit starting after the stored checkpoint at
// seq from (0: from the chain's start), for a chain whose older events were
// archived.
func (c *Client) VerifyAuditFrom(ctx context.Context, from int64, checkpoints ...string) (*VerifyReport, error) {
	q := url.Values{}
	if from > 0 {
		q.Set("from", strconv.FormatInt(from, 10))
	}
	for _, cp := range checkpoints {
		q.Add("checkpoint", strings.TrimSpace(cp))
	}
	var buf bytes.Buffer
	if err := c.stream(ctx, "/api/v1/audit/verify?"+q.Encode(), &buf); err != nil {
		return nil, err
	}
	var r VerifyReport
	if err := json.Unmarshal(buf.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("airlock: decoding response: %w", err)
	}
	return &r, nil
}

// ExportAudit copies the NDJSON export of the audit events matching query
// (the audit query's filters, plus order=seq for chain order) to w.
func (c *Client) ExportAudit(ctx context.Context, query url.Values, w io.Writer) error {
	return c.stream(ctx, "/api/v1/audit/export?"+query.Encode(), w)
}

// AuditCheckpoints copies the signed checkpoints with seq > after, as
// NDJSON, to w.
func (c *Client) AuditCheckpoints(ctx context.Context, after int64, w io.Writer) error {
	return c.stream(ctx, "/api/v1/audit/checkpoints?after="+strconv.FormatInt(after, 10), w)
}

// stream GETs path and copies a 200 answer's body to w as it arrives.
func (c *Client) stream(ctx context.Context, path string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	hc := *c.http
	hc.Timeout = 0 // as long as ctx allows
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var eb struct {
			Error Error `json:"error"`
		}
		if err := json.Unmarshal(data, &eb); err != nil || eb.Error.Code == "" {
			return &Error{Status: resp.StatusCode, Code: "http_error", Message: strings.TrimSpace(string(data))}
		}
		eb.Error.Status = resp.StatusCode
		return &eb.Error
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("airlock: reading %s: %w", req.URL.Path, err)
	}
	return nil
}
