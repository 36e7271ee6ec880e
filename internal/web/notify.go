package web

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/groups"
	"github.com/airlockhq/airlock/internal/notify"
	"github.com/airlockhq/airlock/web/templates"
)

// The notification targets and reviewer groups pages decode forms, call
// notify.Targets and groups.Service (which hold the rules, as for the API)
// and render.

// splitList reads a comma- or whitespace-separated form field.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
}

func (h *Handler) notifyTargets(w http.ResponseWriter, r *http.Request) {
	p := h.page(r, "Notifications", "notify")
	q := r.URL.Query()
	switch {
	case q.Get("added") != "":
		p.Notice = "Notification target " + q.Get("added") + " added. Name it in a rule's notify or in the fleet's settings.notify."
	case q.Get("removed") != "":
		p.Notice = "Notification target " + q.Get("removed") + " removed."
	}
	h.renderTargets(w, r, http.StatusOK, p, templates.NotifyView{Form: templates.NotifyForm{Kind: notify.KindWebhook}})
}

func (h *Handler) renderTargets(w http.ResponseWriter, r *http.Request, status int, p templates.Page, v templates.NotifyView) {
	ts, err := h.targets.List(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v.Targets = ts
	h.render(w, r, status, templates.NotifyTargets(p, v))
}

// formError shows a refused change with the form as typed, or the error
// page for what is not a domain error.
func (h *Handler) formError(w http.ResponseWriter, r *http.Request, err error, show func(templates.Page)) {
	if _, ok := apperr.As(err); !ok || apperr.CodeOf(err) == apperr.CodeForbidden {
		h.fail(w, r, err)
		return
	}
	p := h.page(r, "", "")
	p.Error = h.message(r, err)
	show(p)
}

func (h *Handler) createNotifyTarget(w http.ResponseWriter, r *http.Request) {
	f := templates.NotifyForm{Name: strings.TrimSpace(r.PostForm.Get("name")), Kind: r.PostForm.Get("kind"),
		URL: strings.TrimSpace(r.PostForm.Get("url")), To: r.PostForm.Get("to"), AllowPrivate: r.PostForm.Get("allow_private")}
	t := notify.Target{Name: f.Name, Kind: f.Kind, URL: f.URL, Secret: r.PostForm.Get("secret"),
		To: splitList(f.To), AllowPrivate: splitList(f.AllowPrivate)}
	out, err := h.targets.Create(r.Context(), auth.FromContext(r.Context()).Subject, t)
	if err != nil {
		h.formError(w, r, err, func(p templates.Page) {
			p.Title, p.Nav = "Notifications", "notify"
			h.renderTargets(w, r, statusOf(err), p, templates.NotifyView{Form: f})
		})
		return
	}
	seeOther(w, r, "/ui/notify?added="+url.QueryEscape(out.Name))
}

func (h *Handler) deleteNotifyTarget(w http.ResponseWriter, r *http.Request) {
	name, ok := h.pathParam(w, r, "name")
	if !ok {
		return
	}
	if err := h.targets.Delete(r.Context(), auth.FromContext(r.Context()).Subject, name); err != nil {
		h.fail(w, r, err)
		return
	}
	seeOther(w, r, "/ui/notify?removed="+url.QueryEscape(name))
}

func (h *Handler) reviewerGroups(w http.ResponseWriter, r *http.Request) {
	p := h.page(r, "Reviewer groups", "groups")
	if saved := r.URL.Query().Get("saved"); saved != "" {
		p.Notice = "Group " + saved + " saved."
	}
	if removed := r.URL.Query().Get("removed"); removed != "" {
		p.Notice = "Group " + removed + " deleted."
	}
	h.renderGroups(w, r, http.StatusOK, p, templates.GroupsView{})
}

func (h *Handler) renderGroups(w http.ResponseWriter, r *http.Request, status int, p templates.Page, v templates.GroupsView) {
	gs, err := h.groups.List(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v.Groups = gs
	h.render(w, r, status, templates.Groups(p, v))
}

func (h *Handler) createGroup(w http.ResponseWriter, r *http.Request) {
	name, members := strings.TrimSpace(r.PostForm.Get("name")), r.PostForm.Get("members")
	_, err := h.groups.Create(r.Context(), auth.FromContext(r.Context()).Subject, groups.Group{Name: name, Members: nonNilList(splitList(members))})
	h.groupSaved(w, r, err, name, templates.GroupsView{Name: name, Members: members})
}

func (h *Handler) saveGroup(w http.ResponseWriter, r *http.Request) {
	name, ok := h.pathParam(w, r, "name")
	if !ok {
		return
	}
	members := r.PostForm.Get("members")
	_, err := h.groups.Replace(r.Context(), auth.FromContext(r.Context()).Subject, groups.Group{Name: name, Members: nonNilList(splitList(members))})
	h.groupSaved(w, r, err, name, templates.GroupsView{})
}

func (h *Handler) groupSaved(w http.ResponseWriter, r *http.Request, err error, name string, v templates.GroupsView) {
	if err != nil {
		h.formError(w, r, err, func(p templates.Page) {
			p.Title, p.Nav = "Reviewer groups", "groups"
			h.renderGroups(w, r, statusOf(err), p, v)
		})
		return
	}
	seeOther(w, r, "/ui/groups?saved="+url.QueryEscape(name))
}

func (h *Handler) deleteGroup(w http.ResponseWriter, r *http.Request) {
	name, ok := h.pathParam(w, r, "name")
	if !ok {
		return
	}
	if err := h.groups.Delete(r.Context(), auth.FromContext(r.Context()).Subject, name); err != nil {
		h.fail(w, r, err)
		return
	}
	seeOther(w, r, "/ui/groups?removed="+url.QueryEscape(name))
}

func nonNilList(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
