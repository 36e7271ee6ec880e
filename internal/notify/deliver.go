package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/netguard"
)

// Event types of a delivery (the webhook body's "type").
const (
	EventPending   = "action.pending"
	EventEscalated = "action.escalated"
	EventDecided   = "action.decided"
)

// Webhook headers.
const (
	HeaderTimestamp = "Airlock-Timestamp"
	HeaderSignature = "Airlock-Signature"
)

// ReplayWindow is how old an Airlock-Timestamp a receiver should accept
// (README "Notifications"): a delivery older than this may be a replay.
const ReplayWindow = 5 * time.Minute

// Claim is one outbox row a deliverer claimed for one attempt.
type Claim struct {
	ID       int64
	ActionID string
	Target   string
	Event    string
	Step     int
	// Attempt is this attempt's number (1 for the first).
	Attempt int
}

// Outcome is how one attempt went.
type Outcome struct {
	OK         bool
	StatusCode int
	Error      string
	// Final: no further attempt (delivered, or given up).
	Final bool
	// NextAt is when the next attempt is due (when not Final).
	NextAt time.Time
}

// Outbox is the deliverer's view of the outbox (internal/store).
type Outbox interface {
	// ClaimDeliveries claims up to limit due rows of the outbox (FOR UPDATE
	// SKIP LOCKED), moving each one's next attempt lease ahead: a claim
	// never answered (the instance died) is due again then.
	ClaimDeliveries(ctx context.Context, limit int, lease time.Duration) ([]Claim, error)
	// RecordAttempt records the attempt of c and its outcome.
	RecordAttempt(ctx context.Context, c Claim, o Outcome) error
	// ReleaseClaim makes c due again at once, as if never attempted (the
	// deliverer is stopping).
	ReleaseClaim(ctx context.Context, c Claim) error
	// Targets returns every target, secrets included.
	Targets(ctx context.Context) ([]Target, error)
}

// Metrics counts deliveries; nil is allowed.
type Metrics interface {
	// Notified counts one attempt by target kind and outcome
	// ("delivered", "failed": retried, "given_up").
	Notified(kind, outcome string)
}

