package worker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock/internal/hitl"
)

// TargetSource tells the server which targets ("workspace:NAME",
// "repo:NAME") the active worker tokens serve (store.Store is one).
type TargetSource interface {
	ServedTargets(ctx context.Context) ([]string, error)
	ServesTarget(ctx context.Context, target string) (bool, error)
}

// DefaultTargetsTTL is how long the set of served targets is trusted
// before it is read again.
const DefaultTargetsTTL = 5 * time.Second

// ServedTargets is the server's view of what its workers serve, so that a
// built-in call naming an unknown workspace or repository is denied at
// submit instead of waiting forever for a worker that never comes. The set
// is read from the worker tokens and kept for a short TTL; a target that is
// not in it is looked up again at once, so a target registered a moment ago
// is never refused. A target whose last token was just revoked may be
// accepted for up to the TTL (its job then waits like any unserved job).
type ServedTargets struct {
	src TargetSource
	ttl time.Duration
	now func() time.Time

	reload sync.Mutex // held while the set is read from the source
	mu     sync.Mutex // guards set and loaded
	set    map[string]bool
	loaded time.Time
}

// NewServedTargets returns a cache over src (ttl <= 0: DefaultTargetsTTL).
func NewServedTargets(src TargetSource, ttl time.Duration) *ServedTargets {
	if ttl <= 0 {
		ttl = DefaultTargetsTTL
	}
	return &ServedTargets{src: src, ttl: ttl, now: time.Now}
}

// Serves reports whether some active worker token serves target.
func (s *ServedTargets) Serves(ctx context.Context, target string) (bool, error) {
	hit, fresh := s.lookup(target)
	if hit {
		return true, nil
	}
	if !fresh {
		// One reload at a time; the others wait for it and use it.
		s.reload.Lock()
		defer s.reload.Unlock()
		if hit, fresh = s.lookup(target); hit || fresh {
			return hit, nil
		}
		list, err := s.src.ServedTargets(ctx)
		if err != nil {
			return false, err
		}
		set := make(map[string]bool, len(list))
		for _, t := range list {
			set[t] = true
		}
		s.mu.Lock()
		s.set, s.loaded = set, s.now()
		s.mu.Unlock()
		return set[target], nil
	}
	// A miss in a fresh set: the target may have been registered since.
	ok, err := s.src.ServesTarget(ctx, target)
	if err != nil {
		return false, err
	}
	if ok {
		s.mu.Lock()
		s.set[target] = true
		s.mu.Unlock()
	}
	return ok, nil
}

// lookup reports whether target is in the set and whether the set is
// fresh.
func (s *ServedTargets) lookup(target string) (hit, fresh bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fresh = s.set != nil && s.now().Sub(s.loaded) < s.ttl
	return fresh && s.set[target], fresh
}

// Refuse returns why a built-in call must not be accepted because no
// worker serves its target, or "". It fails closed: a target that cannot
// be checked is refused.
func (s *ServedTargets) Refuse(ctx context.Context, tool string, args map[string]any) string {
	target, err := hitl.TargetOf(tool, args)
	if err != nil {
		return err.Error()
	}
	if target == "" {
		return ""
	}
	ok, err := s.Serves(ctx, target)
	if err != nil {
		return fmt.Sprintf("cannot check whether a worker serves %s; try again", describeTarget(target))
	}
	if !ok {
		return fmt.Sprintf("no worker serves %s: it is unknown or no worker for it is registered", describeTarget(target))
	}
	return ""
}

// describeTarget renders "workspace:docs" as `workspace "docs"`.
func describeTarget(target string) string {
	kind, name, _ := strings.Cut(target, ":")
	if kind == "repo" {
		kind = "repository"
	}
	return fmt.Sprintf("%s %q", kind, name)
}
