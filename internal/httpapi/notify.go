package httpapi

import (
	"net/http"

	"github.com/airlockhq/airlock/internal/apperr"
	"github.com/airlockhq/airlock/internal/auth"
	"github.com/airlockhq/airlock/internal/groups"
	"github.com/airlockhq/airlock/internal/notify"
)

// Notification targets and reviewer groups (issue 13): the handlers
// decode, call notify.Targets or groups.Service (which hold the rules) and
// respond.

type notifyTargetList struct {
	Targets []notify.Target `json:"targets"`
}

func (s *Server) createNotifyTarget(w http.ResponseWriter, r *http.Request) {
	var t notify.Target
	if err := decode(w, r, &t); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out, err := s.targets.Create(r.Context(), auth.FromContext(r.Context()).Subject, t)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listNotifyTargets(w http.ResponseWriter, r *http.Request) {
	ts, err := s.targets.List(r.Context())
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, notifyTargetList{Targets: ts})
}

func (s *Server) deleteNotifyTarget(w http.ResponseWriter, r *http.Request) {
	name, ok := s.pathParam(w, r, "name")
	if !ok {
		return
	}
	if err := s.targets.Delete(r.Context(), auth.FromContext(r.Context()).Subject, name); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type groupList struct {
	Groups []groups.Group `json:"groups"`
}

func (s *Server) createGroup(w http.ResponseWriter, r *http.Request) {
	var g groups.Group
	if err := decode(w, r, &g); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out, err := s.groups.Create(r.Context(), auth.FromContext(r.Context()).Subject, g)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) {
	gs, err := s.groups.List(r.Context())
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, groupList{Groups: gs})
}

func (s *Server) getGroup(w http.ResponseWriter, r *http.Request) {
	name, ok := s.pathParam(w, r, "name")
	if !ok {
		return
	}
	g, err := s.groups.Get(r.Context(), name)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, g)
}

func (s *Server) putGroup(w http.ResponseWriter, r *http.Request) {
	name, ok := s.pathParam(w, r, "name")
	if !ok {
		return
	}
	var g groups.Group
	if err := decode(w, r, &g); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if g.Name == "" {
		g.Name = name
	}
	if g.Name != name {
		writeError(w, r, s.log, &apperr.Error{Code: apperr.CodeInvalid,
			Message: "the body's name must be the path's name (a group is not renamed)", Details: map[string]any{"field": "name"}})
		return
	}
	out, err := s.groups.Replace(r.Context(), auth.FromContext(r.Context()).Subject, g)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteGroup(w http.ResponseWriter, r *http.Request) {
	name, ok := s.pathParam(w, r, "name")
	if !ok {
		return
	}
	if err := s.groups.Delete(r.Context(), auth.FromContext(r.Context()).Subject, name); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// actionNotifications answers an action's escalation steps and
// notification deliveries (each attempt, status and error).
func (s *Server) actionNotifications(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathParam(w, r, "id")
	if !ok {
		return
	}
	if _, err := s.svc.Get(r.Context(), id); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out, err := s.svc.Routing(r.Context(), id)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
