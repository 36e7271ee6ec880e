package notify

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/smtp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/risk"
)

// webhookBody is a generic webhook's JSON body.
type webhookBody struct {
	Type   string       `json:"type"`
	Action *hitl.Action `json:"action"`
	URL    string       `json:"url"`
}

// WebhookBody is the body of a webhook delivery: the event type, the
// action as an auditor sees it (no confirmation phrase) and its console
// link.
func WebhookBody(event string, a *hitl.Action, link string) ([]byte, error) {
	view := *a
	view.ConfirmationPhrase = ""
	b, err := json.Marshal(webhookBody{Type: event, Action: &view, URL: link})
	if err != nil {
		return nil, fmt.Errorf("notify: encoding webhook body: %w", err)
	}
	return b, nil
}

// headline says what happened, for Slack and email.
func headline(event string, a *hitl.Action) string {
	switch event {
	case EventEscalated:
		return fmt.Sprintf("Escalated: %s by %s still waits for a reviewer", a.Tool, a.AgentID)
	case EventDecided:
		by := a.Decision.By
		if a.Status == hitl.StatusExpired {
			by = "timeout"
		}
		return fmt.Sprintf("Decided: %s by %s is %s (%s)", a.Tool, a.AgentID, a.Status, by)
	}
	return fmt.Sprintf("Waiting for approval: %s by %s", a.Tool, a.AgentID)
}

// ArgsSummary is a one-line summary of an action's arguments: key=value
// pairs in key order, at most max runes.
func ArgsSummary(args map[string]any, max int) string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v, _ := json.Marshal(args[k])
		parts = append(parts, k+"="+string(v))
	}
	s := strings.Join(parts, " ")
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return ' '
		}
		return r
	}, s)
	// Every other hidden character (bidi and other controls, invisible
	// ones, U+2028) as its marker, as the console shows it.
	s = risk.Marked(s)
	if utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max-1]) + "…"
	}
	return s
}

// TimeLeft says how long a pending action has left, or its status.
func TimeLeft(a *hitl.Action, now time.Time) string {
	if a.Status != hitl.StatusPending {
		return string(a.Status)
	}
	if a.ExpiresAt == nil {
		return "no expiry"
	}
	left := a.ExpiresAt.Sub(now).Round(time.Second)
	if left <= 0 {
		return "expiring now"
	}
	return left.String() + " left (expires " + a.ExpiresAt.UTC().Format(time.RFC3339) + ")"
}

func riskLine(a *hitl.Action) string {
	s := fmt.Sprintf("%s (%d)", a.Risk.Level, a.Risk.Score)
	if len(a.Risk.Reasons) > 0 {
		s += ": " + strings.Join(a.Risk.Reasons, "; ")
	}
	return s
}

// slackText is s as Slack's mrkdwn shows it, at most n characters as sent:
// each hidden character as its marker (risk.Marked), what mrkdwn reads as
// markup escaped (&, <, >), then cut (with …) without splitting an
// escape. Cut before escaping, 1,000 "<" became 4,000 characters, past
// Slack's limits for a section (3,000) or a field (2,000): Slack refused
// every delivery of that action.
func slackText(s string, n int) string {
	s = slackEscaper.Replace(risk.Marked(s))
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	cut := string([]rune(s)[:n-1])
	if i := strings.LastIndexByte(cut, '&'); i >= 0 && !strings.Contains(cut[i:], ";") {
		cut = cut[:i] // half an escape
	}
	return cut + "…"
}

var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// SlackMessage is the Block Kit message of a Slack delivery: tool, agent,
// risk and reasons, the agent's reason, a one-line argument summary, the
// time left and a link to the action page.
func SlackMessage(event string, a *hitl.Action, link string, now time.Time) ([]byte, error) {
	text := headline(event, a)
	reason := a.Reason
	if reason == "" {
		reason = "(none given)"
	}
	field := func(label, value string) map[string]any {
		return map[string]any{"type": "mrkdwn", "text": "*" + label + "*\n" + slackText(value, 1900)}
	}
	// A backtick in the arguments would end their code span, and what
	// follows would be read as markup (a link).
	args := strings.ReplaceAll(ArgsSummary(a.Args, 200), "`", "'")
	msg := map[string]any{
		"text": text,
		"blocks": []any{
			map[string]any{"type": "header", "text": map[string]any{"type": "plain_text", "text": truncate(text, 150)}},
			map[string]any{"type": "section", "fields": []any{
				field("Tool", a.Tool), field("Agent", a.AgentID),
				field("Risk", riskLine(a)), field("Time left", TimeLeft(a, now)),
			}},
			map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn",
				"text": "*Reason*\n" + slackText(reason, 1000) + "\n*Arguments*\n`" + slackText(args, 1000) + "`"}},
			map[string]any{"type": "actions", "elements": []any{
				map[string]any{"type": "button", "text": map[string]any{"type": "plain_text", "text": "Open in Airlock"}, "url": link},
			}},
		},
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("notify: encoding slack message: %w", err)
	}
	return b, nil
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// EmailMessage is the RFC 5322 message of an email delivery.
func EmailMessage(from string, to []string, event string, a *hitl.Action, link string, now time.Time) []byte {
	clean := func(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }
	var b strings.Builder
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n",
		clean(from), strings.Join(to, ", "), clean(truncate(headline(event, a), 200)), now.UTC().Format(time.RFC1123Z))
	reason := a.Reason
	if reason == "" {
		reason = "(none given)"
	}
	for _, line := range []string{
		headline(event, a), "",
		"Tool:      " + a.Tool,
		"Agent:     " + a.AgentID,
		"Risk:      " + risk.Marked(riskLine(a)),
		"Reason:    " + risk.Marked(reason),
		"Arguments: " + ArgsSummary(a.Args, 200),
		"Time left: " + TimeLeft(a, now),
		"", "Open: " + link,
	} {
		b.WriteString(clean(line))
		b.WriteString("\r\n")
	}
	return []byte(b.String())
}

func (d *Deliverer) mail(ctx context.Context, t Target, event string, a *hitl.Action, link string, now time.Time) error {
	if d.c.SMTPAddr == "" {
		return fmt.Errorf("email is not configured: set AIRLOCK_SMTP_ADDR")
	}
	from := d.c.SMTPFrom
	if from == "" {
		from = "airlock@localhost"
	}
	msg := EmailMessage(from, t.To, event, a, link, now)
	if err := sendMail(ctx, d.c.SMTPAddr, from, t.To, msg); err != nil {
		return fmt.Errorf("sending email through %s: %w", d.c.SMTPAddr, err)
	}
	return nil
}

// sendMail is smtp.SendMail (no auth) bound to ctx: when ctx ends, the
// connection is closed. Left running past its attempt's timeout, a send
// could still deliver after the attempt was recorded as failed, and the
// retry send the email again.
func sendMail(ctx context.Context, addr, from string, to []string, msg []byte) (err error) {
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer func() {
		stop()
		conn.Close()
		if err != nil && ctx.Err() != nil {
			err = ctx.Err() // not the closed connection's error
		}
	}()
	host, _, _ := net.SplitHostPort(addr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		return err
	}
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(&tls.Config{ServerName: host}); err != nil {
			return err
		}
	}
	if err := c.Mail(from); err != nil {
		return err
	}
	for _, rcpt := range to {
		if err := c.Rcpt(rcpt); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	// The server took the message: it is sent, whatever QUIT answers.
	_ = c.Quit()
	return nil
}
