package app

import (
	"fmt"

	"github.com/airlockhq/airlock/internal/identity"
	"github.com/airlockhq/airlock/internal/sso"
)

// newSSO builds single sign-on when AIRLOCK_OIDC_ISSUER is set (nil
// otherwise). Its redirect URL is AIRLOCK_PUBLIC_URL's, else the listen
// address's. Reviewer groups are not synced from the provider's groups
// (sso.NoGroupSync) until a GroupSync is wired here.
func (a *App) newSSO(ident *identity.Service, key []byte) (*sso.Service, error) {
	if !a.cfg.OIDC.Enabled() {
		return nil, nil
	}
	public := a.cfg.PublicURL
	if public == "" {
		public = a.URL()
	}
	s, err := sso.New(a.cfg.OIDC, sso.Options{Identity: ident, PublicURL: public, Key: key, Logger: a.log})
	if err != nil {
		return nil, fmt.Errorf("app: single sign-on: %w", err)
	}
	a.log.Info("single sign-on", "issuer", s.Issuer(), "redirect_url", s.RedirectURL())
	return s, nil
}
