// Package insights reads reviewer-fatigue signals out of the decisions
// Airlock recorded: approval rates, how long deciding takes, approvals made
// within seconds of opening an action, long runs of identical approvals,
// and the policy rules those runs suggest. It holds the rules; the JSON API
// and the console only call it.
package insights

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/internal/policy"
)

// Groupings of insight rows.
const (
	ByReviewer = "reviewer"
	ByAgent    = "agent"
	ByTool     = "tool"
)

// Tunables of the signals.
const (
	// QuickApproval: an approval made within this time of the reviewer
	// first opening the action's console page is quick.
	QuickApproval = 5 * time.Second
	// DefaultWindow is how far back insights look without since.
	DefaultWindow = 30 * 24 * time.Hour
	// MaxDecisions bounds the decisions one answer reads (the newest
	// are dropped beyond it and the answer says it was truncated).
	MaxDecisions = 100_000
	// SuggestAfter is how many identical human approvals, and no denial,
	// of one agent's call make a suggested rule.
	SuggestAfter = 5
)

// Decision kinds, as the store reports them.
const (
	KindApproved = "approved"
	KindDenied   = "denied"
	KindExpired  = "expired"
)

// Decision is one decided action, as the store reads it from the audit
// trail: the event that decided it and the action it decided.
type Decision struct {
	ActionID string
	Kind     string // approved, denied or expired
	// Actor decided it: a reviewer, or "system" for an expiry.
	Actor   string
	AgentID string
	Tool    string
	Args    map[string]any
	// Source, RuleID and PolicyVersion are the action's decision: what
	// sent it to review.
	Source        string
	RuleID        string
	PolicyVersion int
	CreatedAt     time.Time
	DecidedAt     time.Time
	// OpenedAt is when Actor first opened the action's console page (nil:
	// never, or not through the console).
	OpenedAt *time.Time
}

// Store reads what insights are computed from.
type Store interface {
	// Decisions returns up to limit approvals, denials and expiries
	// decided at or after since, oldest first.
	Decisions(ctx context.Context, since time.Time, limit int) ([]Decision, error)
	// RecordOpen records that reviewer opened action id's page at at,
	// unless they opened it before (one row per action and reviewer).
	RecordOpen(ctx context.Context, id, reviewer string, at time.Time) error
	// AgentPolicy returns the agent and its current compiled policy set.
	AgentPolicy(ctx context.Context, agentID string) (hitl.Agent, policy.Set, error)
	// Action returns one action; apperr not_found when there is none.
	Action(ctx context.Context, id string) (*hitl.Action, error)
}

// Service computes insights.
type Service struct {
	store Store
	now   func() time.Time
}

// New returns a Service over store.
func New(store Store) *Service { return &Service{store: store, now: time.Now} }

// Row is the signals of one reviewer, agent or tool. Its JSON form is part
// of the API.
type Row struct {
	// Key is the reviewer's username, the agent's id or the tool name.
	Key       string `json:"key"`
	Approvals int    `json:"approvals"`
	Denials   int    `json:"denials"`
	// Expiries are actions nobody decided in time (none for a reviewer).
	Expiries int `json:"expiries"`
	// ApprovalRate is approvals / (approvals + denials), 0 without either.
	ApprovalRate float64 `json:"approval_rate"`
	// MedianDecideMs and P90DecideMs are the time from submission to a
	// reviewer's decision (nearest rank), 0 without any.
	MedianDecideMs int64 `json:"median_decide_ms"`
	P90DecideMs    int64 `json:"p90_decide_ms"`
	// QuickApprovals were made within QuickApproval of the reviewer first
	// opening the action's console page.
	QuickApprovals int `json:"quick_approvals"`
	// LongestIdenticalRun is the longest run of consecutive decisions in
	// the row that were approvals of one identical call (same agent,
	// tool and arguments).
	LongestIdenticalRun int `json:"longest_identical_run"`
}

// Report is the answer of Insights.
type Report struct {
	By    string    `json:"by"`
	Since time.Time `json:"since"`
	Rows  []Row     `json:"rows"`
	// Truncated says MaxDecisions were read and newer ones left out.
	Truncated bool `json:"truncated"`
}

// Query selects a report.
type Query struct {
	// By is reviewer, agent or tool (default reviewer).
	By string
	// Since bounds the decisions (zero: DefaultWindow ago).
	Since time.Time
}

func (s *Service) window(since time.Time) (time.Time, error) {
	now := s.now().UTC()
	if since.IsZero() {
		return now.Add(-DefaultWindow), nil
	}
	if since.After(now) {
		return time.Time{}, apperr.Invalid("since is in the future")
	}
	return since.UTC(), nil
}

