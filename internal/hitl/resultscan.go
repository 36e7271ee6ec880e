package hitl

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/airlockhq/airlock/internal/audit"
	"github.com/airlockhq/airlock/internal/policy"
	"github.com/airlockhq/airlock/internal/risk"
)

// ResultInjection is the "injection" object of an action's result: what
// the scan of what re-enters the agent's context (the reported output and
// error, or an exec's stdout, stderr and error) found, how it grades, and
// what the agent's effective settings made of it
// (policy.EffectiveSettings.InjectionVerdict).
type ResultInjection struct {
	// Action is policy.ResultFlag (kept and flagged) or policy.ResultRedact
	// (withheld from the agent): redact exactly when Verdict is refuse.
	Action string `json:"action"`
	// Findings describe the hits (risk.ScanInjection's descriptions),
	// without repeats, at most 16 (risk.ScanResult).
	Findings []string `json:"findings"`
	// Score grades the findings 1–100 (risk.GradeInjection).
	Score int `json:"score"`
	// Grade is low, medium or high (risk.InjectionGrade).
	Grade string `json:"grade"`
	// Verdict is caution, escalate or refuse (policy.VerdictCaution, …):
	// escalate is shown to reviewers as such.
	Verdict string `json:"verdict"`
}

// Withheld reports whether the result was withheld from the agent.
func (r *ResultInjection) Withheld() bool { return r != nil && r.Action == policy.ResultRedact }

// gradeInjection grades findings under the agent's effective settings,
// read fresh, not from the submit cache: nothing re-checks them later, and
// a stricter setting must hold at once. It returns nil when there is no
// finding or the score is below the caution threshold.
func (s *Service) gradeInjection(ctx context.Context, agentID string, findings []string) (*ResultInjection, error) {
	if len(findings) == 0 {
		return nil, nil
	}
	_, set, err := s.store.AgentPolicy(ctx, agentID)
	if err != nil {
		return nil, err
	}
	score, grade := risk.GradeInjection(findings)
	verdict := set.EffectiveSettings().InjectionVerdict(score)
	if verdict == policy.VerdictNone {
		return nil, nil
	}
	for i, f := range findings {
		findings[i] = audit.RedactString(f) // a quoted snippet may hold a secret
	}
	inj := &ResultInjection{Action: policy.ResultFlag, Findings: findings, Score: score, Grade: grade, Verdict: verdict}
	if verdict == policy.VerdictRefuse {
		inj.Action = policy.ResultRedact
	}
	return inj, nil
}

// withheldNote is what an exec result says instead of output withheld
// for a prompt injection.
func withheldNote(inj *ResultInjection) string {
	return "Airlock withheld this command's output because it looks like a prompt injection (" +
		strings.Join(inj.Findings, "; ") + "); the command did run. A reviewer can see the finding on the action."
}

// reasonInjection is the risk reason of a submit whose reason holds
// instruction-like text, or "": the reason is shown to reviewers, and an
// agent's reason can carry text meant to steer whoever reads it.
func reasonInjection(reason string) string {
	if reason == "" {
		return ""
	}
	hits := risk.ScanInjection(reason)
	if len(hits) == 0 {
		return ""
	}
	return ReasonInjectionPrefix + audit.RedactString(hits[0])
}

// ReasonInjectionPrefix starts the risk reason of an action whose reason
// contains instruction-like text.
const ReasonInjectionPrefix = "the agent's reason contains instruction-like text: "

// ReasonFlagged reports whether the action's reason was flagged at submit
// for instruction-like text (its risk reasons say so).
func ReasonFlagged(a *Action) bool {
	for _, r := range a.Risk.Reasons {
		if strings.HasPrefix(r, ReasonInjectionPrefix) {
			return true
		}
	}
	return false
}

// ResultInjectionOf reads the "injection" object of an action's stored
// result, or nil when it has none.
func ResultInjectionOf(result []byte) *ResultInjection {
	var r struct {
		Injection *ResultInjection `json:"injection"`
	}
	if len(result) == 0 || json.Unmarshal(result, &r) != nil {
		return nil
	}
	return r.Injection
}
