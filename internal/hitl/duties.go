package hitl

import (
	"context"
	"strings"

	"github.com/airlockhq/airlock/internal/apperr"
)

// ApprovalProblem says why reviewer may not approve a, or "" when they
// may. It is the one rule of approval eligibility, used by Approve, the
// queue's "actions I can approve" filter (List with CanApprove), the JSON
// API and the console (which shows the reason and no approve form):
//   - when the rule that holds the action names reviewers, only members of
//     those groups (or of groups an escalation step that fired added) may
//     approve it;
//   - with the setting separation_of_duties, neither the agent's owner
//     nor the user who issued the token the action was submitted with may
//     approve it (one person must not be both the requester and the
//     approver).
func (s *Service) ApprovalProblem(ctx context.Context, a *Action, reviewer string) (string, error) {
	return s.approvalProblem(ctx, a, reviewer, nil)
}

// approvalProblem is ApprovalProblem; sod, when not nil, is a listing's:
// the store already selected actions by the reviewer groups
// (ReviewerAccess's condition, as ListFilter.CanApprove), and it remembers
// each agent's separation_of_duties across the listing's actions.
func (s *Service) approvalProblem(ctx context.Context, a *Action, reviewer string, sod map[string]bool) (string, error) {
	if sod == nil {
		if why, err := s.reviewerProblem(ctx, a, reviewer); err != nil || why != "" {
			return why, err
		}
	}
	on, known := sod[a.AgentID]
	if !known {
		_, set, err := s.store.AgentPolicy(ctx, a.AgentID)
		if err != nil {
			return "", err
		}
		on = set.EffectiveSettings().SeparationOfDuties
		if sod != nil {
			sod[a.AgentID] = on
		}
	}
	if !on {
		return "", nil
	}
	owner, issuer, err := s.store.Answerable(ctx, a.AgentID, a.TokenID)
	if err != nil {
		return "", err
	}
	switch {
	case owner != "" && strings.EqualFold(owner, reviewer):
		return reviewer + " owns agent " + a.AgentID + " and may not approve its actions (separation_of_duties)", nil
	case issuer != "" && strings.EqualFold(issuer, reviewer):
		return reviewer + " issued the token this action was submitted with and may not approve it (separation_of_duties)", nil
	case a.TokenID == "":
		// Who issued the token is unknown (an action stored before tokens
		// were recorded): it cannot be shown that the reviewer did not.
		return "the token this action was submitted with is not known, so separation_of_duties cannot be checked; deny it or turn the setting off", nil
	}
	return "", nil
}

func (s *Service) checkDuties(ctx context.Context, a *Action, reviewer string) error {
	why, err := s.ApprovalProblem(ctx, a, reviewer)
	if err != nil {
		return err
	}
	if why != "" {
		return apperr.Forbidden("%s", why)
	}
	return nil
}