// Insights returns the signals grouped by q.By, the rows sorted by most
// decisions first.
func (s *Service) Insights(ctx context.Context, q Query) (Report, error) {
	if q.By == "" {
		q.By = ByReviewer
	}
	if q.By != ByReviewer && q.By != ByAgent && q.By != ByTool {
		return Report{}, &apperr.Error{Code: apperr.CodeInvalid, Message: "by must be reviewer, agent or tool",
			Details: map[string]any{"field": "by"}}
	}
	since, err := s.window(q.Since)
	if err != nil {
		return Report{}, err
	}
	ds, err := s.store.Decisions(ctx, since, MaxDecisions+1)
	if err != nil {
		return Report{}, err
	}
	rep := Report{By: q.By, Since: since, Rows: []Row{}, Truncated: len(ds) > MaxDecisions}
	if rep.Truncated {
		ds = ds[:MaxDecisions]
	}
	rep.Rows = Rows(ds, q.By)
	return rep, nil
}

// human reports whether d was a reviewer's decision: not an expiry, nor
// an approval Airlock made itself (an approved command set's run is
// approved by "system"; these names are reserved, never usernames).
func human(d *Decision) bool {
	return d.Kind != KindExpired && !slices.Contains([]string{"system", "policy", "grant", "validator", "risk"}, d.Actor)
}

// Rows groups decisions (oldest first) by by and computes each row.
func Rows(ds []Decision, by string) []Row {
	type acc struct {
		row      Row
		decideMs []int64
		last     string
		runLen   int
	}
	groups := map[string]*acc{}
	var order []string
	for i := range ds {
		d := &ds[i]
		var key string
		switch by {
		case ByReviewer:
			if !human(d) {
				continue // expiries and automatic approvals are no one's
			}
			key = d.Actor
		case ByAgent:
			key = d.AgentID
		default:
			key = d.Tool
		}
		g := groups[key]
		if g == nil {
			g = &acc{row: Row{Key: key}}
			groups[key] = g
			order = append(order, key)
		}
		switch d.Kind {
		case KindApproved:
			g.row.Approvals++
			if d.OpenedAt != nil && d.DecidedAt.Sub(*d.OpenedAt) < QuickApproval {
				g.row.QuickApprovals++
			}
		case KindDenied:
			g.row.Denials++
		case KindExpired:
			g.row.Expiries++
		}
		if human(d) {
			g.decideMs = append(g.decideMs, d.DecidedAt.Sub(d.CreatedAt).Milliseconds())
		}
		if d.Kind == KindApproved {
			call := callKey(d)
			if call == g.last {
				g.runLen++
			} else {
				g.last, g.runLen = call, 1
			}
			g.row.LongestIdenticalRun = max(g.row.LongestIdenticalRun, g.runLen)
		} else {
			g.last, g.runLen = "", 0
		}
	}
	rows := make([]Row, 0, len(order))
	for _, key := range order {
		g := groups[key]
		if decided := g.row.Approvals + g.row.Denials; decided > 0 {
			g.row.ApprovalRate = float64(g.row.Approvals) / float64(decided)
		}
		g.row.MedianDecideMs = percentile(g.decideMs, 50)
		g.row.P90DecideMs = percentile(g.decideMs, 90)
		rows = append(rows, g.row)
	}
	slices.SortStableFunc(rows, func(a, b Row) int {
		na, nb := a.Approvals+a.Denials+a.Expiries, b.Approvals+b.Denials+b.Expiries
		if na != nb {
			return nb - na
		}
		return strings.Compare(a.Key, b.Key)
	})
	return rows
}

// percentile is the nearest-rank p-th percentile of xs (0 for none).
func percentile(xs []int64, p int) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := (p*len(s) + 99) / 100 // ceil(p/100 * n)
	return s[max(rank, 1)-1]
}

// callKey identifies an identical call: agent, tool and target (the
// canonical path of a path tool, else the whole arguments), as an
// "always" approval would allow it.
func callKey(d *Decision) string {
	b, _ := json.Marshal(policy.TargetOf(d.Tool, d.Args))
	return d.AgentID + "\x00" + string(b)
}

// Opened records that reviewer opened action id's page now: the console
// calls it for a pending action, once per page view; a repeat is free.
func (s *Service) Opened(ctx context.Context, a *hitl.Action, reviewer string) error {
	if a.Status != hitl.StatusPending {
		return nil
	}
	if err := s.store.RecordOpen(ctx, a.ID, reviewer, s.now().UTC()); err != nil {
		return fmt.Errorf("insights: recording a page open: %w", err)
	}
	return nil
}
