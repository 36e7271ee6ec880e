package web

import (
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/web/templates"
)

func (h *Handler) users(w http.ResponseWriter, r *http.Request) {
	h.renderUsers(w, r, http.StatusOK, "", templates.UsersView{Roles: map[string]bool{"reviewer": true}})
}

func (h *Handler) renderUsers(w http.ResponseWriter, r *http.Request, status int, msg string, v templates.UsersView) {
	list, err := h.store.Users(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v.Users = list
	p := h.page(r, "Users", "users")
	p.Error = msg
	if u := r.URL.Query().Get("created"); u != "" {
		p.Notice = "User " + u + " created."
	}
	h.render(w, r, status, templates.Users(p, v))
}

// createUser creates a user with the same rules as POST /api/v1/users.
func (h *Handler) createUser(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	v := templates.UsersView{Username: strings.TrimSpace(f.Get("username")), Roles: map[string]bool{}}
	var roles []auth.Role
	for _, role := range f["roles"] {
		if !auth.ValidUserRole(auth.Role(role)) {
			h.renderUsers(w, r, http.StatusBadRequest, "Unknown role "+role+".", v)
			return
		}
		v.Roles[role] = true
		roles = append(roles, auth.Role(role))
	}
	password := f.Get("password")
	switch {
	case v.Username == "":
		h.renderUsers(w, r, http.StatusBadRequest, "Choose a username.", v)
		return
	case len(roles) == 0:
		h.renderUsers(w, r, http.StatusBadRequest, "Give the user at least one role.", v)
		return
	case utf8.RuneCountInString(password) < auth.MinPasswordLen || len(password) > 1024:
		h.renderUsers(w, r, http.StatusBadRequest, "The password must be 12 to 1024 characters long.", v)
		return
	}
	hash, err := auth.HashPassword(password)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	_, err = h.store.CreateUser(r.Context(), store.User{Username: v.Username, PasswordHash: hash, Roles: roles},
		auth.FromContext(r.Context()).Subject)
	if err != nil {
		if _, ok := apperr.As(err); !ok {
			h.fail(w, r, err)
			return
		}
		h.renderUsers(w, r, statusOf(err), h.message(r, err), v)
		return
	}
	seeOther(w, r, "/ui/users?created="+url.QueryEscape(v.Username))
}
