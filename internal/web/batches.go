package web

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/hitl"
	"github.com/airlockhq/airlock/web/templates"
)

// createBatch makes a batch of the queue's checked rows and opens it; a
// selection the service refuses is shown on the queue.
func (h *Handler) createBatch(w http.ResponseWriter, r *http.Request) {
	user := auth.FromContext(r.Context()).Subject
	b, err := h.svc.CreateBatch(r.Context(), user, hitl.BatchRequest{IDs: r.PostForm["ids"]})
	if err != nil {
		switch apperr.CodeOf(err) {
		case apperr.CodeInternal, apperr.CodeUnavailable:
			h.fail(w, r, err)
			return
		}
		p := h.page(r, "Queue", "queue")
		p.Error = "Not batched: " + h.message(r, err)
		h.renderQueue(w, r, statusOf(err), p)
		return
	}
	seeOther(w, r, templates.BatchURL(b.ID))
}

// batchView reads the batch's actions for its page.
func (h *Handler) batchView(r *http.Request, b *hitl.Batch) (templates.BatchView, error) {
	v := templates.BatchView{Batch: *b}
	for _, id := range b.IDs {
		a, err := h.svc.Get(r.Context(), id)
		if err != nil {
			return v, err
		}
		v.Actions = append(v.Actions, templates.BatchItem{Action: *a, Args: templates.Pretty(a.Args)})
	}
	if len(v.Actions) > 0 {
		d := v.Actions[0].Action.Decision
		v.RuleLine = fmt.Sprintf("Sent to review by %s rule %s (version %d)", d.Source, d.RuleID, d.PolicyVersion)
	}
	return v, nil
}

func (h *Handler) batch(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathParam(w, r, "id")
	if !ok {
		return
	}
	user := auth.FromContext(r.Context()).Subject
	b, err := h.svc.Batch(r.Context(), id, user)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v, err := h.batchView(r, b)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, templates.BatchPage(h.page(r, "Batch", "queue"), v))
}

func (h *Handler) approveBatch(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathParam(w, r, "id")
	if !ok {
		return
	}
	user := auth.FromContext(r.Context()).Subject
	req := hitl.BatchApproveRequest{Confirmation: r.PostForm.Get("confirmation"), Comment: strings.TrimSpace(r.PostForm.Get("comment"))}
	b, out, err := h.svc.ApproveBatch(r.Context(), id, user, req)
	status := http.StatusOK
	p := h.page(r, "Batch", "queue")
	if err != nil {
		switch apperr.CodeOf(err) {
		case apperr.CodeNotFound, apperr.CodeInternal, apperr.CodeUnavailable:
			h.fail(w, r, err)
			return
		}
		cur, gerr := h.svc.Batch(r.Context(), id, user)
		if gerr != nil {
			h.fail(w, r, gerr)
			return
		}
		b, status = cur, statusOf(err)
	}
	v, verr := h.batchView(r, b)
	if verr != nil {
		h.fail(w, r, verr)
		return
	}
	switch {
	case err != nil && apperr.CodeOf(err) == apperr.CodeWrongPhrase:
		v.Typed, v.Comment = req.Confirmation, req.Comment
		v.FieldError = "The phrase does not match this batch's (it names how many actions you approve). Nothing was approved; the try counts as a wrong phrase for each action."
	case err != nil:
		p.Error = h.message(r, err)
	default:
		v.Outcomes = out
		p.Notice = batchNotice(out)
	}
	h.render(w, r, status, templates.BatchPage(p, v))
}

// batchNotice sums up what approving a batch did.
func batchNotice(out []hitl.BatchOutcome) string {
	n := map[string]int{}
	for _, o := range out {
		n[o.Outcome]++
	}
	s := fmt.Sprintf("%d approved", n[hitl.BatchApproved])
	if k := n[hitl.BatchApprovalRecorded]; k > 0 {
		s += fmt.Sprintf(", %d waiting for more reviewers", k)
	}
	if k := n[hitl.BatchRefused]; k > 0 {
		s += fmt.Sprintf(", %d refused (see below)", k)
	}
	return s + "."
}
