package app

import (
	"context"
	"fmt"

	"github.com/airlockhq/airlock/internal/groups"
	"github.com/airlockhq/airlock/internal/identity"
	"github.com/airlockhq/airlock/internal/sso"
)

// newSSO builds single sign-on when AIRLOCK_OIDC_ISSUER is set (nil
// otherwise). Its redirect URL is AIRLOCK_PUBLIC_URL's, else the listen
// address's. The provider's groups set the user's memberships of the
// reviewer groups of the same names at every sign-in (groupSync).
func (a *App) newSSO(ident *identity.Service, key []byte, reviewerGroups *groups.Service) (*sso.Service, error) {
	if !a.cfg.OIDC.Enabled() {
		return nil, nil
	}
	s, err := sso.New(a.cfg.OIDC, sso.Options{Identity: ident, PublicURL: a.publicURL(), Key: key, Logger: a.log,
		Groups: groupSync{reviewerGroups}})
	if err != nil {
		return nil, fmt.Errorf("app: single sign-on: %w", err)
	}
	a.log.Info("single sign-on", "issuer", s.Issuer(), "redirect_url", s.RedirectURL())
	return s, nil
}

// groupSync makes a signed-in user a member of exactly the existing
// reviewer groups the provider lists (memberships an admin set by hand
// stay as they are).
type groupSync struct{ groups *groups.Service }

// SetMemberships implements sso.GroupSync.
func (g groupSync) SetMemberships(ctx context.Context, username string, names []string) error {
	_, err := g.groups.SyncMemberships(ctx, username, "oidc", names)
	return err
}

// publicURL is where browsers reach the server: AIRLOCK_PUBLIC_URL, else
// the listen address. Single sign-on's redirect URL and the links in
// notifications are built on it.
func (a *App) publicURL() string {
	if a.cfg.PublicURL != "" {
		return a.cfg.PublicURL
	}
	return a.URL()
}
