package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/web/templates"
)

// notices are the messages shown after a decision (?done=…).
var notices = map[string]string{
	"approved": "Approved. The agent's wait returns now.",
	"approval": "Your approval is recorded; the action waits for more reviewers.",
	"denied":   "Denied. The agent's wait returns now, with your reason.",
	"stopped":  "Cancelled. It will not run; a running command is killed within one heartbeat.",
}

func (h *Handler) action(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathParam(w, r, "id")
	if !ok {
		return
	}
	a, err := h.svc.Get(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.opened(r, a)
	p := h.page(r, a.Tool, "queue")
	p.Notice = notices[r.URL.Query().Get("done")]
	h.renderAction(w, r, http.StatusOK, p, a, templates.ActionView{})
}

// renderAction renders an action's page; form carries what a refused
// submission had entered.
func (h *Handler) renderAction(w http.ResponseWriter, r *http.Request, status int, p templates.Page, a *hitl.Action, form templates.ActionView) {
	pr := auth.FromContext(r.Context())
	v := form
	v.Action = *a
	if pr.Has(auth.RoleReviewer) {
		v.Action = a.ForReviewer()
	}
	v.Args = templates.Pretty(a.Args)
	v.Result = templates.PrettyRaw(a.Result)
	v.Preview = templates.PrettyRaw(a.Preview)
	v.Builtin = builtinView(a)
	v.Injection, v.ReasonFlagged = hitl.ResultInjectionOf(a.Result), hitl.ReasonFlagged(a)
	v.CanDecide = pr.Has(auth.RoleReviewer) && a.Status == hitl.StatusPending
	v.AlreadyApproved = a.ApprovedBy(pr.Subject)
	v.CanStop = pr.HasAny(auth.RoleReviewer, auth.RoleAdmin) && (a.Status == hitl.StatusApproved || a.Status == hitl.StatusRunning)
	v.AuditLinks = pr.Has(auth.RoleAuditor)
	switch {
	case a.Decision.Source == "fleet" && a.Decision.PolicyVersion > 0:
		v.PolicyURL = templates.VersionURL("/ui/fleet", a.Decision.PolicyVersion)
	case a.Decision.PolicyVersion > 0:
		v.PolicyURL = templates.VersionURL(templates.AgentURL(a.AgentID)+"/policy", a.Decision.PolicyVersion)
	}
	if a.Status == hitl.StatusPending {
		budgets, err := h.svc.Budgets(r.Context(), a)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		v.Budgets = budgets
	}
	routing, err := h.svc.Routing(r.Context(), a.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v.Routing = routing
	if v.CanDecide && !v.AlreadyApproved {
		why, err := h.svc.ApprovalProblem(r.Context(), a, pr.Subject)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		v.CannotApprove = why
		v.Scopes = h.scopes(r.Context(), a)
	}
	p.Scripts = append(p.Scripts, "/static/js/action.js")
	h.render(w, r, status, templates.ActionPage(p, v))
}

// scopeLabels names the scopes on the approve form.
var scopeLabels = map[hitl.Scope]string{
	hitl.ScopeOnce:         "Once",
	hitl.ScopeConversation: "This conversation (24 h, same rule)",
	hitl.ScopeAlways:       "Always, for exactly this target (adds an allow to the agent's policy)",
}

// scopes lists the approval scopes with the service's rule for each
// (hitl.ScopeProblem): the console never offers what Approve refuses.
func (h *Handler) scopes(ctx context.Context, a *hitl.Action) []templates.ScopeOption {
	opts := h.svc.ScopeOptions(ctx, a)
	out := make([]templates.ScopeOption, len(opts))
	for i, o := range opts {
		out[i] = templates.ScopeOption{Value: string(o.Scope), Label: scopeLabels[o.Scope], Allowed: o.Allowed, Why: o.Why}
	}
	return out
}

// decided re-renders the action after a refused decision, with the reason
// shown at the top, or redirects after a successful one.
func (h *Handler) decided(w http.ResponseWriter, r *http.Request, a *hitl.Action, err error, form templates.ActionView, done string) {
	id, ok := h.pathParam(w, r, "id")
	if !ok {
		return
	}
	if err == nil {
		seeOther(w, r, templates.ActionURL(a.ID)+"?done="+done)
		return
	}
	switch apperr.CodeOf(err) {
	case apperr.CodeNotFound, apperr.CodeInternal, apperr.CodeUnavailable:
		h.fail(w, r, err)
		return
	}
	cur, gerr := h.svc.Get(r.Context(), id)
	if gerr != nil {
		h.fail(w, r, gerr)
		return
	}
	p := h.page(r, cur.Tool, "queue")
	if form.PhraseError == "" || cur.Status != hitl.StatusPending {
		p.Error = h.message(r, err)
	}
	h.renderAction(w, r, statusOf(err), p, cur, form)
}

func (h *Handler) approve(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathParam(w, r, "id")
	if !ok {
		return
	}
	req := hitl.ApproveRequest{
		Confirmation: r.PostForm.Get("confirmation"),
		Scope:        hitl.Scope(r.PostForm.Get("scope")),
		Comment:      strings.TrimSpace(r.PostForm.Get("comment")),
	}
	// What the page showed of the preview (the form's "shown", "" when it
	// sent none): the approval pins nothing else.
	shown := r.PostForm.Get("shown")
	req.Shown = &shown
	form := templates.ActionView{Scope: string(req.Scope), Comment: req.Comment}
	user := auth.FromContext(r.Context()).Subject
	a, err := h.svc.Approve(r.Context(), id, user, req)
	done := "approved"
	if err == nil && a.Status == hitl.StatusPending {
		done = "approval"
	}
	if apperr.CodeOf(err) == apperr.CodeWrongPhrase {
		// Shown at the field, with what was typed kept for correcting.
		form.Confirmation = req.Confirmation
		form.PhraseError = "The confirmation phrase does not match. Nothing was changed: type the phrase exactly as shown."
		err = apperr.New(apperr.CodeWrongPhrase, "%s", form.PhraseError)
	}
	h.decided(w, r, a, err, form, done)
}

func (h *Handler) deny(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathParam(w, r, "id")
	if !ok {
		return
	}
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	form := templates.ActionView{DenyReason: reason}
	if reason == "" {
		h.decided(w, r, nil, apperr.Validation("Give a reason for the denial: the agent and the audit trail get it."), form, "")
		return
	}
	user := auth.FromContext(r.Context()).Subject
	a, err := h.svc.Deny(r.Context(), id, user, hitl.DenyRequest{Reason: reason})
	h.decided(w, r, a, err, form, "denied")
}

// stop cancels an approved or running action (reviewer, admin) through
// the same service as POST /api/v1/actions/{id}/cancel.
func (h *Handler) stop(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathParam(w, r, "id")
	if !ok {
		return
	}
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	a, err := h.svc.Stop(r.Context(), id, auth.FromContext(r.Context()).Subject, hitl.StopRequest{Reason: reason})
	h.decided(w, r, a, err, templates.ActionView{}, "stopped")
}

// builtinView reads an exec or worktree action for its page; nil for tools
// the agent runs itself.
func builtinView(a *hitl.Action) *templates.BuiltinView {
	if !hitl.IsBuiltin(a.Tool) {
		return nil
	}
	str := func(k string) string { s, _ := a.Args[k].(string); return s }
	b := &templates.BuiltinView{}
	if raw, ok := a.Args["argv"].([]any); ok {
		for _, v := range raw {
			if s, ok := v.(string); ok {
				b.Argv = append(b.Argv, s)
			}
		}
	}
	b.Network, _ = a.Args["network"].(bool)
	switch {
	case str("workspace") != "":
		b.Workspace = "workspace " + str("workspace")
	case str("worktree") != "":
		b.Workspace = "worktree " + str("worktree")
	case str("repo") != "":
		b.Workspace = "repository " + str("repo")
	}
	if len(a.Result) > 0 {
		var r hitl.JobResultView
		if json.Unmarshal(a.Result, &r) == nil {
			b.HasResult, b.Note, b.SandboxHint = true, r.Note, r.SandboxHint
			b.ExitCode, b.Stdout, b.Stderr, b.Truncated = r.ExitCode, r.Stdout, r.Stderr, r.Truncated
			b.DurationMS, b.Error, b.Branch, b.Commit = r.DurationMS, r.Error, r.Branch, r.Commit
			if r.Diff != "" {
				b.Diff, b.DiffTitle = templates.UnifiedDiff(r.Diff), "Diff against the base"
			}
		}
	}
	if a.Tool == hitl.ToolWorktreeRun || a.Tool == hitl.ToolFSWrite || a.Tool == hitl.ToolFSPatch {
		lifecycleView(a, b)
	}
	impactView(a, b) // impact.go
	if a.Tool == hitl.ToolWorktreeMerge {
		var p hitl.Preview
		switch {
		case len(a.Preview) == 0 || json.Unmarshal(a.Preview, &p) != nil:
			b.DiffPending = a.Status == hitl.StatusPending
		case p.Error != "":
			b.HasResult, b.Error, b.ExitCode = true, "preview failed: "+p.Error, -1
		default:
			b.Diff, b.DiffTitle, b.Commit = templates.UnifiedDiff(p.Diff), "What approving merges into "+p.Base, p.Commit
			b.DiffFlags = p.Flags
		}
	}
	return b
}