// Config wires a Deliverer.
type Config struct {
	Outbox Outbox
	// Action returns an action as an auditor sees it.
	Action func(ctx context.Context, id string) (*hitl.Action, error)
	// PublicURL is the console's base URL for links (AIRLOCK_PUBLIC_URL).
	PublicURL string
	// SMTPAddr and SMTPFrom configure email (AIRLOCK_SMTP_ADDR,
	// AIRLOCK_SMTP_FROM); email targets fail while SMTPAddr is empty.
	SMTPAddr, SMTPFrom string
	Metrics            Metrics
	Logger             *slog.Logger
	// Interval is how often the outbox is polled (default 250ms).
	Interval time.Duration
	// Lease is how long a claim holds a row (default 60s).
	Lease time.Duration
	// Backoff is the delay before the second attempt, doubled for each
	// further one up to MaxBackoff (defaults 1s and 10m).
	Backoff, MaxBackoff time.Duration
	// MaxAttempts bounds the attempts of one delivery (default 15).
	MaxAttempts int
	// Timeout bounds one attempt (default 10s).
	Timeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Deliverer sends what the outbox holds. One runs per server instance;
// several are safe together.
type Deliverer struct {
	c      Config
	wake   chan struct{}
	mu     sync.Mutex
	guards map[string]*http.Client // by target name and its allow_private
}

// NewDeliverer returns a Deliverer; call Run.
func NewDeliverer(c Config) *Deliverer {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Interval <= 0 {
		c.Interval = 250 * time.Millisecond
	}
	if c.Lease <= 0 {
		c.Lease = 60 * time.Second
	}
	if c.Backoff <= 0 {
		c.Backoff = time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 10 * time.Minute
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 15
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	return &Deliverer{c: c, wake: make(chan struct{}, 1), guards: map[string]*http.Client{}}
}

// Wake makes the deliverer look at the outbox now (a submit on this
// instance queued something).
func (d *Deliverer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends. A delivery in flight when it ends is
// released (due again at once, for this or another instance), unless it
// was made all the same: that one is recorded.
func (d *Deliverer) Run(ctx context.Context) {
	t := time.NewTicker(d.c.Interval)
	defer t.Stop()
	for {
		for {
			n, err := d.RunOnce(ctx)
			if err != nil && ctx.Err() == nil {
				d.c.Logger.Error("delivering notifications", "err", err)
			}
			if n < 20 || err != nil || ctx.Err() != nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.wake:
		}
	}
}

// RunOnce claims what is due, delivers it and returns how many it tried.
func (d *Deliverer) RunOnce(ctx context.Context) (int, error) {
	claims, err := d.c.Outbox.ClaimDeliveries(ctx, 20, d.c.Lease)
	if err != nil || len(claims) == 0 {
		return 0, err
	}
	targets, err := d.c.Outbox.Targets(ctx)
	if err != nil {
		d.releaseAll(ctx, claims)
		return 0, err
	}
	byName := make(map[string]Target, len(targets))
	for _, t := range targets {
		byName[t.Name] = t
	}
	var wg sync.WaitGroup
	for _, c := range claims {
		wg.Go(func() { d.deliver(ctx, c, byName) })
	}
	wg.Wait()
	return len(claims), nil
}

func (d *Deliverer) releaseAll(ctx context.Context, claims []Claim) {
	for _, c := range claims {
		if err := d.c.Outbox.ReleaseClaim(context.WithoutCancel(ctx), c); err != nil {
			d.c.Logger.Warn("releasing a notification claim", "id", c.ID, "err", err)
		}
	}
}

// deliver makes one attempt of c and records it.
func (d *Deliverer) deliver(ctx context.Context, c Claim, targets map[string]Target) {
	t, ok := targets[c.Target]
	var err error
	status := 0
	if !ok {
		err = fmt.Errorf("notification target %q no longer exists", c.Target)
	} else {
		status, err = d.send(ctx, c, t)
	}
	if err != nil && ctx.Err() != nil {
		// Stopping: the attempt did not finish; it is due again at once.
		// One that did is recorded below: released, it would be sent again.
		d.releaseAll(ctx, []Claim{c})
		return
	}
	o := Outcome{OK: err == nil, StatusCode: status, Final: err == nil}
	outcome := "delivered"
	if err != nil {
		o.Error = err.Error()
		if len(o.Error) > 1000 {
			o.Error = o.Error[:1000]
		}
		outcome = "failed"
		if !ok || errors.Is(err, errNoLongerWaits) || c.Attempt >= d.c.MaxAttempts {
			o.Final, outcome = true, "given_up"
		} else {
			o.NextAt = d.c.Now().Add(d.backoff(c.Attempt))
		}
	}
	if d.c.Metrics != nil {
		d.c.Metrics.Notified(t.Kind, outcome)
	}
	if err != nil {
		d.c.Logger.Warn("notification failed", "target", c.Target, "action", c.ActionID, "attempt", c.Attempt, "err", err)
	}
	if err := d.c.Outbox.RecordAttempt(context.WithoutCancel(ctx), c, o); err != nil {
		d.c.Logger.Error("recording a notification attempt", "id", c.ID, "err", err)
	}
}

// backoff is the wait after attempt n failed: Backoff, doubled per
// attempt, at most MaxBackoff.
func (d *Deliverer) backoff(n int) time.Duration {
	b := d.c.Backoff
	for i := 1; i < n && b < d.c.MaxBackoff; i++ {
		b *= 2
	}
	return min(b, d.c.MaxBackoff)
}

// send makes the delivery; the status is the HTTP status (0 for email or
// none).
func (d *Deliverer) send(ctx context.Context, c Claim, t Target) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, d.c.Timeout)
	defer cancel()
	a, err := d.c.Action(ctx, c.ActionID)
	if err != nil {
		return 0, fmt.Errorf("reading action %s: %w", c.ActionID, err)
	}
	if c.Event != EventDecided && a.Status != hitl.StatusPending {
		// Decided since it was queued (a retry, or a deliverer behind):
		// telling reviewers it waits for them would be false, and its
		// targets are told the decision (action.decided) instead.
		return 0, fmt.Errorf("%w: it is %s", errNoLongerWaits, a.Status)
	}
	link := ActionURL(d.c.PublicURL, a.ID)
	now := d.c.Now()
	switch t.Kind {
	case KindWebhook:
		body, err := WebhookBody(c.Event, a, link)
		if err != nil {
			return 0, err
		}
		ts := strconv.FormatInt(now.Unix(), 10)
		return d.post(ctx, t, body, map[string]string{HeaderTimestamp: ts, HeaderSignature: Sign(t.Secret, ts, body)})
	case KindSlack:
		body, err := SlackMessage(c.Event, a, link, now)
		if err != nil {
			return 0, err
		}
		return d.post(ctx, t, body, nil)
	case KindEmail:
		return 0, d.mail(ctx, t, c.Event, a, link, now)
	}
	return 0, fmt.Errorf("unknown target kind %q", t.Kind)
}

// Sign returns the Airlock-Signature of body sent at timestamp ts:
// "v1=" and the hex HMAC-SHA256 of ts + "." + body under secret.
func Sign(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// ActionURL is the console link of an action.
func ActionURL(base, id string) string { return base + "/ui/actions/" + id }

func (d *Deliverer) client(t Target) *http.Client {
	key := t.Name + "|" + strings.Join(t.AllowPrivate, ",")
	d.mu.Lock()
	defer d.mu.Unlock()
	if c, ok := d.guards[key]; ok {
		return c
	}
	c := netguard.New(netguard.Options{AllowPrivate: t.Prefixes()}).Client()
	d.guards[key] = c
	return c
}

// errNoLongerWaits: an action.pending or action.escalated delivery is not
// sent once its action no longer waits for a reviewer.
var errNoLongerWaits = errors.New("not sent: the action no longer waits for a reviewer")

// errStatus is a receiver's answer other than 2xx.
var errStatus = errors.New("receiver answered")

func (d *Deliverer) post(ctx context.Context, t Target, body []byte, headers map[string]string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Airlock-Notify/1")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := d.client(t).Do(req)
	if err != nil {
		// Not the *url.Error itself: it names the URL, whose path may be
		// the target's credential (a Slack webhook), and the error is shown
		// to reviewers on the action page.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, fmt.Errorf("posting to target %s: %w", t.Name, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("%w %d", errStatus, resp.StatusCode)
	}
	return resp.StatusCode, nil
}
