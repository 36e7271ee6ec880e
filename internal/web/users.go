package web

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/identity"
	"github.com/airlockhq/airlock/web/templates"
)

// The users pages decode forms, call identity.Service (which holds every
// rule about users: names, roles, passwords, the last admin, who may change
// whom) and render.

func (h *Handler) users(w http.ResponseWriter, r *http.Request) {
	p := h.page(r, "Users", "users")
	q := r.URL.Query()
	switch {
	case q.Get("created") != "":
		p.Notice = "User " + q.Get("created") + " created."
	case q.Get("changed") != "":
		p.Notice = "User " + q.Get("changed") + ": " + changeNotices[q.Get("what")]
	case q.Get("deleted") != "":
		p.Notice = "User " + q.Get("deleted") + " deleted: its sessions have ended."
	}
	h.renderUsers(w, r, http.StatusOK, p, templates.UsersView{Roles: map[string]bool{"reviewer": true}})
}

func (h *Handler) renderUsers(w http.ResponseWriter, r *http.Request, status int, p templates.Page, v templates.UsersView) {
	actor := auth.FromContext(r.Context())
	list, err := h.ident.Users(r.Context(), actor)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v.Users, v.Me = list, actor.Subject
	h.render(w, r, status, templates.Users(p, v))
}

// usersError shows a refused change on the users page, or the error page
// for what is not a domain error.
func (h *Handler) usersError(w http.ResponseWriter, r *http.Request, err error, v templates.UsersView) {
	if _, ok := apperr.As(err); !ok || apperr.CodeOf(err) == apperr.CodeForbidden {
		h.fail(w, r, err)
		return
	}
	p := h.page(r, "Users", "users")
	p.Error = h.message(r, err)
	h.renderUsers(w, r, statusOf(err), p, v)
}

func formRoles(f url.Values) []auth.Role {
	roles := []auth.Role{}
	for _, role := range f["roles"] {
		roles = append(roles, auth.Role(role))
	}
	return roles
}

// createUser creates a user (POST /api/v1/users's rules: the service's).
func (h *Handler) createUser(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	v := templates.UsersView{Username: strings.TrimSpace(f.Get("username")), Roles: map[string]bool{}}
	for _, role := range f["roles"] {
		v.Roles[role] = true
	}
	_, err := h.ident.CreateUser(r.Context(), auth.FromContext(r.Context()),
		identity.NewUser{Username: v.Username, Password: f.Get("password"), Roles: formRoles(f)})
	if err != nil {
		h.usersError(w, r, err, v)
		return
	}
	seeOther(w, r, "/ui/users?created="+url.QueryEscape(v.Username))
}

// changeNotices say what a users page control did.
var changeNotices = map[string]string{
	"roles":    "roles saved; they apply to its sessions at once.",
	"disable":  "disabled; its sessions and tokens have ended on every instance.",
	"enable":   "enabled; it may sign in again.",
	"password": "password reset; its sessions have ended.",
}

// updateUser applies one of the users page's controls to the user in the
// path: roles, disable, enable or password (an admin's reset).
func (h *Handler) updateUser(w http.ResponseWriter, r *http.Request) {
	change, ok := h.pathParam(w, r, "change")
	if !ok {
		return
	}
	username, ok := h.pathParam(w, r, "username")
	if !ok {
		return
	}
	var patch identity.UserPatch
	switch change {
	case "roles":
		roles := formRoles(r.PostForm)
		patch.Roles = &roles
	case "disable", "enable":
		disabled := change == "disable"
		patch.Disabled = &disabled
	case "password":
		password := r.PostForm.Get("password")
		patch.Password = &password
	default:
		h.fail(w, r, errNotFound)
		return
	}
	u, err := h.ident.UpdateUser(r.Context(), auth.FromContext(r.Context()), username, patch)
	if err != nil {
		h.usersError(w, r, err, templates.UsersView{Roles: map[string]bool{"reviewer": true}})
		return
	}
	seeOther(w, r, "/ui/users?"+url.Values{"changed": {u.Username}, "what": {change}}.Encode())
}

func (h *Handler) deleteUser(w http.ResponseWriter, r *http.Request) {
	username, ok := h.pathParam(w, r, "username")
	if !ok {
		return
	}
	if err := h.ident.DeleteUser(r.Context(), auth.FromContext(r.Context()), username); err != nil {
		h.usersError(w, r, err, templates.UsersView{Roles: map[string]bool{"reviewer": true}})
		return
	}
	seeOther(w, r, "/ui/users?deleted="+url.QueryEscape(username))
}

// account is every user's own page.
func (h *Handler) account(w http.ResponseWriter, r *http.Request) {
	p := h.page(r, "Your account", "account")
	if r.URL.Query().Get("changed") != "" {
		p.Notice = "Password changed. Your other sessions have ended."
	}
	h.renderAccount(w, r, http.StatusOK, p)
}

func (h *Handler) renderAccount(w http.ResponseWriter, r *http.Request, status int, p templates.Page) {
	me := auth.FromContext(r.Context())
	v := templates.AccountView{Username: me.Subject}
	for _, role := range me.Roles {
		v.Roles = append(v.Roles, string(role))
	}
	h.render(w, r, status, templates.Account(p, v))
}

// changePassword changes the signed-in user's own password; the current one
// must be given.
func (h *Handler) changePassword(w http.ResponseWriter, r *http.Request) {
	me := auth.FromContext(r.Context())
	current, password := r.PostForm.Get("current_password"), r.PostForm.Get("password")
	_, err := h.ident.UpdateUser(r.Context(), me, me.Subject, identity.UserPatch{Password: &password, CurrentPassword: &current,
		Addr: h.api.ClientAddr(r)})
	if err != nil {
		if _, ok := apperr.As(err); !ok {
			h.fail(w, r, err)
			return
		}
		p := h.page(r, "Your account", "account")
		p.Error = h.message(r, err)
		h.renderAccount(w, r, statusOf(err), p)
		return
	}
	seeOther(w, r, "/ui/account?changed=1")
}
